// kiln tune MODEL [--trials N] [--total-trials N] [--tuner xgb|random|grid] [--records FILE]
//                 [--timeout S] [--early-stopping N] [--time-limit S] [--tasks A,B] [--list-tasks]
//                 [--confirm N]
//                 [--json FILE] [--seed N] [--no-compare] [-O] [--target] [--threads] [--batch]
//                 [--db FILE] [--no-store] [--session ID]
// kiln tune-worker   (internal: serves candidate measurements to a tuning run over stdin/stdout)
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "app/cli/commands.h"
#include "app/tune.h"

namespace kiln::cli {
namespace {

struct TuneArgs {
  std::string model, json;
  app::TuneOptions options;
  bool listTasks = false, noCompare = false;
  BuildFlags flags;
  StoreFlags store;
};

std::string duration(double seconds) {
  int s = static_cast<int>(std::lround(seconds));
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%dh%02dm", s / 3600, s / 60 % 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%dm%02ds", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%ds", s);
  return buf;
}

std::string gflops(double flops) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", flops);
  return buf;
}

int listTasks(const TuneArgs& a) {
  auto tasks = app::tuneTasks(a.model, a.options);
  if (!tasks) return fail(tasks.error());
  std::printf("%-4s %-40s %-14s %6s %10s %6s  %s\n", "#", "kernel", "op", "calls", "MFLOP", "space", "tuning key");
  int i = 0;
  for (const auto& t : tasks.value())
    std::printf("%-4d %-40s %-14s %6d %10.1f %6lld  %s\n", ++i, t.name.c_str(), t.op.c_str(), t.weight, t.flops / 1e6,
                static_cast<long long>(t.spaceSize), t.workloadKey.c_str());
  return 0;
}

int tuneCommand(TuneArgs& a) {
  if (int rc = checkInputShapes(a.flags)) return rc;
  // The records file is read (bad lines reported below) and appended to: refuse one that is not
  // a records file. A new file is created.
  if (std::error_code ec; std::filesystem::exists(a.flags.records, ec))
    if (int rc = checkBuildFlags(a.flags, false)) return rc;
  app::TuneOptions& o = a.options;
  o.build = buildOptions(a.flags);
  // --records (a build flag) is the file this run resumes from and appends to; the tasks come
  // from the untuned build.
  o.recordsPath = o.build.records;
  o.build.records.clear();
  o.batch = a.flags.batch;
  o.inputs = inputSpecs(a.flags);
  o.store = storeOptions(a.store);
  o.compareEndToEnd = !a.noCompare;
  if (a.listTasks) return listTasks(a);

  bool tty = isatty(2);
  int lastTask = -1, lastMeasured = 0;
  auto result = app::tune(a.model, o, [&](const app::TuneProgress& p) {
    if (tty) {
      int width = 24, filled = p.taskBudget > 0 ? width * p.taskTrials / p.taskBudget : 0;
      std::string bar(static_cast<size_t>(filled), '#');
      bar.resize(static_cast<size_t>(width), '.');
      std::fprintf(stderr, "\r\033[K[%d/%d] %-34.34s [%s] %3d/%-3d best %7s GFLOP/s (default %s)  errors %d  ETA %s",
                   p.taskIndex + 1, p.numTasks, p.taskName.c_str(), bar.c_str(), p.taskTrials, p.taskBudget,
                   gflops(p.bestGflops).c_str(), gflops(p.defaultGflops).c_str(), p.errors,
                   duration(p.etaSeconds).c_str());
    } else if (p.taskIndex != lastTask) {
      std::fprintf(stderr, "  task %d/%d: %s\n", p.taskIndex + 1, p.numTasks, p.taskName.c_str());
    } else if (p.totalTrials != lastMeasured) {
      // Once per record written: what a kill can no longer take away.
      std::fprintf(stderr, "    %d/%d trials, %d measured by this run\n", p.taskTrials, p.taskBudget, p.totalTrials);
    }
    lastTask = p.taskIndex;
    lastMeasured = p.totalTrials;
    return true;
  });
  if (tty) std::fprintf(stderr, "\r\033[K");
  if (!result) return fail(result.error());
  const app::TuneResult& r = result.value();
  if (r.badRecordLines > 0)
    std::fprintf(stderr, "warning: %s: skipped %d bad line(s) (%s)\n", o.recordsPath.c_str(), r.badRecordLines,
                 r.badRecordProblem.c_str());
  std::printf("%s  target %s  tuner %s  %d measured, %d failed, %s\n\n", r.model.c_str(), r.target.c_str(),
              r.tuner.c_str(), r.totalMeasured, r.totalErrors, duration(r.wallSeconds).c_str());
  std::printf("%-36s %5s %7s %9s %9s %9s %9s  %s\n", "kernel", "calls", "trials", "default", "best", "GFLOP/s",
              "speedup", "best knobs");
  for (const auto& t : r.tasks) {
    double speedup = t.defaultMs > 0 && t.bestMs > 0 ? t.defaultMs / t.bestMs : 0;
    std::printf("%-36.36s %5d %7d %8.4fms %8.4fms %9.1f %8.2fx  %s\n", t.info.name.c_str(), t.info.weight,
                t.measured + t.skipped, t.defaultMs, t.bestMs, t.bestGflops, speedup, t.bestKnobs.c_str());
  }
  int confirmed = 0;
  for (const auto& t : r.tasks) confirmed += t.confirmed > 0;
  if (confirmed > 0)
    std::printf("(default and best of %d task(s): their finalists timed again side by side after the search)\n",
                confirmed);
  if (r.untunedMs > 0 && r.tunedMs > 0)
    std::printf("\nend to end (median, side by side): untuned %.3f ms, tuned %.3f ms (%.2fx)\n", r.untunedMs,
                r.tunedMs, r.untunedMs / r.tunedMs);
  if (r.cancelled) std::printf("cancelled: the records measured so far are kept\n");
  if (!r.recordsPath.empty())
    std::printf("records: %d written to %s (build with --records %s)\n", r.recordsWritten, r.recordsPath.c_str(),
                r.recordsPath.c_str());
  if (r.stored.sessionId)
    std::printf("stored: session %lld, run %lld in %s\n", static_cast<long long>(r.stored.sessionId),
                static_cast<long long>(r.stored.runId), r.stored.dbPath.c_str());
  if (!a.json.empty()) {
    std::ofstream out(a.json);
    if (!out || !(out << app::tuneResultJson(r) << "\n")) return fail(a.json + ": cannot write file", ErrorKind::Io);
  }
  return 0;
}

}  // namespace

void registerTune(CLI::App& cli, Action& action) {
  auto args = std::make_shared<TuneArgs>();
  app::TuneOptions& o = args->options;
  CLI::App* cmd = cli.add_subcommand("tune", "search schedules by measuring candidates; keep tuning records");
  cmd->add_option("model", args->model, kModelHelp)->required();
  cmd->add_option("--trials", o.trialsPerTask, "measured candidates per task (default 32)")->check(CLI::PositiveNumber);
  cmd->add_option("--total-trials", o.totalTrials, "a total budget split over tasks by their share of the FLOPs")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--tuner", o.tuner, "xgb (cost model + simulated annealing), random or grid")
      ->check(CLI::IsMember({"xgb", "random", "grid"}));
  cmd->add_option("--timeout", o.measureTimeoutSeconds, "seconds per candidate before it counts as hung")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--early-stopping", o.earlyStopping, "stop a task after N trials without improvement")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--time-limit", o.timeLimitSeconds, "wall-clock limit of the whole run in seconds")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--batch-size", o.batchSize, "candidates compiled and measured per round")->check(CLI::PositiveNumber);
  cmd->add_option("--tasks", o.onlyTasks, "tune only these kernels or tuning keys")->delimiter(',');
  cmd->add_option("--seed", o.seed, "random seed of the tuners");
  cmd->add_flag("--list-tasks", args->listTasks, "list the tasks and their space sizes, then stop");
  cmd->add_option("--confirm", o.confirmTop,
                  "after each task, time its N best configurations and the default again side by side; builds "
                  "prefer that round (default 3, 0: off)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-compare", args->noCompare, "skip the end-to-end untuned vs tuned timing");
  cmd->add_option("--json", args->json, "write the result as JSON");
  addBuildFlags(cmd, args->flags);
  addBatchFlag(cmd, args->flags);
  addInputShapesFlag(cmd, args->flags);
  addStoreFlags(cmd, args->store);
  cmd->callback([args, &action] { action = [args] { return tuneCommand(*args); }; });

  CLI::App* worker = cli.add_subcommand("tune-worker", "");
  worker->group("");  // internal: not listed in --help
  worker->callback([&action] { action = [] { return app::runTuneWorker(); }; });
}

}  // namespace kiln::cli
