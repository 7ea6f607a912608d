// kiln tune MODEL [--trials N] [--total-trials N] [--tuner xgb|random|grid] [--records FILE]
//                 [--timeout S] [--early-stopping N] [--time-limit S] [--tasks A,B] [--list-tasks]
//                 [--confirm N]
//                 [--json FILE] [--seed N] [--no-compare] [-O] [--target] [--threads] [--batch]
//                 [--db FILE] [--no-store] [--session ID]
//                 [--slurm [--partition P] [--array-size N] [--slurm-dir DIR]]
// kiln tune-worker   (internal: serves candidate measurements to a tuning run over stdin/stdout)
// kiln tune-slurm-task PLAN  (internal: one array task of a --slurm run, started by sbatch)
#include <unistd.h>

#include <csignal>
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

/// Kernel names and tuning keys from --tasks, split at commas, except the commas inside a key
/// ("conv2d_nchwc:n=1,c=64,...:f32"): a piece that starts "name=" continues the key before it.
std::vector<std::string> splitTaskList(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  // The next comma outside brackets (a nest key's workload holds commas in [...] and {...}).
  auto nextComma = [](const std::string& text, size_t from) {
    int depth = 0;
    for (size_t i = from; i < text.size(); ++i) {
      if (text[i] == '[' || text[i] == '{' || text[i] == '(') ++depth;
      if (text[i] == ']' || text[i] == '}' || text[i] == ')') --depth;
      if (text[i] == ',' && depth == 0) return i;
    }
    return std::string::npos;
  };
  for (const std::string& arg : args) {
    size_t start = 0;
    for (;;) {
      size_t comma = nextComma(arg, start);
      std::string piece = arg.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      size_t eq = piece.find('='), colon = piece.find(':');
      bool continues = !out.empty() && eq != std::string::npos && (colon == std::string::npos || colon > eq) &&
                       out.back().find(':') != std::string::npos;
      if (continues) out.back() += "," + piece;
      else if (!piece.empty()) out.push_back(piece);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
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

/// Ctrl-C or SIGTERM during a --slurm run: the coordinator cancels the array (scancel) at its
/// next poll and merges what was measured. A second signal ends the process as usual.
volatile std::sig_atomic_t g_stopRequested = 0;

void onStopSignal(int sig) {
  g_stopRequested = 1;
  std::signal(sig, SIG_DFL);
}

/// One line per array task: "0 RUNNING 3/8", for the progress line and the end.
std::string arrayLine(const std::vector<app::SlurmArrayTask>& tasks) {
  std::string out;
  for (const auto& t : tasks)
    out += (out.empty() ? "" : "  ") + std::to_string(t.index) + " " + t.state + " " + std::to_string(t.trials) +
           "/" + std::to_string(t.budget);
  return out;
}

/// The end of each array task; failed ones as one error line naming their log. Returns whether
/// one failed.
bool reportArray(const app::TuneResult& r) {
  std::printf("slurm: job %s, %zu array task(s), %d record(s) merged from %s\n", r.slurmJob.c_str(),
              r.slurmTasks.size(), r.recordsMerged, r.slurmDir.c_str());
  bool failed = false;
  for (const auto& t : r.slurmTasks) {
    std::printf("  array task %d: %s, %d/%d trials, %d record(s)  (%s)\n", t.index, t.state.c_str(), t.trials,
                t.budget, t.records, t.log.c_str());
    if (r.cancelled || !t.failed()) continue;
    failed = true;
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s: array task %d of job %s ended %s%s%s; its %d record(s) were merged\n",
                 t.log.c_str(), t.index, r.slurmJob.c_str(), t.state.c_str(),
                 t.exitCode.empty() ? "" : (" (exit " + t.exitCode + ")").c_str(),
                 t.reason.empty() ? "" : (": " + t.reason).c_str(), t.records);
  }
  return failed;
}

int tuneCommand(TuneArgs& a) {
  if (int rc = checkInputShapes(a.flags)) return rc;
  // The records file is read (bad lines reported below) and appended to: refuse one that is not
  // a records file. A new file is created.
  if (std::error_code ec; std::filesystem::exists(a.flags.records, ec))
    if (int rc = checkBuildFlags(a.flags, false)) return rc;
  app::TuneOptions& o = a.options;
  o.onlyTasks = splitTaskList(o.onlyTasks);
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
  std::string lastArray;
  if (o.slurm.enabled) {
    std::signal(SIGINT, onStopSignal);
    std::signal(SIGTERM, onStopSignal);
  }
  auto result = app::tune(a.model, o, [&](const app::TuneProgress& p) {
    if (!p.slurmJob.empty()) {
      std::string line = arrayLine(p.slurmTasks);
      if (tty)
        std::fprintf(stderr, "\r\033[Kjob %s: %d/%d trials  [%s]  ETA %s", p.slurmJob.c_str(), p.totalTrials,
                     p.totalBudget, line.c_str(), duration(p.etaSeconds).c_str());
      else if (line != lastArray)
        std::fprintf(stderr, "  job %s: %d/%d trials  [%s]\n", p.slurmJob.c_str(), p.totalTrials, p.totalBudget,
                     line.c_str());
      lastArray = line;
      if (g_stopRequested && lastTask != -2) {
        std::fprintf(stderr, "%scancelling job %s (scancel); merging what was measured\n", tty ? "\r\033[K" : "",
                     p.slurmJob.c_str());
        lastTask = -2;
      }
      return g_stopRequested == 0;
    }
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
  // A kernel's time with three significant digits or more: 291.0us, 1.62us, 0.380us, 12.345ms.
  auto kernelTime = [](double ms) {
    char text[32];
    const double us = ms * 1e3;
    if (ms >= 10 || ms <= 0)
      std::snprintf(text, sizeof text, "%.3fms", ms);
    else if (us >= 10)
      std::snprintf(text, sizeof text, "%.1fus", us);
    else
      std::snprintf(text, sizeof text, us >= 1 ? "%.2fus" : "%.3fus", us);
    return std::string(text);
  };
  for (const auto& t : r.tasks) {
    double speedup = t.defaultMs > 0 && t.bestMs > 0 ? t.defaultMs / t.bestMs : 0;
    std::printf("%-36.36s %5d %7d %9s %9s %9.1f %8.2fx  %s\n", t.info.name.c_str(), t.info.weight,
                t.measured + t.skipped, kernelTime(t.defaultMs).c_str(), kernelTime(t.bestMs).c_str(),
                t.bestGflops, speedup, t.bestKnobs.c_str());
  }
  int confirmed = 0;
  for (const auto& t : r.tasks) confirmed += t.confirmed > 0;
  if (confirmed > 0)
    std::printf("(default and best of %d task(s): their finalists timed again side by side after the search)\n",
                confirmed);
  if (r.kernelCalls > 0)
    std::printf("kernels: %d of %d calls per inference have a tuning key; %d run a schedule of primitives "
                "(a template-free sketch's), the rest a hand-written one\n",
                r.tunableCalls, r.kernelCalls, r.searchedCalls());
  if (r.cacheFlushed) std::printf("candidates timed with their weights and output flushed from the caches\n");
  if (r.untunedMs > 0 && r.tunedMs > 0)
    std::printf("\nend to end (median, side by side): untuned %.3f ms, tuned %.3f ms (%.2fx)\n", r.untunedMs,
                r.tunedMs, r.untunedMs / r.tunedMs);
  if (r.cancelled) std::printf("cancelled: the records measured so far are kept\n");
  bool arrayFailed = !r.slurmJob.empty() && reportArray(r);
  if (!r.recordsPath.empty())
    std::printf("records: %d written%s to %s (build with --records %s)\n", r.recordsWritten,
                r.recordsCopied > 0 ? (", " + std::to_string(r.recordsCopied) +
                                       " copied from earlier runs in the session store").c_str()
                                    : "",
                r.recordsPath.c_str(), r.recordsPath.c_str());
  if (r.stored.sessionId)
    std::printf("stored: session %lld, run %lld in %s\n", static_cast<long long>(r.stored.sessionId),
                static_cast<long long>(r.stored.runId), r.stored.dbPath.c_str());
  if (!a.json.empty()) {
    std::ofstream out(a.json);
    if (!out || !(out << app::tuneResultJson(r) << "\n")) return fail(a.json + ": cannot write file", ErrorKind::Io);
  }
  return arrayFailed ? static_cast<int>(ErrorKind::Io) : 0;
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
      ->check(CLI::IsMember(app::tunerNames()));
  cmd->add_option("--features", o.features,
                  "what xgb's cost model sees: knobs (default), loops (each candidate's loop nest; an "
                  "evolutionary search scores only the points it visits) or both")
      ->check(CLI::IsMember(app::featureSetNames()));
  cmd->add_flag("--cache-flush", o.cacheFlush,
                "time each candidate with its weights and output flushed from the caches before every call "
                "(its input stays warm), as a layer whose weights the model's other layers evicted");
  cmd->add_option("--timeout", o.measureTimeoutSeconds, "seconds per candidate before it counts as hung")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--early-stopping", o.earlyStopping, "stop a task after N trials without improvement")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--time-limit", o.timeLimitSeconds, "wall-clock limit of the whole run in seconds")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--batch-size", o.batchSize, "candidates compiled and measured per round")->check(CLI::PositiveNumber);
  cmd->add_option("--tasks", o.onlyTasks,
                  "tune only these kernels, tuning keys or kinds (conv2d_nchwc, dense, dense_packed, matmul, "
                  "nest, reduce, pool; comma- or space-separated)");
  cmd->add_option("--seed", o.seed, "random seed of the tuners");
  cmd->add_flag("--list-tasks", args->listTasks, "list the tasks and their space sizes, then stop");
  cmd->add_option("--confirm", o.confirmTop,
                  "after each task, time its N best configurations and the default again side by side; builds "
                  "prefer that round (default 3, 0: off)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-compare", args->noCompare, "skip the end-to-end untuned vs tuned timing");
  cmd->add_option("--json", args->json, "write the result as JSON");
  CLI::Option* slurm = cmd->add_flag("--slurm", o.slurm.enabled,
                                     "spread the tasks over a Slurm job array (sbatch); merge its records here");
  cmd->add_option("--partition", o.slurm.partition, "the Slurm partition (default: the cluster's)")->needs(slurm);
  cmd->add_option("--array-size", o.slurm.arraySize, "array tasks (default 2; at most one per tuning task)")
      ->check(CLI::Range(1, 100000))
      ->needs(slurm);
  cmd->add_option("--slurm-dir", o.slurm.workDir,
                  "folder for the plan, per-task records and logs, seen by every node (default: RECORDS.slurm, "
                  "else ./kiln-tune-slurm)")
      ->needs(slurm);
  addBuildFlags(cmd, args->flags);
  addBatchFlag(cmd, args->flags);
  addInputShapesFlag(cmd, args->flags);
  addStoreFlags(cmd, args->store);
  cmd->callback([args, &action] { action = [args] { return tuneCommand(*args); }; });

  CLI::App* worker = cli.add_subcommand("tune-worker", "");
  worker->group("");  // internal: not listed in --help
  worker->callback([&action] { action = [] { return app::runTuneWorker(); }; });

  auto plan = std::make_shared<std::string>();
  CLI::App* arrayTask = cli.add_subcommand("tune-slurm-task", "");
  arrayTask->group("");  // internal: the batch script of `kiln tune --slurm` runs it
  arrayTask->add_option("plan", *plan, "plan.json of the run")->required();
  arrayTask->callback([plan, &action] { action = [plan] { return app::runSlurmArrayTask(*plan); }; });
}

}  // namespace kiln::cli
