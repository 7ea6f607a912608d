// kiln compile MODEL -o DIR [--batch N] [-O] [--target]: an exported module (runtime/module.h)
// that runtime/ alone loads and runs, e.g. with `kiln run DIR` or through runtime/c_api.h.
#include <algorithm>
#include <cstdio>

#include "app/cli/commands.h"

namespace kiln::cli {
namespace {

struct CompileArgs {
  std::string model, output;
  BuildFlags flags;
};

std::string humanBytes(uint64_t bytes) {
  char buf[32];
  if (bytes >= (1u << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / 1048576.0);
  else if (bytes >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  return buf;
}

int compileCommand(const CompileArgs& a) {
  if (int rc = checkBuildFlags(a.flags)) return rc;
  app::OpenOptions open = openOptions(a.flags);
  auto model = app::openModel(a.model, open);
  if (!model) return fail(model.error());
  auto result = app::exportModel(model.value(), buildOptions(a.flags), a.output);
  if (!result) return fail(result.error());
  const app::ExportResult& r = result.value();
  std::printf("compiled %s for '%s' (-O%d) in %.2f s: %d kernels, %d calls\n", a.model.c_str(),
              r.targetString.c_str(), a.flags.optLevel, r.compileSeconds, r.numKernels, r.numCalls);
  std::printf("wrote %s/\n", r.path.c_str());
  for (const auto& f : r.files) std::printf("  %-12s %12s\n", f.name.c_str(), humanBytes(f.bytes).c_str());
  if (!r.linked) {
    std::printf("note: %s\n", r.note.c_str());
    return 0;
  }
  const bool wasm = std::any_of(r.files.begin(), r.files.end(), [](const auto& f) { return f.name == "kernels.wasm"; });
  if (wasm) {
    std::printf("run it in Node with `node web/run_model.mjs %s`, or in a page through web/kiln_runtime.mjs\n",
                r.path.c_str());
    return 0;
  }
  std::printf("run it with `kiln run %s --input IN.npy`, or from C through runtime/c_api.h\n", r.path.c_str());
  return 0;
}

}  // namespace

void registerCompile(CLI::App& cli, Action& action) {
  auto args = std::make_shared<CompileArgs>();
  CLI::App* cmd = cli.add_subcommand(
      "compile", "compile a model into a module directory (kernels.so, graph.txt, params.bin) that runs without the compiler");
  cmd->add_option("model", args->model, kModelHelp)->required();
  cmd->add_option("-o,--output", args->output, "module directory to write (created; an earlier module there is replaced)")
      ->required();
  addBatchFlag(cmd, args->flags);
  addInputShapesFlag(cmd, args->flags);
  addBuildFlags(cmd, args->flags);
  cmd->callback([args, &action] { action = [args] { return compileCommand(*args); }; });
}

}  // namespace kiln::cli
