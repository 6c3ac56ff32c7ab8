// The `adacomp` command-line program: dispatches to the subcommands.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "adacomp/version.h"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"adacomp: AdaComp adaptive residual gradient compression for data-parallel training"};
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
  add(adacomp::tool::AddCodecCommands(app));
#ifdef ADACOMP_HAVE_TORCH
  add(adacomp::tool::AddTrainCommands(app));
#endif
#ifdef ADACOMP_HAVE_BENCH
  add(adacomp::tool::AddBenchCommands(app));
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
