// kiln compare MODEL [--batch N] [--threads N] [--json FILE] [-O] [--target] [--repeat N]
//                    [--python PY] [--no-torch-compile] [--db FILE] [--no-store] [--session ID]
#include <cstdio>
#include <fstream>

#include "app/cli/commands.h"

namespace kiln::cli {
namespace {

struct CompareArgs {
  bool isolate = false;
  std::string model, json;
  int repeat = 15;
  std::string python;
  bool noTorchCompile = false;
  BuildFlags flags;
  StoreFlags store;
};

int compareCommand(const CompareArgs& a) {
  if (int rc = checkBuildFlags(a.flags)) return rc;
  app::CompareOptions options;
  options.build = buildOptions(a.flags);
  options.batch = a.flags.batch;
  options.repeat = a.repeat;
  options.python = a.python;
  options.torchCompile = !a.noTorchCompile;
  options.store = storeOptions(a.store);
  options.isolate.enabled = a.isolate;
  auto result = app::compare(a.model, options);
  if (!result) return fail(result.error());
  const auto& r = result.value();
  std::printf("%s  batch %lld  threads %d  target %s  -O%d\n", r.model.c_str(), static_cast<long long>(r.batch),
              r.threads, r.target.c_str(), r.optLevel);
  std::printf("cpu: %s   torch %s, blas %s   kiln compile %.2f s\n", r.cpu.c_str(), r.torchVersion.c_str(),
              r.blas.c_str(), r.compileSeconds);
  std::printf("%-18s %10s %10s %10s %9s %14s\n", "backend", "median ms", "min ms", "max ms", "samples", "max |diff|");
  for (const auto& b : r.backends) {
    if (!b.available) {
      std::printf("%-18s unavailable: %s\n", b.backend.c_str(), b.reason.c_str());
      continue;
    }
    std::printf("%-18s %10.3f %10.3f %10.3f %9zu %14.3g\n", b.backend.c_str(), b.medianMs, b.minMs, b.maxMs,
                b.samplesMs.size(), b.maxAbsDiff);
  }
  std::printf("\n%-18s %6s  %s\n", "backend", "top-1", "first outputs");
  for (const auto& b : r.backends) {
    if (!b.available) continue;
    std::printf("%-18s %6d ", b.backend.c_str(), b.top1);
    for (float v : b.preview) std::printf(" %10.5f", v);
    std::printf("\n");
  }
  if (!a.json.empty()) {
    std::ofstream out(a.json);
    if (!out) return fail(a.json + ": cannot write file", ErrorKind::Io);
    out << app::compareJson(r) << "\n";
  }
  if (r.stored.sessionId)
    std::printf("\nstored: session %lld, run %lld, build %lld in %s\n", static_cast<long long>(r.stored.sessionId),
                static_cast<long long>(r.stored.runId), static_cast<long long>(r.stored.buildId), r.stored.dbPath.c_str());
  return 0;
}

}  // namespace

void registerCompare(CLI::App& cli, Action& action) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* cmd = cli.add_subcommand("compare", "measure PyTorch eager, compiled PyTorch and Kiln side by side");
  cmd->add_option("model", args->model, "TorchScript model file (.pt)")->required();
  addBatchFlag(cmd, args->flags);
  cmd->add_option("--json", args->json, "write the results as JSON");
  cmd->add_option("--repeat", args->repeat, "timed repeats per backend")->check(CLI::PositiveNumber);
  cmd->add_option("--python", args->python, "python with torch >= 2 for the torch.compile baseline");
  cmd->add_flag("--no-torch-compile", args->noTorchCompile, "skip the torch.compile baseline");
  cmd->add_flag("--isolate", args->isolate, "run Kiln's kernels in a child process: a crash or hang is an error (exit code 7)");
  addBuildFlags(cmd, args->flags);
  addStoreFlags(cmd, args->store);
  cmd->callback([args, &action] { action = [args] { return compareCommand(*args); }; });
}

}  // namespace kiln::cli
