// src/exchange/test_group.h: runs a test body on every learner of an
// in-process group, one thread each (the exchange tests' harness).
// Test-only header.
#pragma once

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "adacomp/communicator.h"

namespace adacomp::exchange_test {

using Comms = std::vector<std::unique_ptr<Communicator>>;

inline void OnEveryRank(Comms& comms, const std::function<void(int rank, Communicator&)>& body) {
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r) {
    threads.emplace_back([&body, &comms, r] { body(static_cast<int>(r), *comms[r]); });
  }
  for (auto& t : threads) t.join();
}

}  // namespace adacomp::exchange_test
