// The timing harness of `adacomp bench` (see bench_harness.h).
#include "bench_harness.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace adacomp::tool {

// A reusable barrier from a mutex and a condition variable. Not std::barrier:
// libstdc++ 12 builds it on the same atomic wait as std::counting_semaphore,
// whose lost wake-up (GCC bug 104928) hung a trainer run here (see Gate in
// src/train/learner.h).
class Barrier {
 public:
  explicit Barrier(int parties) : parties_(parties) {}
  void ArriveAndWait() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t generation = generation_;
    if (++arrived_ == parties_) {
      arrived_ = 0;
      ++generation_;
      lock.unlock();
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int parties_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
};

// Runs fn(part) for every part on its own thread (the calling thread takes
// part 0), `iters` times each; returns the wall time.
double RunParallel(int parts, uint64_t iters, const std::function<void(int)>& fn) {
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int t = 1; t < parts; ++t) {
    workers.emplace_back([&, t] {
      for (uint64_t i = 0; i < iters; ++i) fn(t);
    });
  }
  for (uint64_t i = 0; i < iters; ++i) fn(0);
  for (auto& w : workers) w.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The same with every call started from cold caches, as a decode runs in
// training (a whole step's other work runs between two decodes of one
// tensor): before each call every thread runs evict(part), untimed, then all
// threads start the call together. Returns the summed time of the calls, each
// the longest of the threads' own times for it (not from the earliest start
// to the latest end: a thread woken late from the barrier would add its
// wake-up latency, tens of microseconds on a loaded machine, to calls that
// take a few); *wall receives the wall time of the whole run, eviction
// included.
double RunParallelCold(int parts, uint64_t iters, const std::function<void(int)>& fn,
                       const std::function<void(int)>& evict, double* wall) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::vector<double> took(parts);
  Barrier sync(parts);
  double timed = 0;  // written by part 0's thread only
  auto body = [&](int t) {
    for (uint64_t i = 0; i < iters; ++i) {
      evict(t);
      sync.ArriveAndWait();
      const auto begin = Clock::now();
      fn(t);
      took[t] = std::chrono::duration<double>(Clock::now() - begin).count();
      sync.ArriveAndWait();  // no thread writes took[] again before part 0 arrives next
      if (t == 0) timed += *std::max_element(took.begin(), took.end());
    }
  };
  std::vector<std::thread> workers;
  for (int t = 1; t < parts; ++t) workers.emplace_back(body, t);
  body(0);
  for (auto& w : workers) w.join();
  *wall = std::chrono::duration<double>(Clock::now() - start).count();
  return timed;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t m = v.size();
  return m == 0 ? 0.0 : m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}

// Iterations per repeat so that a repeat lasts at least min_time (runs fn
// once to find out: that run is also the warm-up).
static uint64_t Calibrate(int parts, double min_time, const std::function<void(int)>& fn) {
  double once = RunParallel(parts, 1, fn);
  if (once >= min_time) return 1;
  return std::clamp<uint64_t>(static_cast<uint64_t>(std::ceil(min_time / std::max(once, 1e-9))), 1,
                              10'000'000);
}

// Calibrate() for RunParallelCold: a repeat (eviction included) lasts about min_time.
static uint64_t CalibrateCold(int parts, double min_time, const std::function<void(int)>& fn,
                              const std::function<void(int)>& evict) {
  double wall = 0;
  RunParallelCold(parts, 1, fn, evict, &wall);
  return std::clamp<uint64_t>(static_cast<uint64_t>(std::ceil(min_time / std::max(wall, 1e-9))), 1,
                              10'000'000);
}

// Times fn over `repeats` repeats; when `reference` is given, each repeat
// first times the reference pass, so that the ratio pairs measurements taken
// moments apart (a change of machine load between rows cancels out). With
// `evict`, both are timed call by call from cold caches (RunParallelCold).
// fn runs on `parts` threads, the reference pass on `ref_parts`.
Timing TimeOp(int parts, int ref_parts, int repeats, double min_time,
              const std::function<void(int)>& fn, const std::function<void(int)>* reference,
              const std::function<void(int)>* evict) {
  auto calibrate = [&](int np, const std::function<void(int)>& f) {
    return evict ? CalibrateCold(np, min_time, f, *evict) : Calibrate(np, min_time, f);
  };
  auto run = [&](int np, uint64_t n, const std::function<void(int)>& f) {
    double wall = 0;
    return evict ? RunParallelCold(np, n, f, *evict, &wall) : RunParallel(np, n, f);
  };
  const uint64_t iters = calibrate(parts, fn);
  const uint64_t ref_iters = reference ? calibrate(ref_parts, *reference) : 0;
  std::vector<double> seconds, ratios;
  for (int r = 0; r < repeats; ++r) {
    double ref = reference ? run(ref_parts, ref_iters, *reference) / ref_iters : 0.0;
    double op = run(parts, iters, fn) / iters;
    seconds.push_back(op);
    if (reference) ratios.push_back(op / ref);
  }
  return {Median(seconds), reference ? Median(ratios) : 1.0};
}

}  // namespace adacomp::tool
