#include "core/tune/tune_loop.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "core/lower/gemm_search.h"
#include "core/lower/schedule_config.h"
#include "core/tune/space.h"
#include "core/tune/tuner.h"
#include "runtime/error.h"

namespace kiln::core::tune {
namespace {

/// The configurations a confirmation round times: the `top` fastest distinct error-free trials,
/// fastest first, and the default's when it ran.
std::vector<std::string> finalists(const TuneTaskResult& tr, int top) {
  std::map<std::string, double> fastest;
  for (const TuneTrial& t : tr.trials) {
    if (!t.error.empty() || t.ms <= 0) continue;
    auto [it, fresh] = fastest.emplace(t.knobs, t.ms);
    if (!fresh) it->second = std::min(it->second, t.ms);
  }
  std::vector<std::pair<double, std::string>> ranked;
  for (const auto& [knobs, ms] : fastest) ranked.emplace_back(ms, knobs);
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::string> out;
  for (const auto& entry : ranked)
    if (static_cast<int>(out.size()) < top) out.push_back(entry.second);
  if (fastest.count(tr.defaultKnobs) && std::find(out.begin(), out.end(), tr.defaultKnobs) == out.end())
    out.push_back(tr.defaultKnobs);
  return out;
}

/// One task's search and confirmation round.
class TaskSearch {
 public:
  TaskSearch(const TuneTask& task, int budget, const TuneLoopOptions& options, Measurer& measurer,
             const std::function<void(const TuneRecord&)>& keep, std::shared_ptr<TuningHistory> history,
             uint64_t seed)
      : m_task(task),
        m_options(options),
        m_measurer(measurer),
        m_keep(keep),
        m_space(ConfigSpace::forKey(task.key, options.lower)),
        m_tuner(makeTuner(options.tuner, m_space, seed, std::move(history), options.tunerOptions)),
        m_planned(static_cast<int>(std::min<int64_t>(budget, m_space.size()))) {
    m_result.info = taskInfo(task, options.lower);
    m_result.defaultKnobs = task.defaultKnobs;
  }

  /// What earlier runs measured counts towards the budget and teaches the tuner.
  void learnFrom(const std::vector<TuneRecord>& prior) {
    for (const TuneRecord& r : prior) {
      if (r.key != m_task.key) continue;
      if (r.tuner == kConfirmTuner) {
        m_latestRound = std::max(m_latestRound, r.timestamp);
        continue;
      }
      m_latestSearch = std::max(m_latestSearch, r.timestamp);
      auto index = m_space.indexOf(r.knobs);
      if (!index || m_tuner->visited(*index)) continue;
      m_tuner->update({*index}, {r.ok() ? r.costMs : -1.0});
      addTrial(lower::knobsText(r.knobs), r.ok() ? r.costMs : 0, r.error, true);
    }
  }

  int planned() const { return m_planned; }
  int trials() const { return m_result.measured + m_result.skipped; }
  bool done() const { return trials() >= m_planned || m_tuner->exhausted(); }
  const TuneTaskResult& result() const { return m_result; }
  TuneTaskResult take() { return std::move(m_result); }
  double defaultGflops() const { return m_defaultMs > 0 ? m_task.flops / (m_defaultMs * 1e6) : 0; }

  /// Proposes and measures one batch (the heuristic's configuration first, the baseline every
  /// candidate is compared to, with the space's seeds for its packing); `measured` runs after
  /// each candidate. False when the tuner had nothing left to propose.
  bool measureBatch(const std::function<void()>& measured) {
    std::vector<int64_t> batch;
    if (!m_triedDefault) {
      m_triedDefault = true;
      lower::Knobs heuristic = lower::parseKnobs(m_task.defaultKnobs);
      if (auto index = m_space.indexOf(heuristic); index && !m_tuner->visited(*index))
        batch.push_back(*index);
      // Then the space's seeds for the same packing (another schedule system's default).
      for (int64_t seed : m_space.seeds()) {
        bool agrees = true;
        for (const auto& [name, value] : m_space.config(seed)) {
          auto it = heuristic.find(name);
          agrees = agrees && (it == heuristic.end() || it->second == value);
        }
        if (agrees && !m_tuner->visited(seed) && trials() + static_cast<int64_t>(batch.size()) < m_planned &&
            std::find(batch.begin(), batch.end(), seed) == batch.end())
          batch.push_back(seed);
      }
    }
    if (batch.empty()) batch = m_tuner->propose(std::min(m_options.batchSize, m_planned - trials()));
    if (batch.empty()) return false;
    std::vector<std::string> knobs;
    for (int64_t index : batch) knobs.push_back(lower::knobsText(m_space.config(index)));
    std::vector<double> costs(batch.size(), -1.0);
    m_measurer.measure(m_task.key, knobs, [&](size_t k, const Measurement& m) {
      TuneRecord rec = record(m_space.config(batch[k]), m, m_options.tuner, m_options.now());
      m_keep(rec);
      costs[k] = m.ok() ? m.medianMs : -1.0;
      bool improved = addTrial(knobs[k], rec.costMs, m.error, false);
      m_sinceBest = improved ? 0 : m_sinceBest + 1;
      measured();
    });
    m_tuner->update(batch, costs);
    return true;
  }

  bool stalled() const { return m_options.earlyStopping > 0 && m_sinceBest >= m_options.earlyStopping; }

  void finishSearch() {
    m_tuner->finish();
    m_result.defaultMs = m_defaultMs;
  }

  /// A round is due when the search has records newer than the latest round.
  std::vector<std::string> roundFinalists() const {
    if (m_options.confirmTop <= 0 || (m_result.measured == 0 && m_latestSearch <= m_latestRound)) return {};
    std::vector<std::string> names = finalists(m_result, m_options.confirmTop);
    return names.size() >= 2 ? names : std::vector<std::string>{};
  }

  /// Times the finalists side by side; the round's records share one timestamp (builds take the
  /// latest round of a key, records.h).
  void confirm(const std::vector<std::string>& names) {
    std::vector<Measurement> confirmed = m_measurer.measureSideBySide(m_task.key, names);
    std::string round = m_options.now();
    std::vector<TuneRecord> kept;
    std::vector<std::string> keptNames;
    kept.reserve(names.size());
    for (size_t k = 0; k < names.size() && k < confirmed.size(); ++k) {
      const Measurement& m = confirmed[k];
      if (!m.ok()) continue;
      TuneRecord& rec = kept.emplace_back(record(lower::parseKnobs(names[k]), m, kConfirmTuner, round));
      rec.isDefault = names[k] == m_result.defaultKnobs;
      m_keep(rec);
      ++m_result.confirmed;
      if (rec.isDefault) m_result.defaultMs = m.medianMs;
      keptNames.push_back(names[k]);
    }
    // As builds choose (records.h roundChoice).
    std::vector<const TuneRecord*> choices;
    for (const TuneRecord& r : kept) choices.push_back(&r);
    if (const TuneRecord* chosen = roundChoice(choices)) {
      m_result.bestKnobs = keptNames[chosen - kept.data()];
      m_result.bestMs = chosen->costMs;
      m_result.bestGflops = m_task.flops / (chosen->costMs * 1e6);
    }
  }

 private:
  TuneRecord record(lower::Knobs knobs, const Measurement& m, const std::string& tuner, std::string stamp) const {
    TuneRecord rec;
    rec.key = m_task.key;
    rec.target = m_options.target;
    rec.trace = traceOf(knobs);
    rec.knobs = std::move(knobs);
    rec.costMs = m.ok() ? m.medianMs : 0;
    rec.costsMs = m.samplesMs;
    rec.error = m.error;
    rec.tuner = tuner;
    rec.timestamp = std::move(stamp);
    rec.version = m_options.version;
    return rec;
  }

  /// The schedule trace of a configuration (gemm_search.h sketchTrace), "" for one without (a
  /// record of a retired builder's knobs); one per configuration, computed once.
  std::string traceOf(const lower::Knobs& knobs) const {
    std::string text = lower::knobsText(knobs);
    auto it = m_traces.find(text);
    if (it != m_traces.end()) return it->second;
    std::string trace;
    try {
      trace = lower::sketchTrace(m_task.key, knobs, m_options.lower.vectorLanes, m_options.lower.vectorRegisters).str();
    } catch (const Error&) {
      // The candidate's measurement reports what went wrong; the record has no trace.
    }
    return m_traces[text] = trace;
  }

  /// Adds a trial to the summary; true when it is the best so far.
  bool addTrial(const std::string& knobs, double ms, const std::string& error, bool fromRecords) {
    bool ok = error.empty() && ms > 0;
    m_result.trials.push_back({static_cast<int>(m_result.trials.size()) + 1, knobs, ms,
                               ok ? m_task.flops / (ms * 1e6) : 0, error, fromRecords});
    if (fromRecords) {
      ++m_result.skipped;
    } else {
      ++m_result.measured;
      if (!error.empty()) ++m_result.errors;
    }
    if (ok && knobs == m_task.defaultKnobs) m_defaultMs = ms;
    if (!ok || (m_result.bestMs != 0 && ms >= m_result.bestMs)) return false;
    m_result.bestMs = ms;
    m_result.bestKnobs = knobs;
    m_result.bestGflops = m_task.flops / (ms * 1e6);
    return true;
  }

  const TuneTask& m_task;
  const TuneLoopOptions& m_options;
  Measurer& m_measurer;
  const std::function<void(const TuneRecord&)>& m_keep;
  ConfigSpace m_space;
  std::unique_ptr<Tuner> m_tuner;
  int m_planned = 0;
  TuneTaskResult m_result;
  double m_defaultMs = 0;
  int m_sinceBest = 0;
  bool m_triedDefault = false;
  std::string m_latestSearch, m_latestRound;
  mutable std::map<std::string, std::string> m_traces;  // knobs text -> trace
};

}  // namespace

TuneTaskInfo taskInfo(const TuneTask& task, const lower::LowerOptions& lower) {
  TuneTaskInfo info;
  info.name = task.name;
  info.workloadKey = task.key;
  info.op = task.kind;
  info.weight = task.weight;
  info.flops = task.flops;
  info.spaceSize = ConfigSpace::forKey(task.key, lower).size();
  return info;
}

int takeLatestRound(TuneTaskResult& tr, const TuneTask& task, const std::vector<TuneRecord>& records) {
  std::string latest;
  for (const TuneRecord& r : records)
    if (r.key == task.key && r.tuner == kConfirmTuner) latest = std::max(latest, r.timestamp);
  if (latest.empty()) return 0;
  std::vector<const TuneRecord*> round;
  for (const TuneRecord& r : records) {
    if (r.key != task.key || r.tuner != kConfirmTuner || r.timestamp != latest || !r.ok()) continue;
    round.push_back(&r);
    if (lower::knobsText(r.knobs) == task.defaultKnobs) tr.defaultMs = r.costMs;
  }
  // As builds choose (records.h roundChoice).
  if (const TuneRecord* chosen = roundChoice(round)) {
    tr.bestKnobs = lower::knobsText(chosen->knobs);
    tr.bestMs = chosen->costMs;
    tr.bestGflops = task.flops / (chosen->costMs * 1e6);
  }
  return static_cast<int>(round.size());
}

TuneLoopResult runTuneLoop(const std::vector<TuneTask>& tasks, const std::vector<int>& budgets,
                           const std::vector<TuneRecord>& prior, Measurer& measurer, const TuneLoopOptions& options,
                           const std::function<void(const TuneRecord&)>& keep,
                           const std::function<bool(const TuneLoopProgress&)>& progress) {
  KILN_ASSERT(budgets.size() == tasks.size(), "one budget per tuning task");
  KILN_ASSERT(static_cast<bool>(options.now), "the tuning loop needs a clock for its records");
  TuneLoopResult result;
  int totalBudget = 0, totalTrials = 0;
  for (int b : budgets) totalBudget += b;
  bool stop = false;
  // What earlier tasks measured guides the model-guided tuner on later ones (tuner.h).
  auto history = std::make_shared<TuningHistory>();
  for (size_t ti = 0; ti < tasks.size() && !stop; ++ti) {
    const TuneTask& task = tasks[ti];
    TaskSearch search(task, budgets[ti], options, measurer, keep, history, options.seed + ti);
    search.learnFrom(prior);
    auto report = [&](const std::string& message) {
      if (!progress) return true;
      const TuneTaskResult& tr = search.result();
      TuneLoopProgress p;
      p.taskIndex = static_cast<int>(ti);
      p.numTasks = static_cast<int>(tasks.size());
      p.taskName = task.name;
      p.taskTrials = search.trials();
      p.taskBudget = search.planned();
      p.totalTrials = totalTrials;
      p.totalBudget = totalBudget;
      p.errors = result.totalErrors + tr.errors;
      p.bestGflops = tr.bestGflops;
      p.defaultGflops = search.defaultGflops();
      p.message = message;
      return progress(p);
    };
    auto trialsText = [&] {
      return task.name + ": " + std::to_string(search.trials()) + "/" + std::to_string(search.planned()) + " trials";
    };
    if (!report("task " + std::to_string(ti + 1) + "/" + std::to_string(tasks.size()) + ": " + task.name)) {
      result.cancelled = true;
      break;
    }
    while (!search.done()) {
      if (options.outOfTime && options.outOfTime()) {
        stop = true;
        break;
      }
      // Each record is kept as soon as its candidate is measured: a killed run loses only the
      // candidates still in flight, and resuming skips every record kept.
      bool proposed = search.measureBatch([&] {
        ++totalTrials;
        report(trialsText());
      });
      if (!proposed) break;
      if (!report(trialsText())) {
        result.cancelled = stop = true;
        break;
      }
      if (search.stalled()) break;
    }
    search.finishSearch();
    if (!stop) {
      std::vector<std::string> names = search.roundFinalists();
      if (!names.empty() && !report(task.name + ": timing the best " + std::to_string(names.size()) + " side by side"))
        result.cancelled = stop = true;
      else if (!names.empty())
        search.confirm(names);
    }
    TuneTaskResult tr = search.take();
    // No round this time: builds take an earlier run's latest round, and so does the summary.
    if (tr.confirmed == 0) takeLatestRound(tr, task, prior);
    result.totalMeasured += tr.measured;
    result.totalErrors += tr.errors;
    result.tasks.push_back(std::move(tr));
  }
  return result;
}

}  // namespace kiln::core::tune
