// tools/adacomp/commands.h: how the `adacomp` program's subcommands plug in.
//
// Each subcommand lives in its own file and exposes one Add*Command function
// that registers a CLI11 subcommand on the root app and returns the function
// to run when that subcommand was chosen. The function returns the process
// exit status: 0 success, 1 bad input data (malformed file, failed run),
// 2 bad usage (options). Errors go to stderr as one line.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

namespace adacomp::tool {

struct Command {
  CLI::App* app = nullptr;   // the registered subcommand
  std::function<int()> run;  // called after parsing when *app was given
};

// compress, decompress, inspect (codec_commands.cc)
std::vector<Command> AddCodecCommands(CLI::App& root);
// train (train_command.cc; only when built with LibTorch)
std::vector<Command> AddTrainCommands(CLI::App& root);
// bench (bench_command.cc)
std::vector<Command> AddBenchCommands(CLI::App& root);

}  // namespace adacomp::tool
