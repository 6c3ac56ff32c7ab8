// tools/adacomp/bench_exchange_bytes.h: `adacomp bench exchange-bytes`, the
// exact bytes each learner sends and receives in one step by every
// exchange, P = 2 .. 1024, on generated gradients (src/exchange/
// byte_simulation.h does the counting).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace adacomp::tool {

struct ExchangeBytesArgs {
  std::string elements = "1e6,2.5e7";
  std::string learners = "2,4,8,16,32,64,128,256,512,1024";
  uint32_t bin_size = 500;
  double own_scale = 1.0;
  std::string summed_values = "fp32";
  uint64_t seed = 1;
  std::string json;
};

// Registers the options on `sub`; RunExchangeBytes runs it.
void AddExchangeBytesOptions(CLI::App* sub, ExchangeBytesArgs* args);
int RunExchangeBytes(const ExchangeBytesArgs& a);

}  // namespace adacomp::tool
