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
  cli::registerRoofline(cli, action);
  cli::registerSweep(cli, action);
  cli::registerSessions(cli, action);
  cli::registerReport(cli, action);
  cli::registerCompile(cli, action);
  cli::registerTune(cli, action);
  cli::registerDoctor(cli, action);
  cli::registerMeasureWorker(cli, action);

  cli.footer(cli::exitCodeHelp());

  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return cli.exit(e);  // --help, --version
    if (argc > 1 && argv[1][0] != '-') {
      bool known = false;
      std::string names;
      for (const CLI::App* sub : cli.get_subcommands({})) {
        known = known || sub->get_name() == argv[1];
        if (!sub->get_group().empty()) names += (names.empty() ? "" : ", ") + sub->get_name();
      }
      if (!known) return cli::fail("unknown subcommand '" + std::string(argv[1]) + "' (expected " + names + ")", ErrorKind::Usage);
    }
    // Like every other failure: one line, the usage exit code.
    return cli::fail(cli::usageMessage(e.what()), ErrorKind::Usage);
  }
  if (!action) return 0;
  try {
    return action();
  } catch (const Error& e) {
    return cli::fail(e.what(), e.kind());
  } catch (const std::exception& e) {
    return cli::fail(std::string("internal error: ") + e.what(), ErrorKind::Internal);
  }
}
