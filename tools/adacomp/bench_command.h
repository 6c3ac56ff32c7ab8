// tools/adacomp/bench_command.h: the settings of `adacomp bench` and the
// command itself (bench_command.cc); bench_cli.cc turns the command line
// into BenchArgs. Thread safety: RunBench starts and joins its own threads.
#pragma once

#include <cstdint>
#include <string>

namespace adacomp::tool {

struct BenchArgs {
  std::string sizes = "1e4,1e5,1e6,4e6,1.6e7,6.4e7";
  std::string max_elements = "1.6e7";
  std::string bin_sizes = "50,500";
  std::string threads = "1,2";
  std::string frames = "1,4,16";
  std::string ops = "all";
  int repeats = 5;
  double min_time = 0.05;
  uint64_t seed = 1;
  std::string json;
};

// Runs the benchmark; the exit status (0 success, 1 a failed check or I/O,
// 2 bad usage).
int RunBench(const BenchArgs& a);

}  // namespace adacomp::tool
