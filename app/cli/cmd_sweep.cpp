// kiln sweep MODEL [--batches 1,4,16,64] [--backends kiln,pytorch-eager,torchscript-optimized,...]
//                  [--repeat N] [--budget SECONDS] [--python PY] [--json FILE] [-O] [--target]
//                  [--threads] [--db FILE] [--no-store] [--session ID] [--resume] [--processes N] [--timeout S]
// At each batch size the backends are timed side by side, each in worker processes of its own.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

#include "app/cli/commands.h"

namespace kiln::cli {
namespace {

struct SweepArgs {
  std::string model, json, python;
  std::vector<int64_t> batches{1, 4, 16, 64};
  std::vector<std::string> backends = app::SweepOptions().backends;
  int repeat = 10;
  int processes = 1;
  double budget = 60;
  bool resume = false, isolate = false;
  double timeout = 30;
  BuildFlags flags;
  StoreFlags store;
};

int sweepCommand(const SweepArgs& a) {
  if (int rc = checkBuildFlags(a.flags)) return rc;
  app::SweepOptions options;
  options.build = buildOptions(a.flags);
  options.batches = a.batches;
  options.inputs = inputSpecs(a.flags);
  options.backends = a.backends;
  options.repeat = a.repeat;
  options.processes = a.processes;
  options.budgetSeconds = a.budget;
  options.python = a.python;
  options.store = storeOptions(a.store);
  options.resume = a.resume;
  options.isolate.timeoutSeconds = a.timeout;
  // Printed once the point is committed: what a kill can no longer take away.
  options.onPoint = [stored = !a.store.noStore](const profiler::Measurement& m) {
    char what[64];
    if (m.ok())
      std::snprintf(what, sizeof what, "%.3f ms", m.timing.medianMs);
    else
      std::snprintf(what, sizeof what, "%s", profiler::statusName(m.status));
    std::fprintf(stderr, "  %s %s at batch %lld: %s\n", stored ? "stored" : "measured", m.backend.c_str(),
                 static_cast<long long>(m.batch), what);
  };
  auto result = app::sweep(a.model, options, [](const std::string& step) {
    std::fprintf(stderr, "  measuring %s\n", step.c_str());
    return true;
  });
  if (!result) return fail(result.error());
  const auto& r = result.value();
  const auto& c = r.context;
  std::printf("%s  threads %d  target %s  -O%d\n", r.model.c_str(), c.threads, c.target.c_str(), c.optLevel);
  std::printf("cpu: %s   libtorch %s, blas %s, llvm %s\n", c.cpu.c_str(), c.torchVersion.c_str(),
              c.blas.c_str(), c.llvmVersion.c_str());
  // Each backend's own versions and settings, from the first point it ran.
  for (const auto& backend : r.backends)
    for (const auto& m : r.points)
      if (m.backend == backend && m.ok()) {
        std::printf("  %-26s %s\n", app::backendDisplayName(backend, m.facts).c_str(),
                    app::backendFactsLine(m.facts).c_str());
        break;
      }
  std::printf("\n");

  std::map<std::string, std::map<int64_t, const profiler::Measurement*>> grid;
  for (const auto& m : r.points) grid[m.backend][m.batch] = &m;
  for (const char* what : {"median latency (ms)", "throughput (items/s)"}) {
    bool latency = what[0] == 'm';
    std::printf("%-18s", what);
    for (int64_t b : r.batches) std::printf(" %12s", ("batch " + std::to_string(b)).c_str());
    std::printf("\n");
    for (const auto& backend : r.backends) {
      std::printf("%-18s", backend.c_str());
      for (int64_t b : r.batches) {
        const profiler::Measurement* m = grid[backend][b];
        if (!m)
          std::printf(" %12s", "-");
        else if (!m->ok())
          std::printf(" %12s", profiler::statusName(m->status));
        else
          std::printf(" %11.3f%s", latency ? m->timing.medianMs : m->throughput(),
                      m->timing.noisy() ? "~" : " ");
      }
      std::printf("\n");
    }
    std::printf("\n");
  }
  // One note per backend and reason, naming the batch sizes it applies to.
  bool noisy = false;
  std::vector<std::pair<std::string, std::string>> notes;  // (backend + reason, batches)
  for (const auto& m : r.points) {
    noisy = noisy || (m.ok() && m.timing.noisy());
    if (m.reason.empty()) continue;
    std::string what =
        m.backend + ": " + (m.ok() ? "" : std::string(profiler::statusName(m.status)) + ": ") + m.reason;
    auto it = std::find_if(notes.begin(), notes.end(), [&](const auto& n) { return n.first == what; });
    if (it == notes.end())
      notes.emplace_back(what, std::to_string(m.batch));
    else
      it->second += ", " + std::to_string(m.batch);
  }
  for (const auto& [what, batches] : notes)
    std::printf("note (batch %s) %s\n", batches.c_str(), what.c_str());
  if (noisy) std::printf("note: ~ marks noisy results (coefficient of variation above 5 %%)\n");
  std::vector<double> probes;
  for (const auto& [batch, ns] : r.coreRoundTripNs) probes.insert(probes.end(), ns.begin(), ns.end());
  if (!probes.empty()) {
    auto [lo, hi] = std::minmax_element(probes.begin(), probes.end());
    std::printf("host: core-to-core round trip %.0f-%.0f ns (%zu probes)\n", *lo, *hi, probes.size());
    if (r.placementChanged)
      std::printf("note: the host moved this machine's CPUs during the sweep (the round trip changed %.1fx); "
                  "multi-threaded points before and after the move differ\n", *hi / *lo);
  }
  if (!a.json.empty()) {
    std::ofstream out(a.json);
    if (!out || !(out << app::sweepJson(r) << "\n"))
      return fail(a.json + ": cannot write file", ErrorKind::Io);
  }
  if (r.resumedPoints > 0)
    std::printf("resumed: %d of %zu points were already stored\n", r.resumedPoints, r.points.size());
  if (r.stored.sessionId)
    std::printf("stored: session %lld, run %lld in %s\n", static_cast<long long>(r.stored.sessionId),
                static_cast<long long>(r.stored.runId), r.stored.dbPath.c_str());
  return 0;
}

}  // namespace

void registerSweep(CLI::App& cli, Action& action) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd = cli.add_subcommand("sweep", "latency and throughput per backend over batch sizes");
  cmd->add_option("model", args->model, kModelHelp)->required();
  cmd->add_option("--batches", args->batches, "batch sizes (default 1,4,16,64)")->delimiter(',');
  cmd->add_option("--backends", args->backends,
                  "kiln, pytorch-eager, torch-compile, torch-compile-max-autotune, torchscript-optimized, "
                  "onnxruntime, openvino (default: all but the torch-compile ones)")
      ->delimiter(',');
  cmd->add_option("--repeat", args->repeat, "timed repeats per point")->check(CLI::PositiveNumber);
  cmd->add_option("--budget", args->budget, "seconds per backend and batch size before it is stopped")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--python", args->python,
                  "python for pytorch-eager, torch-compile, onnxruntime and openvino (default: Kiln's environment)");
  cmd->add_option("--json", args->json, "write the results as JSON");
  cmd->add_flag("--resume", args->resume,
                "continue the latest unfinished sweep with the same options in the store: stored points are kept");
  cmd->add_option("--processes", args->processes, "worker processes per backend and batch")->check(CLI::Range(1, 16));
  // Every backend runs in worker processes now; the flag stays for scripts that pass it.
  cmd->add_flag("--isolate", args->isolate, "(always on) each backend runs in worker processes of its own");
  cmd->add_option("--timeout", args->timeout, "seconds one repeat of a point may run (at least 1.5x the budget)")
      ->check(CLI::PositiveNumber);
  addBuildFlags(cmd, args->flags);
  addInputShapesFlag(cmd, args->flags);
  addStoreFlags(cmd, args->store);
  cmd->callback([args, &action] { action = [args] { return sweepCommand(*args); }; });
}

}  // namespace kiln::cli
