// The `adacomp` command-line programs: one main, built three ways.
//
//   adacomp        the codec commands (compress, decompress, inspect,
//                  gen-gradient): no LibTorch, no MPI, so it starts in
//                  milliseconds. `adacomp train ...` and `adacomp bench ...`
//                  are handed, git style, to the sibling programs
//                  adacomp-train and adacomp-bench (same directory) with the
//                  same arguments, so their options, messages and exit
//                  statuses are theirs; mpirun starts `adacomp train` as
//                  before, each rank exec'ing into adacomp-train in place.
//   adacomp-train  `train` (LibTorch, and MPI when found), ADACOMP_PROGRAM_TRAIN
//   adacomp-bench  `bench` (with LibTorch's topk as a baseline when found),
//                  ADACOMP_PROGRAM_BENCH
// Every program names itself "adacomp" in its help and messages.
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "adacomp/version.h"
#include "commands.h"

namespace {

#if !defined(ADACOMP_PROGRAM_TRAIN) && !defined(ADACOMP_PROGRAM_BENCH)
// Subcommands served by sibling programs, with their one-line descriptions
// for `adacomp --help`.
struct External {
  const char* name;
  const char* description;
};
constexpr External kExternal[] = {
    {"train",
     "Train a model with P learners exchanging compressed gradients (docs/algorithm.md)"
     "; runs adacomp-train"},
    {"bench",
     "Time AdaComp and its baselines against the R += dW pass, verified first; runs "
     "adacomp-bench"},
};

// Replaces this process by adacomp-<name> from this program's directory,
// with the same arguments. Returns only on failure, with the exit status.
int ExecSibling(const char* name, char** argv) {
  char self[PATH_MAX];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string dir = ".";
  if (len > 0) {
    self[len] = '\0';
    dir = self;
    dir.erase(dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/'));
  }
  const std::string path = dir + "/adacomp-" + name;
  argv[0] = const_cast<char*>(path.c_str());
  ::execv(path.c_str(), argv);
  const int err = errno;
  std::fprintf(
      stderr, "adacomp %s: error: cannot run %s: %s%s\n", name, path.c_str(), std::strerror(err),
      err == ENOENT ? " (this build has no LibTorch, or the program was not installed)" : "");
  return err == ENOENT ? 2 : 1;
}
#endif

}  // namespace

int main(int argc, char** argv) {
#if !defined(ADACOMP_PROGRAM_TRAIN) && !defined(ADACOMP_PROGRAM_BENCH)
  if (argc >= 2) {
    for (const External& e : kExternal) {
      if (std::strcmp(argv[1], e.name) == 0) return ExecSibling(e.name, argv);
    }
  }
#endif
  CLI::App app{
      "adacomp: AdaComp adaptive residual gradient compression for data-parallel training"};
  app.name("adacomp");
  app.set_version_flag("--version", std::string("adacomp ") + adacomp::kVersion);
  app.require_subcommand(1);
  // Usage errors: one line on stderr, naming the subcommand when there is one.
  app.failure_message([](const CLI::App* root, const CLI::Error& e) {
    std::string name = "adacomp";
    for (const CLI::App* sub : root->get_subcommands()) name += " " + sub->get_name();
    return name + ": usage error: " + e.what() + " (see " + name + " --help)\n";
  });

  std::vector<adacomp::tool::Command> commands;
  auto add = [&](std::vector<adacomp::tool::Command> more) {
    for (auto& c : more) commands.push_back(std::move(c));
  };
#if defined(ADACOMP_PROGRAM_TRAIN)
  add(adacomp::tool::AddTrainCommands(app));
#elif defined(ADACOMP_PROGRAM_BENCH)
  add(adacomp::tool::AddBenchCommands(app));
#else
  add(adacomp::tool::AddCodecCommands(app));
  // Listed in the help; never parsed here (main hands them over first).
  for (const External& e : kExternal) app.add_subcommand(e.name, e.description);
#endif

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; usage errors exit 2.
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  for (auto& c : commands) {
    if (c.app && c.app->parsed()) {
      try {
        return c.run();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "adacomp %s: error: %s\n", c.app->get_name().c_str(), e.what());
        return 1;
      }
    }
  }
  return 2;
}
