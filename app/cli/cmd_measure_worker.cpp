// kiln measure-worker   (internal: runs one isolated measurement for a parent over stdin/stdout;
//                        profiler/measure_worker.h describes the protocol)
#include "app/cli/commands.h"

namespace kiln::cli {

void registerMeasureWorker(CLI::App& cli, Action& action) {
  CLI::App* worker = cli.add_subcommand("measure-worker", "");
  worker->group("");  // internal: not listed in --help
  worker->callback([&action] { action = [] { return app::runMeasureWorker(); }; });
}

}  // namespace kiln::cli
