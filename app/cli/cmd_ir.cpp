// kiln ir MODEL --stage graph|optimized|lowered|llvm|asm [--batch N] [-O] [--target]
//               [--passes PIPELINE] [--skip-pass NAME] [--verify] [--stats] [--print-changes]
//               [--list-passes]
// MODEL may be graph text (FILE.kir, or - for standard input; app/model_text.h): the FileCheck
// tests (tests/filecheck/) run passes and lowering on hand-written graphs this way.
#include <iostream>

#include "app/cli/commands.h"
#include "app/model_text.h"

namespace kiln::cli {
namespace {

struct IrArgs {
  std::string model;
  std::string stage = "graph";
  BuildFlags flags;
  std::string passes;
  bool passesGiven = false;
  std::vector<std::string> skip;
  bool verify = false;
  bool stats = false;
  bool printChanges = false;
  bool listPasses = false;
};

int irCommand(const IrArgs& a) {
  if (a.listPasses) {
    std::cout << app::passListText();
    return 0;
  }
  if (a.model.empty()) return fail("a model is required", ErrorKind::Usage);
  if (int rc = checkBuildFlags(a.flags)) return rc;
  auto stage = app::parseIrStage(a.stage);
  if (!stage)
    return fail("unknown stage '" + a.stage + "' (expected graph, optimized, lowered, llvm or asm)",
                ErrorKind::Usage);
  bool graphText = a.model == "-" || app::isGraphTextFile(a.model);
  if (graphText && (a.flags.batch > 0 || a.flags.inputShapesGiven))
    return fail("--batch and --input-shapes do not apply to graph text: its inputs are typed", ErrorKind::Usage);
  auto model = graphText ? app::openGraphText(a.model) : app::openModel(a.model, openOptions(a.flags));
  if (!model) return fail(model.error());
  app::BuildOptions options = buildOptions(a.flags);
  if (a.passesGiven) options.passes = a.passes;
  options.skipPasses = a.skip;
  options.verifyPasses = a.verify;
  if (a.stats || a.printChanges) {
    options.keepPassIr = a.printChanges;
    auto report = app::optimize(model.value(), options);
    if (!report) return fail(report.error());
    for (const app::PassRun& p : report->passes) {
      if (!p.irAfter.empty()) std::cout << "// after " << p.invocation << "\n" << p.irAfter << "\n";
    }
    if (a.stats) std::cout << app::optimizeReportText(report.value());
    return 0;
  }
  auto text = app::irText(model.value(), *stage, options);
  if (!text) return fail(text.error());
  std::cout << text.value();
  return 0;
}

}  // namespace

void registerIr(CLI::App& cli, Action& action) {
  auto args = std::make_shared<IrArgs>();
  CLI::App* cmd = cli.add_subcommand("ir", "print a stage of the compilation, or what the optimizer did");
  cmd->add_option("model", args->model,
                  std::string(kModelHelp) + ", or graph text (.kir, - for standard input)");
  cmd->add_option("--stage", args->stage, "graph | optimized | lowered | llvm | asm");
  addBatchFlag(cmd, args->flags);
  addInputShapesFlag(cmd, args->flags);
  addBuildFlags(cmd, args->flags);
  cmd->add_option("--passes", args->passes,
                  "pass pipeline replacing the -O level's, e.g. \"fold-constants,fuse-ops{max-depth=8}\"")
      ->each([args](const std::string&) { args->passesGiven = true; });
  cmd->add_option("--skip-pass", args->skip, "do not run this pass (repeatable)");
  cmd->add_flag("--verify", args->verify,
                "run the graph verifier after every graph pass, the loop-IR verifier after lowering and every loop-IR pass");
  cmd->add_flag("--stats", args->stats,
                "print pass timings and changes, fused functions and ops per function");
  cmd->add_flag("--print-changes", args->printChanges, "print the graph after every pass that changed it");
  cmd->add_flag("--list-passes", args->listPasses, "print the registered passes and the default pipelines");
  cmd->callback([args, &action] { action = [args] { return irCommand(*args); }; });
}

}  // namespace kiln::cli
