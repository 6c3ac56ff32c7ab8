// tools/adacomp/bench_harness.h: the timing harness of `adacomp bench`:
// parts run on threads (back to back, or call by call from cold caches
// behind a barrier), calibrated repeats, medians, and the ratio to a
// reference pass timed moments before each repeat. Thread safety: a
// Failure is shared by the threads of one timed operation; the functions
// are reentrant.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace adacomp::tool {

// A failure inside a timed or verified operation, reported once.
class Failure {
 public:
  void Set(const std::string& message) {
    std::lock_guard<std::mutex> lock(mu_);
    if (message_.empty()) message_ = message;
    failed_.store(true);
  }
  bool failed() const { return failed_.load(); }
  std::string message() const {
    std::lock_guard<std::mutex> lock(mu_);
    return message_;
  }

 private:
  mutable std::mutex mu_;
  std::string message_;
  std::atomic<bool> failed_{false};
};

// Runs fn(part) for every part on its own thread (the calling thread takes
// part 0), `iters` times each; returns the wall time.
double RunParallel(int parts, uint64_t iters, const std::function<void(int)>& fn);

// The same, each call from cold caches (evict(part) first), the threads
// starting each call together; the summed time of the calls (each the
// longest of the threads' times for it); *wall: the whole run.
double RunParallelCold(int parts, uint64_t iters, const std::function<void(int)>& fn,
                       const std::function<void(int)>& evict, double* wall);

double Median(std::vector<double> v);

struct Timing {
  double seconds = 0;  // median over repeats of the time of one operation
  double ratio = 1;    // median over repeats of (operation / reference pass timed just before)
};

// Times fn over `repeats` repeats of at least min_time; when `reference` is
// given, each repeat first times the reference pass, so that the ratio
// pairs measurements taken moments apart. With `evict`, both are timed call
// by call from cold caches. fn runs on `parts` threads, the reference pass
// on `ref_parts`.
Timing TimeOp(int parts, int ref_parts, int repeats, double min_time,
              const std::function<void(int)>& fn, const std::function<void(int)>* reference,
              const std::function<void(int)>* evict = nullptr);

}  // namespace adacomp::tool
