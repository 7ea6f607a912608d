// kiln compare MODEL [--batch N] [--threads N] [--json FILE] [-O] [--target] [--repeat N]
//                    [--processes N] [--python PY] [--no-torch-compile] [--backends A,B,...]
//                    [--db FILE] [--no-store] [--session ID]
// Every backend runs in worker processes of its own, their repeats alternating (profiler/bench.h).
#include <algorithm>
#include <cstdio>
#include <fstream>

#include "app/cli/commands.h"

namespace kiln::cli {
namespace {

struct CompareArgs {
  bool isolate = false;
  std::string model, json;
  int repeat = 15;
  int processes = 2;
  double timeout = 30;
  std::string python, backends;
  bool noTorchCompile = false;
  BuildFlags flags;
  StoreFlags store;
};

int compareCommand(const CompareArgs& a) {
  if (int rc = checkBuildFlags(a.flags)) return rc;
  app::CompareOptions options;
  options.build = buildOptions(a.flags);
  options.batch = a.flags.batch;
  options.inputs = inputSpecs(a.flags);
  options.repeat = a.repeat;
  options.processes = a.processes;
  options.isolate.timeoutSeconds = a.timeout;
  for (size_t at = 0; at < a.backends.size();) {
    size_t comma = std::min(a.backends.find(',', at), a.backends.size());
    if (comma > at) options.backends.push_back(a.backends.substr(at, comma - at));
    at = comma + 1;
  }
  options.python = a.python;
  options.torchCompile = !a.noTorchCompile;
  options.store = storeOptions(a.store);
  auto result = app::compare(a.model, options);
  if (!result) return fail(result.error());
  const auto& r = result.value();
  std::printf("%s  batch %lld  threads %d  target %s  -O%d\n", r.model.c_str(), static_cast<long long>(r.batch),
              r.threads, r.target.c_str(), r.optLevel);
  std::printf("cpu: %s   libtorch %s, blas %s   kiln compile %.2f s\n", r.cpu.c_str(), r.torchVersion.c_str(),
              r.blas.c_str(), r.compileSeconds);
  std::printf("%-28s %10s %19s %10s %10s %8s %14s\n", "backend", "median ms", "IQR ms", "min ms", "max ms",
              "samples", "max |diff|");
  const app::BackendResult* kilnFault = nullptr;
  bool disagree = false;
  std::vector<const app::BackendResult*> differ;
  for (const auto& b : r.backends) {
    if (!b.available) {
      std::printf("%-28s %s: %s\n", b.backend.c_str(), b.status.c_str(), b.reason.c_str());
      if (b.kernelFault && b.backend.starts_with("kiln")) kilnFault = &b;
      continue;
    }
    const profiler::Spread s = b.spread();
    char iqr[40];
    std::snprintf(iqr, sizeof iqr, "%.3f-%.3f", s.q1Ms, s.q3Ms);
    char diff[32] = "-";
    if (!(b.maxAbsDiff < 0)) std::snprintf(diff, sizeof diff, "%.3g", b.maxAbsDiff);  // NaN prints "nan"
    std::printf("%-28s %10.3f %19s %10.3f %10.3f %8d %14s%s%s\n", app::backendDisplayName(b.backend, b.facts).c_str(),
                s.medianMs, iqr, s.minMs, s.maxMs, s.samples, diff, b.outputsDiffer() ? "  OUTPUTS DIFFER" : "",
                s.processesDisagree ? "  processes disagree" : "");
    disagree = disagree || s.processesDisagree;
    if (b.outputsDiffer()) differ.push_back(&b);
  }
  if (r.processes > 1) {
    std::printf("\n%-28s median ms of each worker process\n", "backend");
    for (const auto& b : r.backends) {
      if (!b.available) continue;
      std::printf("%-28s", b.backend.c_str());
      for (double ms : b.processMedianMs) std::printf(" %10.3f", ms);
      std::printf("\n");
    }
  }
  if (disagree)
    std::printf("note: a flagged backend's processes differ by more than 10 %%; its figure depends on the process\n");
  for (const app::BackendResult* b : differ)
    std::printf("note: %s's outputs lie %.3g from eager's, beyond %.3g (%g of eager's largest output, %g for int8 "
                "models): it computes something else than the model, so its time is not comparable\n",
                b->backend.c_str(), b->maxAbsDiff, b->outputBound, profiler::kOutputTolerance,
                profiler::kQuantizedOutputTolerance);
  if (!r.coreRoundTripNs.empty()) {
    auto [lo, hi] = std::minmax_element(r.coreRoundTripNs.begin(), r.coreRoundTripNs.end());
    std::printf("host: core-to-core round trip %.0f-%.0f ns (%zu probes between rounds)\n", *lo, *hi,
                r.coreRoundTripNs.size());
    if (r.placementChanged)
      std::printf("note: the host moved this machine's CPUs during the run (the round trip changed %.1fx); "
                  "multi-threaded timings taken before and after differ, so compare rows of one run only\n",
                  *hi / *lo);
  }
  std::printf("\n%-28s %6s  %s\n", "backend", "top-1", "first outputs");
  for (const auto& b : r.backends) {
    if (!b.available) continue;
    std::printf("%-28s %6d ", b.backend.c_str(), b.top1);
    for (float v : b.preview) std::printf(" %10.5f", v);
    std::printf("\n");
  }
  std::printf("\n%-28s %s\n", "backend", "versions and settings");
  for (const auto& b : r.backends)
    if (b.available) std::printf("%-28s %s\n", b.backend.c_str(), app::backendFactsLine(b.facts).c_str());
  if (!a.json.empty()) {
    std::ofstream out(a.json);
    if (!out) return fail(a.json + ": cannot write file", ErrorKind::Io);
    out << app::compareJson(r) << "\n";
  }
  if (r.stored.sessionId)
    std::printf("\nstored: session %lld, run %lld, build %lld in %s\n", static_cast<long long>(r.stored.sessionId),
                static_cast<long long>(r.stored.runId), static_cast<long long>(r.stored.buildId), r.stored.dbPath.c_str());
  // The other rows are measured and kept, but Kiln's generated code failing is Kiln's error.
  if (kilnFault) return fail(a.model + ": " + kilnFault->backend + ": " + kilnFault->reason, ErrorKind::KernelFault);
  return 0;
}

}  // namespace

void registerCompare(CLI::App& cli, Action& action) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* cmd = cli.add_subcommand(
      "compare", "measure today's PyTorch, torch.compile, ONNX Runtime, OpenVINO and Kiln side by side, each in its own process");
  cmd->add_option("model", args->model, kModelHelp)->required();
  addBatchFlag(cmd, args->flags);
  addInputShapesFlag(cmd, args->flags);
  cmd->add_option("--json", args->json, "write the results as JSON");
  cmd->add_option("--repeat", args->repeat, "timed repeats per backend")->check(CLI::PositiveNumber);
  cmd->add_option("--python", args->python,
                  "python for pytorch-eager, torch-compile, onnxruntime and openvino (default: Kiln's environment)");
  cmd->add_flag("--no-torch-compile", args->noTorchCompile, "skip the torch.compile rows");
  cmd->add_option("--backends", args->backends,
                  "comma-separated rows: pytorch-eager, torch-compile, torch-compile-max-autotune, "
                  "torchscript-optimized, onnxruntime, openvino, kiln, kiln-wasm, onnxruntime-web (default: all but "
                  "torch-compile-max-autotune)");
  cmd->add_option("--processes", args->processes, "worker processes per backend (their medians are compared)")
      ->check(CLI::Range(1, 16));
  cmd->add_option("--timeout", args->timeout, "seconds one repeat of a backend may run (after it loaded)")
      ->check(CLI::PositiveNumber);
  // Every backend runs in worker processes now; the flag stays for scripts that pass it.
  cmd->add_flag("--isolate", args->isolate, "(always on) each backend runs in worker processes of its own");
  addBuildFlags(cmd, args->flags);
  addStoreFlags(cmd, args->store);
  cmd->callback([args, &action] { action = [args] { return compareCommand(*args); }; });
}

}  // namespace kiln::cli
