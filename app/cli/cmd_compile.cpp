// kiln compile MODEL -o DIR [--batch N] [-O] [--target] [--check]: an exported module
// (runtime/module.h) that runtime/ alone loads and runs, e.g. with `kiln run DIR` or through
// runtime/c_api.h. --check runs the module where this machine can (Node for wasm32, qemu-aarch64
// for aarch64, the runtime for the host's own) and compares its outputs with the host build's.
#include <algorithm>
#include <cstdio>

#include "app/cli/commands.h"

namespace kiln::cli {
namespace {

struct CompileArgs {
  std::string model, output;
  BuildFlags flags;
  bool check = false;
};

/// The agreement --check asks for: 1e-4 of the host outputs' largest magnitude.
constexpr double kCheckTolerance = 1e-4;

/// --check: runs the module in `dir` beside the host build; 0 when its outputs agree.
int checkModule(const CompileArgs& a, std::shared_ptr<const app::Model> model, const std::string& dir) {
  auto checked = app::checkCrossTarget(model, buildOptions(a.flags), dir);
  if (!checked) return fail(checked.error());
  const app::CrossCheck& c = checked.value();
  if (c.runner.empty()) return fail(dir + ": --check cannot run it here: " + c.note, ErrorKind::Io);
  const double bound = kCheckTolerance * c.outputScale;
  const bool agrees = c.maxAbsDiff <= bound;
  std::printf("check: ran it in %s on random inputs: max |diff| vs this machine's build %.3g (output scale %.3g, "
              "bound %.3g): %s\n",
              c.runner.c_str(), c.maxAbsDiff, c.outputScale, bound, agrees ? "agrees" : "DISAGREES");
  if (agrees) return 0;
  std::fprintf(stderr, "error: %s: outputs in %s lie %.3g from this machine's build, above %.3g (1e-4 of the output scale)\n",
               dir.c_str(), c.runner.c_str(), c.maxAbsDiff, bound);
  return 1;
}

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
    return a.check ? fail(r.path + ": --check cannot run it here: " + r.note, ErrorKind::Io) : 0;
  }
  if (a.check) return checkModule(a, model.value(), r.path);
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
  cmd->add_flag("--check", args->check,
                "run the module here (wasm32: Node; aarch64: qemu-aarch64; the host's: the runtime) on random inputs and "
                "compare its outputs with this machine's build; exit 1 above 1e-4 of the output scale");
  cmd->callback([args, &action] { action = [args] { return compileCommand(*args); }; });
}

}  // namespace kiln::cli
