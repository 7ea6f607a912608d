// The side-by-side engine (coordinator and worker loop); bench.h explains the protocol.
#include "profiler/bench.h"

#include "profiler/core_latency.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "profiler/subprocess.h"
#include "runtime/error.h"

namespace kiln::profiler {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string secondsText(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", s);
  return text;
}

/// One worker process of one row.
struct Worker {
  size_t row = 0;
  int process = 0;
  WorkerProcess proc;
  std::string kernel;  // the kernel a fault or stuck event named
  std::vector<double> samplesMs;
  bool done = false;  // finished (or failed: its row says why)
};

/// What went wrong with a request; Ok while nothing did.
struct Outcome {
  Status status = Status::Ok;
  std::string reason;
  bool cancelled = false;
  bool kernelFault = false;  // crashed or hung
};

/// Waits up to `limitSeconds` for the reply to the request just sent, skipping lines that are
/// not protocol objects and noting fault events. A timeout asks the worker where it is (SIGUSR1),
/// then kills it.
/// During setup, the worker's "measuring" event (compiled, its kernels run from now on) starts
/// the shorter limit `runLimitSeconds` (> 0).
std::optional<json> awaitReply(Worker& w, double limitSeconds, const std::function<bool()>& cancelled,
                               std::string phase, Outcome& out, double runLimitSeconds = 0) {
  auto deadline = Clock::now() + std::chrono::duration<double>(limitSeconds);
  for (;;) {
    // Checked before every line, not only when the worker is quiet: a worker that keeps writing
    // (warnings, events) must not delay Cancel.
    if (cancelled && cancelled()) {
      w.proc.stop();
      out.cancelled = true;
      out.status = Status::Skipped;
      out.reason = "cancelled";
      return std::nullopt;
    }
    double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    std::string failure;
    auto line = w.proc.receive(std::clamp(left, 0.0, 0.1), failure, true);
    if (line) {
      json msg = json::parse(*line, nullptr, false);
      if (msg.is_discarded() || !msg.is_object()) continue;  // not protocol output
      std::string event = msg.value("event", "");
      if (event == "fault" || event == "stuck") w.kernel = msg.value("kernel", "");
      if (event == "measuring" && runLimitSeconds > 0) {
        auto runDeadline = Clock::now() + std::chrono::duration<double>(runLimitSeconds);
        if (runDeadline < deadline) {
          deadline = runDeadline;
          limitSeconds = runLimitSeconds;
          phase = "the first run";
        }
      }
      if (!event.empty() || !msg.contains("ok")) continue;
      if (msg.value("ok", false)) return msg;
      out.status = parseStatus(msg.value("status", std::string("failed")));
      if (out.status == Status::Ok) out.status = Status::Failed;
      out.reason = msg.value("error", std::string("the worker failed"));
      return std::nullopt;
    }
    if (failure.rfind("timeout", 0) == 0) {
      if (Clock::now() < deadline) continue;
      w.proc.signal(SIGUSR1);
      for (auto grace = Clock::now() + std::chrono::seconds(1); Clock::now() < grace;) {
        std::string ignored;
        auto l = w.proc.receive(0.2, ignored, true);
        if (!l) {
          if (ignored.rfind("timeout", 0) == 0) continue;
          break;
        }
        json msg = json::parse(*l, nullptr, false);
        if (!msg.is_discarded() && msg.is_object() && msg.value("event", "") == "stuck") {
          w.kernel = msg.value("kernel", "");
          break;
        }
      }
      w.proc.stop();
      out.status = Status::Timeout;
      out.kernelFault = true;
      out.reason = phase + " timed out after " + secondsText(limitSeconds);
      if (!w.kernel.empty()) out.reason += " in " + w.kernel;
      return std::nullopt;
    }
    out.status = Status::Failed;
    if (w.proc.endSignal() > 0) {
      out.kernelFault = true;
      out.reason = (w.kernel.empty() ? std::string("the worker crashed") : std::string("kernel crashed")) +
                   " (signal " + std::to_string(w.proc.endSignal()) + ")";
      if (!w.kernel.empty()) out.reason += " in " + w.kernel;
      if (w.proc.endSignal() == SIGKILL) out.reason += ", killed (out of memory?)";
    } else {
      out.reason = "the " + failure + " during " + phase;
    }
    return std::nullopt;
  }
}

/// The threads of every other live worker asleep: none runnable (their pools parked), so the
/// next timed repeat has the cores to itself (but for other tenants of the machine).
void waitForOthersParked(const std::vector<std::unique_ptr<Worker>>& workers, const Worker* next,
                         double timeoutMs, BenchResult& result) {
  auto start = Clock::now();
  bool waited = false;
  for (;;) {
    bool parked = true;
    for (const auto& w : workers)
      if (w.get() != next && w->proc.running() && !processParked(w->proc.pid())) parked = false;
    if (parked) break;
    if (!waited) {
      waited = true;
      ++result.parkWaits;
    }
    if (secondsSince(start) * 1000 > timeoutMs) {
      ++result.parkTimeouts;
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace

bool processParked(int pid) {
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d) return false;
  bool parked = true;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream stat(dir + "/" + e->d_name + "/stat");
    std::string text;
    if (!std::getline(stat, text)) continue;  // the thread just ended
    // "tid (comm) S ...": the state follows the last ')' (comm may hold spaces and parentheses).
    size_t paren = text.rfind(')');
    if (paren == std::string::npos || paren + 2 >= text.size()) continue;
    char state = text[paren + 2];
    if (state == 'R') {
      parked = false;
      break;
    }
  }
  closedir(d);
  return parked;
}

BenchResult runSideBySide(const std::vector<BenchBackend>& backends, const BenchOptions& o) {
  // A worker that dies before reading its request must not kill the coordinator with SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  BenchResult result;
  auto setupStart = Clock::now();
  const int processes = std::max(1, o.processes);
  auto say = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };
  auto isCancelled = [&] { return o.cancelled && o.cancelled(); };

  result.rows.resize(backends.size());
  std::vector<std::unique_ptr<Worker>> workers;
  std::vector<int> number(backends.size(), 1);
  std::vector<double> spentMs(backends.size(), 0);

  auto fail = [&](Worker& w, const Outcome& outcome) {
    BenchRow& row = result.rows[w.row];
    if (outcome.cancelled) result.cancelled = true;
    if (row.ok()) {
      row.status = outcome.status;
      row.reason = outcome.reason;
      row.kernelFault = outcome.kernelFault;
      if (processes > 1 && !outcome.cancelled) row.reason += " (process " + std::to_string(w.process + 1) + ")";
    }
    // A row with one failed process has failed: its other processes stop too (all killed
    // before any is waited for).
    for (auto& other : workers)
      if (other->row == w.row) other->proc.kill();
    for (auto& other : workers)
      if (other->row == w.row) {
        other->proc.stop();
        other->done = true;
      }
  };
  auto stopAll = [&] {
    for (auto& w : workers) w->proc.kill();
    for (auto& w : workers) w->proc.stop();
  };

  // ---- setup: every worker starts and loads at once ----------------------------------------------
  say("starting " + std::to_string(backends.size() * processes) + " worker processes");
  for (size_t i = 0; i < backends.size(); ++i) {
    BenchRow& row = result.rows[i];
    row.name = backends[i].name;
    if (!backends[i].unavailable.empty()) {
      row.status = Status::Unavailable;
      row.reason = backends[i].unavailable;
      continue;
    }
    json setup = json::parse(backends[i].setupJson);
    for (int p = 0; p < processes; ++p) {
      auto w = std::make_unique<Worker>();
      w->row = i;
      w->process = p;
      std::string why;
      if (!w->proc.start(backends[i].argv, why)) {
        row.status = Status::Failed;
        row.reason = "cannot start the worker: " + why;
        break;
      }
      std::filesystem::path dir = std::filesystem::path(o.workDir) / (std::to_string(i) + "-" + std::to_string(p));
      std::filesystem::create_directories(dir);
      row.pids.push_back(w->proc.pid());
      setup["op"] = "setup";
      setup["output_dir"] = dir.string();
      w->proc.send(setup.dump());
      workers.push_back(std::move(w));
    }
  }
  auto setupDeadline = Clock::now() + std::chrono::duration<double>(o.setupTimeoutSeconds);
  for (auto& w : workers) {
    BenchRow& row = result.rows[w->row];
    if (!row.ok() || result.cancelled) continue;
    Outcome outcome;
    double left = std::max(0.1, std::chrono::duration<double>(setupDeadline - Clock::now()).count());
    auto reply = awaitReply(*w, left, o.cancelled, "setup", outcome, o.runTimeoutSeconds);
    if (!reply) {
      fail(*w, outcome);
      if (outcome.cancelled) break;
      continue;
    }
    const json& r = (*reply)["result"];
    double firstMs = r.value("first_ms", 0.0);
    if (o.budgetSeconds > 0 && firstMs > o.budgetSeconds * 1000) {
      fail(*w, {Status::Timeout, "one run took " + std::to_string(static_cast<long>(firstMs)) + " ms, over the budget of " +
                    std::to_string(static_cast<long>(o.budgetSeconds * 1000)) + " ms"});
      continue;
    }
    spentMs[w->row] += firstMs;
    if (w->process == 0) {
      row.outputs = r.value("outputs", std::vector<std::string>{});
      row.resultJson = r.dump();
    }
  }
  result.setupSeconds = secondsSince(setupStart);
  auto endCancelled = [&] {
    result.cancelled = true;
    stopAll();
    for (BenchRow& row : result.rows)
      if (row.ok()) {
        row.status = Status::Skipped;
        row.reason = "cancelled";
      }
    return result;
  };
  if (result.cancelled || isCancelled()) return endCancelled();

  // One request of calls to a worker; false when it failed (its row says why).
  auto runCalls = [&](Worker& w, int warm, int n, double& ms) -> bool {
    if (!w.proc.send(json{{"op", "run"}, {"warm", warm}, {"number", n}}.dump())) {
      fail(w, {Status::Failed, "the worker ended unexpectedly"});
      return false;
    }
    Outcome outcome;
    auto reply = awaitReply(w, o.runTimeoutSeconds, o.cancelled, "a run", outcome);
    if (!reply) {
      fail(w, outcome);
      return false;
    }
    ms = reply->value("ms", 0.0);
    spentMs[w.row] += ms + reply->value("warm_ms", 0.0);
    return true;
  };
  auto overBudget = [&](size_t row) { return o.budgetSeconds > 0 && spentMs[row] > o.budgetSeconds * 1000; };
  auto live = [&](const Worker& w) { return !w.done && result.rows[w.row].ok() && !result.cancelled; };

  // ---- warm-up, then `number` per backend --------------------------------------------------------
  say("warming up");
  for (auto& w : workers) {
    if (!live(*w)) continue;
    waitForOthersParked(workers, w.get(), o.parkTimeoutMs, result);
    double ms = 0, warmedMs = 0;
    if (!runCalls(*w, std::max(0, o.warmup), 0, ms)) continue;
    if (o.minRepeatMs <= 0) continue;
    if (w->process != 0) {
      // Every further process of a row warms up for one repeat's length too (process 0 did while
      // growing `number`): a few calls of a sub-millisecond model leave the first timed repeats
      // in a start-up transient, and they fall on the first processes of the first round.
      if (!runCalls(*w, number[w->row], 0, ms)) continue;
      warmedMs += ms;
    } else {
      for (int& n = number[w->row]; !overBudget(w->row);) {
        if (!runCalls(*w, 0, n, ms)) break;
        warmedMs += ms;
        if (ms >= o.minRepeatMs || n >= (1 << 20)) break;
        double scale = ms > 0 ? o.minRepeatMs / ms * 1.2 : 10.0;
        n = std::max(n + 1, static_cast<int>(n * std::min(scale, 10.0)));
      }
    }
    // Then whole repeats until the process has run the model for minWarmupMs: in a fairness run
    // every row that missed 0.9-1.1 was slower timed alone (timed repeats right after the
    // process's start) than inside a comparison (after the other rows' start-up), up to 1.3x.
    while (live(*w) && warmedMs < o.minWarmupMs && !overBudget(w->row) && runCalls(*w, 0, number[w->row], ms))
      warmedMs += std::max(ms, 0.01);
  }

  // The host's placement of this machine's CPUs, probed with every worker parked: at the start,
  // every round and the end (core_latency.h says why).
  auto probePlacement = [&] {
    if (o.placementProbeMs <= 0) return;
    waitForOthersParked(workers, nullptr, o.parkTimeoutMs, result);
    if (auto probe = measureCoreRoundTrip(o.placementProbeMs)) result.coreRoundTripNs.push_back(probe->ns);
  };

  // ---- rounds: every live process of every backend, one repeat each, alternating -----------------
  say("timing");
  const int repeat = std::max(1, o.repeat);
  const int rounds = (repeat + processes - 1) / processes;
  for (int round = 0; round < rounds && !result.cancelled; ++round) {
    probePlacement();
    for (int p = 0; p < processes; ++p)
      for (auto& w : workers) {
        if (w->process != p || !live(*w)) continue;
        if (isCancelled()) {
          result.cancelled = true;
          break;
        }
        if (overBudget(w->row)) {
          result.rows[w->row].timing.budgetExceeded = true;
          continue;
        }
        size_t taken = 0;
        for (auto& other : workers)
          if (other->row == w->row) taken += other->samplesMs.size();
        if (static_cast<int>(taken) >= repeat) continue;
        waitForOthersParked(workers, w.get(), o.parkTimeoutMs, result);
        double ms = 0;
        if (!runCalls(*w, 1, number[w->row], ms)) continue;
        w->samplesMs.push_back(ms / number[w->row]);
      }
  }
  if (result.cancelled || isCancelled()) return endCancelled();
  probePlacement();
  for (auto& w : workers) {
    if (w->proc.running()) w->proc.send(R"({"op":"exit"})");
    w->proc.stop();
  }

  // ---- statistics per row ------------------------------------------------------------------------
  for (size_t i = 0; i < result.rows.size(); ++i) {
    BenchRow& row = result.rows[i];
    if (!row.ok()) continue;
    std::vector<double> pooled;
    // Pooled in the order run: round by round, process by process.
    size_t most = 0;
    for (auto& w : workers)
      if (w->row == i) most = std::max(most, w->samplesMs.size());
    for (size_t k = 0; k < most; ++k)
      for (auto& w : workers)
        if (w->row == i && k < w->samplesMs.size()) pooled.push_back(w->samplesMs[k]);
    for (auto& w : workers)
      if (w->row == i && !w->samplesMs.empty()) row.processMedianMs.push_back(medianOf(w->samplesMs));
    bool budgetExceeded = row.timing.budgetExceeded;
    row.timing = timingFromSamples(std::move(pooled), number[i]);
    row.timing.warmup = o.warmup;
    row.timing.budgetExceeded = budgetExceeded;
    row.timing.elapsedMs = spentMs[i];
    if (row.timing.samplesMs.empty()) {
      row.status = Status::Timeout;
      row.reason = "the time budget of " + secondsText(o.budgetSeconds) + " ran out before a timed repeat";
      continue;
    }
    if (row.processMedianMs.size() > 1) {
      auto [lo, hi] = std::minmax_element(row.processMedianMs.begin(), row.processMedianMs.end());
      row.processesDisagree = *lo > 0 && *hi / *lo > o.disagreeRatio;
    }
  }
  return result;
}

// ---- the worker ---------------------------------------------------------------------------------

namespace {

bool looksOutOfMemory(const std::string& m) {
  return m.find("out of memory") != std::string::npos || m.find("can't allocate memory") != std::string::npos ||
         m.find("bad_alloc") != std::string::npos;
}

json errorReply(const std::string& message) {
  return {{"ok", false}, {"error", message}, {"status", looksOutOfMemory(message) ? "out-of-memory" : "failed"}};
}

double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

}  // namespace

int serveBenchWorker(const std::function<BenchWorkerSetup(const std::string& setupJson)>& setup,
                     const std::string& firstLine) {
  std::function<void()> call;
  std::string line = firstLine;
  while (!line.empty() || std::getline(std::cin, line)) {
    json reply;
    try {
      json q = json::parse(line);
      std::string op = q.at("op").get<std::string>();
      if (op == "exit") return 0;
      if (op == "setup") {
        BenchWorkerSetup s = setup(line);
        call = std::move(s.call);
        reply = {{"ok", true}, {"result", json::parse(s.resultJson)}};
      } else if (op == "run") {
        if (!call) throw Error("run before a successful setup", ErrorKind::Usage);
        int warm = q.value("warm", 0), n = q.value("number", 1);
        auto start = Clock::now();
        for (int i = 0; i < warm; ++i) call();
        double warmMs = msSince(start);
        start = Clock::now();
        for (int i = 0; i < n; ++i) call();
        reply = {{"ok", true}, {"ms", msSince(start)}, {"warm_ms", warmMs}};
      } else {
        throw Error("unknown request '" + op + "'", ErrorKind::Usage);
      }
    } catch (const std::bad_alloc&) {
      reply = errorReply("out of memory");
    } catch (const std::exception& e) {
      reply = errorReply(e.what());
    }
    std::cout << reply.dump() << '\n';
    std::cout.flush();
    line.clear();
  }
  return 0;
}

}  // namespace kiln::profiler
