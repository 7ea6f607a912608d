// kiln profile MODEL [--repeat N] [--warmup N] [--top N] [--by call|op] [--trace FILE] [--json FILE]
//                    [--timeout SECONDS] [--in-process] [--roofline [--measure-ceilings]]
// The profile runs in a `kiln measure-worker` of its own (a fresh process with nothing else in
// it, as every backend of `kiln compare`), unless --in-process.
//                    [--batch N] [-O] [--target] [--threads] [--db FILE] [--no-store] [--session ID]
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

#include "app/cli/commands.h"

namespace kiln::cli {
namespace {

struct ProfileArgs {
  std::string model, json, trace, by = "call";
  int repeat = 20, warmup = 3, top = 20;
  bool isolate = false, inProcess = false;
  bool roofline = false, measureCeilings = false;
  double timeout = 30;
  BuildFlags flags;
  StoreFlags store;
};

std::string clip(const std::string& s, size_t width) {
  return s.size() <= width ? s : s.substr(0, width - 3) + "...";
}

std::string opsText(const std::vector<std::string>& ops) {
  std::string s;
  for (size_t i = 0; i < ops.size(); ++i) s += (i ? "+" : "") + ops[i];
  return s;
}

bool writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!out) return false;
  out << text << "\n";
  return static_cast<bool>(out);
}

void printRows(const std::vector<profiler::OpRecord>& rows, int top, bool grouped) {
  std::printf("%4s %-44s %-22s %10s %6s %6s %6s %8s %9s  %s\n", grouped ? "" : "#",
              grouped ? "operator" : "call", "ops", "time us", "%", "cum %", "calls", "GFLOP/s", "MB moved",
              grouped ? "" : "output");
  double cum = 0;
  int shown = 0;
  for (const auto& op : rows) {
    if (top > 0 && shown++ >= top) break;
    if (op.parent < 0) cum += op.percent;  // a call inside an if/loop is part of that call's time
    std::printf("%4s %-44s %-22s %10.1f %6.1f %6.1f %6d %8.2f %9.2f  %s\n",
                grouped ? "" : std::to_string(op.index).c_str(), clip(op.name, 44).c_str(),
                clip(opsText(op.ops), 22).c_str(), op.timeUs, op.percent, cum, op.calls, op.gflops(),
                op.bytes / 1e6, grouped ? "" : op.outputShape.c_str());
  }
  if (top > 0 && static_cast<int>(rows.size()) > top)
    std::printf("     ... %zu more (--top 0 shows all)\n", rows.size() - static_cast<size_t>(top));
}

/// The ceilings in two lines, then per call (the `rows` order, top N) its place on the roofline.
void printRoofline(const app::ProfileResult& r, const std::vector<profiler::OpRecord>& rows, int top) {
  const profiler::MachineCeilings& c = *r.ceilings;
  std::string levels;
  for (const auto& b : c.bandwidth) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s %.1f", levels.empty() ? "" : ", ", b.level.c_str(), b.gbPerSecond);
    levels += buf;
  }
  std::printf("\nroofline (%d thread%s): FMA peak %.1f GFLOP/s (f32 x%d); bandwidth GB/s: %s\n", c.threads,
              c.threads == 1 ? "" : "s", c.peakGflops, c.vectorBits / 32, levels.c_str());
  std::string which = c.id > 0 ? "ceilings #" + std::to_string(c.id) : std::string("ceilings (not stored)");
  std::printf("%s measured %s (%s; kiln roofline --measure measures again)\n", which.c_str(), c.measuredAt.c_str(),
              r.ceilingsReused ? "from the store" : "just now");
  std::printf("%4s %-22s %10s %9s %6s %9s %9s %8s  %s\n", "#", "ops", "FLOPs/B", "GFLOP/s", "level", "bound",
              "% bound", "% time", "bound by");
  std::map<int, const profiler::RooflinePoint*> byCall;
  for (const auto& p : r.roofline) byCall[p.call] = &p;
  int shown = 0;
  for (const auto& op : rows) {
    auto it = byCall.find(op.index);
    if (it == byCall.end()) continue;
    if (top > 0 && shown++ >= top) break;
    const profiler::RooflinePoint& p = *it->second;
    std::printf("%4d %-22s %10.3g %9.2f %6s %9.1f %9.1f %8.1f  %s\n", p.call, clip(opsText(p.ops), 22).c_str(),
                p.intensity, p.gflops, p.level.c_str(), p.boundGflops, p.percentOfBound, p.percentOfTime,
                p.flops <= 0 ? "memory (no FLOPs)" : p.memoryBound ? "memory" : "compute");
  }
  bool winograd = false;
  for (const auto& p : r.roofline)
    for (const auto& op : p.ops) winograd = winograd || op.find("winograd") != std::string::npos;
  if (winograd)
    std::printf("note: Winograd convolutions count the direct convolution's FLOPs (effective GFLOP/s, as PyTorch "
                "and oneDNN report them): they can exceed 100 %% of the bound\n");
}

int profileCommand(const ProfileArgs& a) {
  if (a.by != "call" && a.by != "op")
    return fail("--by must be 'call' or 'op', got '" + a.by + "'", ErrorKind::Usage);
  if (int rc = checkBuildFlags(a.flags)) return rc;
  app::ProfileOptions options;
  options.build = buildOptions(a.flags);
  options.batch = a.flags.batch;
  options.inputs = inputSpecs(a.flags);
  options.repeat = a.repeat;
  options.warmup = a.warmup;
  options.store = storeOptions(a.store);
  options.isolate.enabled = !a.inProcess;
  options.isolate.timeoutSeconds = a.timeout;
  options.roofline = a.roofline || a.measureCeilings;
  options.remeasureCeilings = a.measureCeilings;
  auto result = app::profile(a.model, options);
  if (!result) return fail(result.error());
  const auto& r = result.value();
  const auto& p = r.profile;
  const auto& c = r.context;
  std::printf("%s  batch %lld  threads %d  target %s  -O%d  (%d calls, %d kernels, %d fused functions)\n",
              r.model.c_str(), static_cast<long long>(r.build.batch), c.threads, c.target.c_str(), c.optLevel,
              r.build.numCalls, r.build.numKernels, r.numFusedFunctions);
  std::printf("cpu: %s (%d cores, %d threads)   kiln %s, llvm %s   compile %.2f s\n", c.cpu.c_str(),
              c.physicalCores, c.hardwareThreads, c.kilnVersion.c_str(), c.llvmVersion.c_str(),
              c.compileSeconds);
  std::printf("end-to-end: median %.3f ms, mean %.3f ms (%zu runs, CV %.1f %%)\n", p.endToEnd.medianMs,
              p.endToEnd.meanMs, p.endToEnd.samplesMs.size(), 100 * p.endToEnd.cv());
  std::printf(
      "calls (%d passes): sum of medians %.3f ms, sum of means %.3f ms   gap vs end-to-end mean %+.1f %%\n\n",
      p.repeat, p.sumMs, p.sumMeanMs, p.gapPercent());

  std::vector<profiler::OpRecord> rows = p.ops;
  if (a.by == "op") {
    rows = app::operatorSummary(p);
  } else {
    std::stable_sort(rows.begin(), rows.end(),
                     [](const auto& x, const auto& y) { return x.timeUs > y.timeUs; });
  }
  printRows(rows, a.top, a.by == "op");
  if (options.roofline && r.ceilings) {
    if (a.by == "op") {
      rows = p.ops;
      std::stable_sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return x.timeUs > y.timeUs; });
    }
    printRoofline(r, rows, a.top);
  }

  std::fflush(stdout);
  if (p.endToEnd.noisy())
    std::fprintf(stderr,
                 "warning: the end-to-end times vary (CV %.1f %% > %.0f %%): other load on the machine?\n",
                 100 * p.endToEnd.cv(), 100 * p.endToEnd.noisyCv);
  if (std::abs(p.gapPercent()) > 15)
    std::fprintf(stderr, "warning: the calls' sum differs from the end-to-end time by %.1f %%\n",
                 p.gapPercent());
  if (!a.trace.empty() && !writeFile(a.trace, app::profileTraceJson(r)))
    return fail(a.trace + ": cannot write file", ErrorKind::Io);
  if (!a.json.empty() && !writeFile(a.json, app::profileResultJson(r)))
    return fail(a.json + ": cannot write file", ErrorKind::Io);
  if (!a.trace.empty()) std::printf("\ntrace: %s (open in Perfetto or chrome://tracing)\n", a.trace.c_str());
  if (r.stored.sessionId)
    std::printf("stored: session %lld, run %lld, build %lld in %s\n",
                static_cast<long long>(r.stored.sessionId), static_cast<long long>(r.stored.runId),
                static_cast<long long>(r.stored.buildId), r.stored.dbPath.c_str());
  return 0;
}

}  // namespace

void registerProfile(CLI::App& cli, Action& action) {
  auto args = std::make_shared<ProfileArgs>();
  CLI::App* cmd =
      cli.add_subcommand("profile", "time every fused function of a compiled model (debug executor)");
  cmd->add_option("model", args->model, kModelHelp)->required();
  cmd->add_option("--repeat", args->repeat, "timed passes (call by call, and end to end)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", args->warmup, "untimed passes first")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top", args->top, "rows to print, by time (0: all)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--by", args->by, "call: one row per fused function; op: grouped by operator kind");
  cmd->add_option("--trace", args->trace, "write one pass as Chrome trace-event JSON (Perfetto)");
  cmd->add_option("--json", args->json, "write the profile as JSON");
  // Isolation is the default now; the flag stays for scripts that pass it.
  cmd->add_flag("--isolate", args->isolate, "(the default) measure in a worker process: a crash or hang is exit code 7");
  cmd->add_flag("--in-process", args->inProcess, "measure in this process (no worker; a crashing kernel ends kiln)");
  cmd->add_flag("--roofline", args->roofline,
                "place every call on the machine's roofline: arithmetic intensity, attainable bound, % of it "
                "(the ceilings are measured once per machine and thread count and kept in the store)");
  cmd->add_flag("--measure-ceilings", args->measureCeilings, "with --roofline: measure the ceilings again");
  cmd->add_option("--timeout", args->timeout, "seconds the kernels may run in the worker (compilation excluded)")
      ->check(CLI::PositiveNumber);
  addBatchFlag(cmd, args->flags);
  addInputShapesFlag(cmd, args->flags);
  addBuildFlags(cmd, args->flags);
  addStoreFlags(cmd, args->store);
  cmd->callback([args, &action] { action = [args] { return profileCommand(*args); }; });
}

}  // namespace kiln::cli
