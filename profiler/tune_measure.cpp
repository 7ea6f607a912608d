// Tuning candidates measured in worker processes; see tune_measure.h.
#include "profiler/tune_measure.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <istream>
#include <map>
#include <optional>
#include <ostream>
#include <random>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "codegen/llvm/jit.h"
#include "codegen/target.h"
#include "core/lower/lower.h"
#include "core/lower/schedule.h"
#include "core/lower/schedule_config.h"
#include "core/tune/task.h"
#include "profiler/measure_worker.h"
#include "profiler/subprocess.h"
#include "profiler/time_evaluator.h"
#include "runtime/error.h"
#include "runtime/graph_executor.h"
#include "runtime/tensor_values.h"
#include "runtime/thread_pool.h"

namespace kiln::profiler {

using nlohmann::json;

// ---- the worker ---------------------------------------------------------------------------------

namespace {

struct Built {
  std::shared_ptr<runtime::GraphExecutor> executor;
  std::vector<int64_t> indexBounds;  // per input (core::tune::Candidate)
  int call = -1;  // the plan call that runs the task's kernel
  std::string schedule;
  double compileSeconds = 0;
};

/// Compiles the task graph of `r.key` with the request's knobs (none: the heuristic).
Built buildCandidate(const CandidateRequest& r, bool withKnobs) {
  auto start = std::chrono::steady_clock::now();
  codegen::Target target = codegen::Target::parse(r.target);
  if (!target.runnable) throw Error("target '" + r.target + "' cannot run here", ErrorKind::Usage);
  core::lower::LowerOptions lower = core::lower::lowerOptionsFor(target.cpu, target.features);
  core::lower::Knobs knobs = withKnobs && !r.knobs.empty() ? core::lower::parseKnobs(r.knobs) : core::lower::Knobs{};
  // The task's kernel compiled as a build at this level compiles it (no fusion: its timing holds
  // nothing else).
  core::tune::Candidate candidate = core::tune::compileCandidate(r.key, knobs, lower, r.optLevel);
  core::lower::LoweredModule module = std::move(candidate.module);
  Built built;
  const std::string kernel = module.funcs[candidate.kernel].name;
  built.schedule = module.funcs[candidate.kernel].attrs["schedule"];
  for (size_t i = 0; i < module.plan.calls.size(); ++i)
    if (module.plan.calls[i].kernel == kernel) built.call = static_cast<int>(i);
  if (built.call < 0) throw Error("the task graph of '" + r.key + "' has no kernel with that key", ErrorKind::Internal);
  auto library = codegen::JitLibrary::compile(module.funcs, target);
  built.executor = std::make_shared<runtime::GraphExecutor>(std::move(module.plan), library);
  built.indexBounds = std::move(candidate.indexBounds);
  built.compileSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return built;
}

/// Runs the whole task graph once on fixed pseudo-random inputs and returns output 0 as doubles.
/// Floats are normal; bools 0 or 1; integers uniform over the rows of the table they index
/// (`indexBounds`), else over [0, 8).
std::vector<double> runOnce(runtime::GraphExecutor& ex, const std::vector<int64_t>& indexBounds) {
  std::mt19937 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int i = 0; i < ex.numInputs(); ++i) {
    const auto& slot = ex.inputSlot(i);
    runtime::Tensor t = runtime::Tensor::zeros(slot.dtype, slot.shape);
    const int64_t bound = static_cast<size_t>(i) < indexBounds.size() ? indexBounds[i] : 0;
    const int64_t highest = slot.dtype == runtime::DType::Bool ? 1 : bound > 0 ? bound - 1 : 7;
    std::uniform_int_distribution<int64_t> integer(0, highest);
    for (int64_t k = 0; k < t.numel(); ++k) {
      switch (slot.dtype) {
        case runtime::DType::Float32: t.data<float>()[k] = static_cast<float>(normal(rng)); break;
        case runtime::DType::Float64: t.data<double>()[k] = normal(rng); break;
        case runtime::DType::Int64: t.data<int64_t>()[k] = integer(rng); break;
        case runtime::DType::Int32: t.data<int32_t>()[k] = static_cast<int32_t>(integer(rng)); break;
        case runtime::DType::Int8: t.data<int8_t>()[k] = static_cast<int8_t>(integer(rng)); break;
        case runtime::DType::Bool:
        case runtime::DType::UInt8: t.data<uint8_t>()[k] = static_cast<uint8_t>(integer(rng)); break;
      }
    }
    ex.setInput(i, t);
  }
  ex.run();
  runtime::Tensor out = ex.output(0);
  std::vector<double> values(static_cast<size_t>(out.numel()));
  for (int64_t k = 0; k < out.numel(); ++k) values[k] = runtime::elementAsDouble(out, k);
  return values;
}

void injectFault(const std::string& knobs) {
  const char* spec = std::getenv("KILN_TUNE_FAULT");
  if (!spec) return;
  std::string s(spec);
  size_t colon = s.find(':');
  if (colon == std::string::npos) return;
  std::string kind = s.substr(0, colon), needle = s.substr(colon + 1);
  // Matched against "knobs," so that "mi=1," names mi=1 and not mi=12.
  if (needle.empty() || (knobs + ",").find(needle) == std::string::npos) return;
  if (kind == "crash") raise(SIGSEGV);
  if (kind == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

class WorkerState {
 public:
  json handle(const json& msg) {
    int id = msg.value("id", 0);
    json reply{{"id", id}};
    try {
      std::string op = msg.at("op").get<std::string>();
      if (op == "compile") {
        CandidateRequest r;
        r.key = msg.at("key").get<std::string>();
        r.knobs = msg.value("knobs", "");
        r.target = msg.value("target", "llvm");
        r.threads = msg.value("threads", 1);
        r.optLevel = msg.value("opt_level", 3);
        r.repeat = msg.value("repeat", 5);
        r.minRepeatMs = msg.value("min_repeat_ms", 10.0);
        r.coldOperands = msg.value("cold_operands", false);
        Built built = buildCandidate(r, true);
        reply["compile_s"] = built.compileSeconds;
        reply["schedule"] = built.schedule;
        m_pending[id] = {r, std::move(built)};
      } else if (op == "measure") {
        auto [r, built] = take(id);
        measure(r, built, reply);
      } else if (op == "measure_together") {
        measureTogether(msg.at("ids").get<std::vector<int>>(), reply);
      } else {
        throw Error("unknown request '" + op + "'", ErrorKind::Usage);
      }
      if (!reply.contains("error")) reply["ok"] = true;
    } catch (const std::exception& e) {
      reply["ok"] = false;
      reply["error"] = e.what();
    }
    return reply;
  }

 private:
  std::pair<CandidateRequest, Built> take(int id) {
    auto it = m_pending.find(id);
    if (it == m_pending.end()) throw Error("no compiled candidate " + std::to_string(id), ErrorKind::Internal);
    auto taken = std::move(it->second);
    m_pending.erase(it);
    return taken;
  }

  /// Runs the candidate once and compares its output with the default schedule's; false (with
  /// the reply's error set) when it computes something else.
  bool check(const CandidateRequest& r, Built& built, json& reply) {
    runtime::setNumThreads(std::max(1, r.threads));
    const std::vector<double>& expected = reference(r);
    injectFault(built.schedule);
    std::vector<double> got = runOnce(*built.executor, built.indexBounds);
    double diff = 0, scale = 1;
    for (size_t i = 0; i < got.size() && i < expected.size(); ++i) {
      const double g = got[i], e = expected[i];
      // The same value, NaN and infinities included (an element nest's rsqrt or log of a random
      // negative input is NaN whatever its schedule).
      if (g == e || (std::isnan(g) && std::isnan(e))) continue;
      double d = std::abs(g - e);
      diff = std::isnan(d) ? INFINITY : std::max(diff, d);
      if (std::isfinite(e)) scale = std::max(scale, std::abs(e));
    }
    reply["max_abs_diff"] = std::isfinite(diff) ? diff : -1.0;
    // Reassociated sums differ in the last bits, Winograd F(4×4, 3×3) by ~1e-5 of the output
    // scale (core/lower/ops_conv_winograd.cpp; 3e-5 measured on ResNet-18's layers); a wrong
    // schedule differs in O(1) values.
    if (got.size() != expected.size() || !(diff <= 1e-3 * scale)) {
      char text[96];
      std::snprintf(text, sizeof text, "wrong result (max |diff| %.3g)", diff);
      reply["ok"] = false;
      reply["error"] = text;
      return false;
    }
    return true;
  }

  /// The timing of request `r` whose callables run `calls` (executor, call index) in order.
  static TimingOptions timingOf(const CandidateRequest& r,
                                std::vector<std::pair<runtime::GraphExecutor*, int>> calls) {
    TimingOptions timing;
    timing.warmup = 2;
    timing.repeat = std::max(1, r.repeat);
    timing.minRepeatMs = r.minRepeatMs;
    if (r.coldOperands)
      timing.beforeEachCall = [calls = std::move(calls)](size_t k) {
        std::vector<runtime::GraphExecutor::Operand> operands = calls[k].first->callOperands(calls[k].second);
        for (size_t i = 1; i < operands.size(); ++i) evictFromCaches(operands[i].data, operands[i].bytes);
      };
    return timing;
  }

  void measure(const CandidateRequest& r, Built& built, json& reply) {
    if (!check(r, built, reply)) return;
    runtime::GraphExecutor& ex = *built.executor;
    int call = built.call;
    Timing t = timeIt([&] { ex.runCall(call); }, timingOf(r, {{&ex, call}}));
    reply["samples_ms"] = t.samplesMs;
    reply["median_ms"] = t.medianMs;
  }

  /// Checks the compiled candidates `ids`, then times the correct ones side by side (their
  /// repeats alternate, time_evaluator.h), so that load on the machine falls on all of them
  /// alike. reply["results"] holds one measure-style reply per id, in order.
  void measureTogether(const std::vector<int>& ids, json& reply) {
    std::vector<std::pair<CandidateRequest, Built>> taken;
    for (int id : ids) taken.push_back(take(id));
    json results = json::array();
    std::vector<std::function<void()>> runs;
    std::vector<std::pair<runtime::GraphExecutor*, int>> calls;
    std::vector<size_t> timed;
    for (size_t k = 0; k < taken.size(); ++k) {
      json one{{"id", ids[k]}};
      if (check(taken[k].first, taken[k].second, one)) {
        one["ok"] = true;
        runtime::GraphExecutor* ex = taken[k].second.executor.get();
        int call = taken[k].second.call;
        runs.push_back([ex, call] { ex->runCall(call); });
        calls.emplace_back(ex, call);
        timed.push_back(k);
      }
      results.push_back(std::move(one));
    }
    if (!runs.empty()) {
      runtime::setNumThreads(std::max(1, taken[timed[0]].first.threads));
      std::vector<Timing> timings = timeSideBySide(runs, timingOf(taken[timed[0]].first, calls));
      for (size_t j = 0; j < timed.size(); ++j) {
        results[timed[j]]["samples_ms"] = timings[j].samplesMs;
        results[timed[j]]["median_ms"] = timings[j].medianMs;
      }
    }
    reply["results"] = std::move(results);
  }

  /// The default schedule's output for the request's task (built once per task).
  const std::vector<double>& reference(const CandidateRequest& r) {
    std::string id = r.key + "|" + r.target + "|" + std::to_string(r.optLevel);
    auto it = m_reference.find(id);
    if (it != m_reference.end()) return it->second;
    Built built = buildCandidate(r, false);
    return m_reference.emplace(id, runOnce(*built.executor, built.indexBounds)).first->second;
  }

  std::map<int, std::pair<CandidateRequest, Built>> m_pending;
  std::map<std::string, std::vector<double>> m_reference;
};

}  // namespace

int serveTuneWorker(std::istream& in, std::ostream& out) {
  dieWithParent();
  WorkerState state;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json msg = json::parse(line, nullptr, false);
    json reply = msg.is_discarded() ? json{{"id", 0}, {"ok", false}, {"error", "malformed request"}} : state.handle(msg);
    out << reply.dump() << '\n';
    out.flush();
  }
  return 0;
}

// ---- the runner ---------------------------------------------------------------------------------

namespace {

using Clock = std::chrono::steady_clock;

/// The next protocol reply of `w` (lines that are not JSON are skipped), or nothing with
/// `failure` set; the process is gone after a failure.
std::optional<json> receiveReply(WorkerProcess& w, double timeoutSeconds, std::string& failure) {
  auto deadline = Clock::now() + std::chrono::duration<double>(timeoutSeconds);
  for (;;) {
    double left = std::max(0.0, std::chrono::duration<double>(deadline - Clock::now()).count());
    auto line = w.receive(left, failure);
    if (!line) {
      if (failure.rfind("timeout", 0) == 0)
        failure = "timeout (" + std::to_string(static_cast<int>(timeoutSeconds)) + " s)";
      return std::nullopt;
    }
    json reply = json::parse(*line, nullptr, false);
    if (!reply.is_discarded()) return reply;
  }
}

}  // namespace

struct TuneRunner::Impl {
  std::vector<std::string> argv;
  std::vector<WorkerProcess> workers;
  double timeout = 10;
  int started = 0;
  int nextId = 1;

  bool ensure(WorkerProcess& w, std::string& why) {
    if (w.running()) return true;
    if (!w.start(argv, why)) return false;
    ++started;
    return true;
  }

  json compileMessage(int id, const CandidateRequest& r) const {
    return json{{"op", "compile"}, {"id", id}, {"key", r.key}, {"knobs", r.knobs}, {"target", r.target},
                {"threads", r.threads}, {"opt_level", r.optLevel}, {"repeat", r.repeat},
                {"min_repeat_ms", r.minRepeatMs}, {"cold_operands", r.coldOperands}};
  }

  /// Sends one request and waits for its reply; on failure the result's error says why.
  std::optional<json> call(WorkerProcess& w, const json& msg, double timeoutSeconds, std::string& error) {
    if (!ensure(w, error)) return std::nullopt;
    if (!w.send(msg.dump())) {
      std::string how;
      receiveReply(w, 0.5, how);  // collect the exit status
      error = how.empty() ? "worker pipe closed" : how;
      return std::nullopt;
    }
    return receiveReply(w, timeoutSeconds, error);
  }
};

TuneRunner::TuneRunner(std::vector<std::string> workerArgv, int workers, double timeoutSeconds)
    : m_impl(std::make_unique<Impl>()) {
  // A worker that dies between two requests must not kill the tuner with SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  m_impl->argv = std::move(workerArgv);
  m_impl->workers.resize(static_cast<size_t>(std::max(1, workers)));
  m_impl->timeout = timeoutSeconds > 0 ? timeoutSeconds : 10;
}

TuneRunner::~TuneRunner() = default;

int TuneRunner::workersStarted() const { return m_impl->started; }

std::vector<CandidateResult> TuneRunner::run(const std::vector<CandidateRequest>& batch,
                                             const std::function<void(size_t, const CandidateResult&)>& done) {
  Impl& m = *m_impl;
  std::vector<CandidateResult> results(batch.size());
  std::vector<int> ids(batch.size());
  std::vector<int> owner(batch.size(), -1);  // worker holding the compiled candidate
  std::vector<int> generation(m.workers.size(), 0), compiledIn(batch.size(), -1);
  // Code generation takes seconds on big layers; it gets its own, longer limit.
  double compileTimeout = std::max(60.0, m.timeout);

  // Compile: each round sends one candidate to every worker, then collects the replies.
  size_t next = 0;
  while (next < batch.size()) {
    std::vector<std::pair<size_t, size_t>> round;  // (candidate, worker)
    for (size_t w = 0; w < m.workers.size() && next < batch.size(); ++w, ++next) {
      ids[next] = m.nextId++;
      std::string error;
      if (!m.ensure(m.workers[w], error)) {
        if (m.started == 0 && w + 1 == m.workers.size())
          throw Error("cannot start a tuning worker: " + error, ErrorKind::Internal);
        results[next].error = "cannot start a worker: " + error;
        continue;
      }
      if (!m.workers[w].send(m.compileMessage(ids[next], batch[next]).dump())) {
        results[next].error = "worker pipe closed";
        m.workers[w].stop();
        continue;
      }
      round.emplace_back(next, w);
    }
    for (auto [i, w] : round) {
      std::string error;
      auto reply = receiveReply(m.workers[w], compileTimeout, error);
      if (!reply) {
        results[i].error = "compile " + error;
        ++generation[w];
        continue;
      }
      results[i].compileSeconds = reply->value("compile_s", 0.0);
      results[i].schedule = reply->value("schedule", "");
      if (!reply->value("ok", false)) {
        results[i].error = "compile error: " + reply->value("error", std::string("unknown"));
        continue;
      }
      owner[i] = static_cast<int>(w);
      compiledIn[i] = generation[w];
    }
  }

  auto measureOne = [&](size_t i) {
    if (owner[i] < 0) return;
    WorkerProcess& w = m.workers[static_cast<size_t>(owner[i])];
    std::string error;
    if (compiledIn[i] != generation[static_cast<size_t>(owner[i])] || !w.running()) {
      // The worker was replaced after a failure: compile again on the new one.
      auto reply = m.call(w, m.compileMessage(ids[i], batch[i]), compileTimeout, error);
      if (!reply || !reply->value("ok", false)) {
        results[i].error = reply ? "compile error: " + reply->value("error", std::string("unknown")) : "compile " + error;
        if (!reply) ++generation[static_cast<size_t>(owner[i])];
        return;
      }
      compiledIn[i] = generation[static_cast<size_t>(owner[i])];
    }
    auto reply = m.call(w, json{{"op", "measure"}, {"id", ids[i]}}, m.timeout, error);
    if (!reply) {
      results[i].error = error;
      ++generation[static_cast<size_t>(owner[i])];
      return;
    }
    results[i].maxAbsDiff = reply->value("max_abs_diff", 0.0);
    if (!reply->value("ok", false)) {
      results[i].error = reply->value("error", std::string("unknown error"));
      return;
    }
    results[i].samplesMs = reply->value("samples_ms", std::vector<double>{});
    results[i].medianMs = reply->value("median_ms", 0.0);
  };

  // Measure one at a time; each result is final once its candidate is through.
  for (size_t i = 0; i < batch.size(); ++i) {
    measureOne(i);
    if (done) done(i, results[i]);
  }

  return results;
}

std::vector<CandidateResult> TuneRunner::runSideBySide(const std::vector<CandidateRequest>& batch) {
  Impl& m = *m_impl;
  std::vector<CandidateResult> results(batch.size());
  if (batch.empty()) return results;
  // One worker holds every candidate, so that their repeats can alternate in one process.
  WorkerProcess& w = m.workers[0];
  double compileTimeout = std::max(60.0, m.timeout);
  std::vector<int> ids;
  std::vector<size_t> compiled;
  for (size_t i = 0; i < batch.size(); ++i) {
    int id = m.nextId++;
    std::string error;
    auto reply = m.call(w, m.compileMessage(id, batch[i]), compileTimeout, error);
    if (!reply || !reply->value("ok", false)) {
      results[i].error = reply ? "compile error: " + reply->value("error", std::string("unknown")) : "compile " + error;
      if (!reply) return results;  // the worker is gone, and with it what it had compiled
      continue;
    }
    results[i].compileSeconds = reply->value("compile_s", 0.0);
    results[i].schedule = reply->value("schedule", "");
    ids.push_back(id);
    compiled.push_back(i);
  }
  if (ids.empty()) return results;
  std::string error;
  // Each candidate gets its own time limit: the measurement covers all of them.
  auto reply = m.call(w, json{{"op", "measure_together"}, {"id", 0}, {"ids", ids}},
                      m.timeout * static_cast<double>(ids.size()), error);
  if (!reply || !reply->value("ok", false)) {
    std::string why = reply ? reply->value("error", std::string("unknown error")) : error;
    for (size_t i : compiled) results[i].error = why;
    return results;
  }
  const json& each = reply->at("results");
  for (size_t j = 0; j < compiled.size() && j < each.size(); ++j) {
    CandidateResult& r = results[compiled[j]];
    r.maxAbsDiff = each[j].value("max_abs_diff", 0.0);
    if (!each[j].value("ok", false)) {
      r.error = each[j].value("error", std::string("unknown error"));
      continue;
    }
    r.samplesMs = each[j].value("samples_ms", std::vector<double>{});
    r.medianMs = each[j].value("median_ms", 0.0);
  }
  return results;
}

// ---- the tuning loop's measurer --------------------------------------------------------------

namespace {

core::tune::Measurement measurementOf(const CandidateResult& r) {
  return core::tune::Measurement{r.error, r.medianMs, r.samplesMs};
}

}  // namespace

WorkerMeasurer::WorkerMeasurer(TuneRunner& runner, std::string target, int threads, int optLevel,
                               bool coldOperands, int sideBySideRepeat)
    : m_runner(runner),
      m_target(std::move(target)),
      m_threads(threads),
      m_optLevel(optLevel),
      m_coldOperands(coldOperands),
      m_sideBySideRepeat(sideBySideRepeat) {}

std::vector<CandidateRequest> WorkerMeasurer::requests(const std::string& key, const std::vector<std::string>& knobs,
                                                       int repeat) const {
  std::vector<CandidateRequest> out;
  for (const std::string& k : knobs) {
    CandidateRequest r;
    r.key = key;
    r.knobs = k;
    r.target = m_target;
    r.threads = m_threads;
    r.optLevel = m_optLevel;
    r.coldOperands = m_coldOperands;
    if (repeat > 0) r.repeat = repeat;
    out.push_back(std::move(r));
  }
  return out;
}

void WorkerMeasurer::measure(const std::string& key, const std::vector<std::string>& knobs,
                             const std::function<void(size_t, const core::tune::Measurement&)>& done) {
  m_runner.run(requests(key, knobs, 0), [&](size_t k, const CandidateResult& r) { done(k, measurementOf(r)); });
}

std::vector<core::tune::Measurement> WorkerMeasurer::measureSideBySide(const std::string& key,
                                                                      const std::vector<std::string>& knobs) {
  std::vector<core::tune::Measurement> out;
  for (const CandidateResult& r : m_runner.runSideBySide(requests(key, knobs, m_sideBySideRepeat)))
    out.push_back(measurementOf(r));
  return out;
}

}  // namespace kiln::profiler
