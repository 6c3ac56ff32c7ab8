// A minimal fork-join for the kernels that spread one tensor over threads
// (internal to adacomp_core). Threads are started per call: worth it only
// for large tensors, which is why callers use it above a size threshold.
#pragma once

#include <system_error>
#include <thread>
#include <vector>

namespace adacomp::internal {

// Runs fn(0) .. fn(workers - 1) and returns when all have finished: fn(0)
// on the calling thread, the others on threads of their own; a worker whose
// thread cannot be started runs on the calling thread afterwards. fn must
// not throw.
template <typename Fn>
void RunWorkers(int workers, Fn&& fn) {
  std::vector<std::thread> pool;
  std::vector<int> here;
  for (int w = 1; w < workers; ++w) {
    try {
      pool.emplace_back([&fn, w] { fn(w); });
    } catch (const std::system_error&) {
      here.push_back(w);
    }
  }
  fn(0);
  for (int w : here) fn(w);
  for (auto& t : pool) t.join();
}

}  // namespace adacomp::internal
