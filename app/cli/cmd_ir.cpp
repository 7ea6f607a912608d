// kiln ir MODEL --stage graph|optimized|lowered|llvm|asm [--batch N] [-O] [--target]
#include <iostream>

#include "app/cli/commands.h"

namespace kiln::cli {
namespace {

struct IrArgs {
  std::string model;
  std::string stage = "graph";
  BuildFlags flags;
};

int irCommand(const IrArgs& a) {
  auto stage = app::parseIrStage(a.stage);
  if (!stage)
    return fail("unknown stage '" + a.stage + "' (expected graph, optimized, lowered, llvm or asm)", ErrorKind::Usage);
  app::OpenOptions open;
  open.batch = a.flags.batch;
  auto model = app::openModel(a.model, open);
  if (!model) return fail(model.error());
  auto text = app::irText(model.value(), *stage, buildOptions(a.flags));
  if (!text) return fail(text.error());
  std::cout << text.value();
  return 0;
}

}  // namespace

void registerIr(CLI::App& cli, Action& action) {
  auto args = std::make_shared<IrArgs>();
  CLI::App* cmd = cli.add_subcommand("ir", "print a stage of the compilation");
  cmd->add_option("model", args->model, "TorchScript model file (.pt)")->required();
  cmd->add_option("--stage", args->stage, "graph | optimized | lowered | llvm | asm");
  addBatchFlag(cmd, args->flags);
  addBuildFlags(cmd, args->flags);
  cmd->callback([args, &action] { action = [args] { return irCommand(*args); }; });
}

}  // namespace kiln::cli
