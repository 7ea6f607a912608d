// `kiln`: the command-line front end over app/facade.h. Each subcommand is in cmd_*.cpp.
#include "app/cli/commands.h"

int main(int argc, char** argv) {
  using namespace kiln;
  CLI::App cli{"kiln: a deep-learning model compiler for CPUs"};
  cli.require_subcommand(1);
  cli.set_version_flag("--version", "kiln " + app::version());

  cli::Action action;
  cli::registerRun(cli, action);
  cli::registerIr(cli, action);
  cli::registerCompare(cli, action);
  cli::registerProfile(cli, action);
  cli::registerSweep(cli, action);
  cli::registerSessions(cli, action);
  cli::registerReport(cli, action);
  cli::registerCompile(cli, action);
  cli::registerTune(cli, action);
  cli::registerDoctor(cli, action);

  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e);
  }
  return action ? action() : 0;
}
