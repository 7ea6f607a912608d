// Grid, random and model-guided tuners; see tuner.h.
#include "core/tune/tuner.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <map>
#include <thread>

#include "core/tune/anneal.h"
#include "core/tune/cost_model.h"
#include "core/tune/evolve.h"
#include "runtime/error.h"

namespace kiln::core::tune {

void TuningHistory::add(const std::string& kind, Group group) {
  if (!group.features.empty()) m_groups[kind].push_back(std::move(group));
}

const std::vector<TuningHistory::Group>& TuningHistory::groups(const std::string& kind) const {
  static const std::vector<Group> none;
  auto it = m_groups.find(kind);
  return it == m_groups.end() ? none : it->second;
}

Tuner::Tuner(const ConfigSpace& space, uint64_t seed) : m_space(space), m_rng(seed) {}

std::vector<int64_t> Tuner::propose(int count) {
  std::vector<int64_t> out;
  for (int64_t i : next(count)) {
    if (static_cast<int>(out.size()) >= count) break;
    if (m_visited.insert(i).second) out.push_back(i);
  }
  return out;
}

void Tuner::update(const std::vector<int64_t>& configs, const std::vector<double>& costsMs) {
  for (size_t i = 0; i < configs.size() && i < costsMs.size(); ++i) {
    m_visited.insert(configs[i]);
    m_measured.emplace_back(configs[i], costsMs[i]);
  }
}

std::vector<int64_t> Tuner::randomUnvisited(int count) {
  std::vector<int64_t> pool;
  for (int64_t i = 0; i < m_space.size(); ++i)
    if (!visited(i)) pool.push_back(i);
  std::shuffle(pool.begin(), pool.end(), m_rng);
  if (static_cast<int>(pool.size()) > count) pool.resize(static_cast<size_t>(count));
  return pool;
}

namespace {

class GridTuner final : public Tuner {
 public:
  using Tuner::Tuner;

 private:
  std::vector<int64_t> next(int count) override {
    std::vector<int64_t> out;
    for (; m_cursor < m_space.size() && static_cast<int>(out.size()) < count; ++m_cursor)
      if (!visited(m_cursor)) out.push_back(m_cursor);
    return out;
  }
  int64_t m_cursor = 0;
};

class RandomTuner final : public Tuner {
 public:
  using Tuner::Tuner;

 private:
  std::vector<int64_t> next(int count) override { return randomUnvisited(count); }
};

class XgbTuner final : public Tuner {
 public:
  XgbTuner(const ConfigSpace& space, uint64_t seed, std::shared_ptr<TuningHistory> history,
           const TunerOptions& options)
      : Tuner(space, seed),
        m_model(seed),
        m_history(std::move(history)),
        m_rows(space, options.features, space.options(),
               options.threads > 0 ? options.threads
                                   : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
        m_historyKind(space.kind() + "/" + featureSetName(options.features)) {}

 private:
  static constexpr double kExploration = 0.15;  // share of each batch proposed at random
  static constexpr int kInitialBatch = 4;
  static constexpr int kChains = 48;
  static constexpr int kSteps = 80;
  static constexpr int64_t kExhaustive = 4096;  // spaces this small are ranked whole, when scoring is cheap

  void finish() override {
    if (m_history) m_history->add(m_historyKind, ownGroup());
  }

  std::vector<int64_t> next(int count) override {
    int succeeded = 0;
    for (const auto& [index, cost] : m_measured) succeeded += cost > 0;
    bool transfer = m_history && !m_history->groups(m_historyKind).empty();
    // Nothing to learn from yet: a small random batch, so the model starts guiding early.
    if (succeeded < 2 && !transfer) return randomUnvisited(std::min(count, kInitialBatch));
    train();
    std::vector<int64_t> best;
    if (!m_rows.cheap()) {
      best = evolve(count);
    } else {
      std::vector<std::vector<float>> all;
      for (int64_t i = 0; i < m_space.size(); ++i) all.push_back(m_rows.row(i));
      std::vector<float> scores = m_model.predict(all);
      best = m_space.size() <= kExhaustive ? topUnvisited(scores, count) : anneal(scores, count);
    }
    int explore = static_cast<int>(std::floor(count * kExploration + 0.5));
    if (static_cast<int>(best.size()) > count - explore) best.resize(static_cast<size_t>(std::max(0, count - explore)));
    std::set<int64_t> chosen(best.begin(), best.end());
    for (int64_t i : randomUnvisited(count * 2)) {
      if (static_cast<int>(best.size()) >= count) break;
      if (chosen.insert(i).second) best.push_back(i);
    }
    return best;
  }

  /// This task's measurements as a ranking group: labels are best cost / cost (0 if failed).
  TuningHistory::Group ownGroup() {
    double bestCost = 0;
    for (const auto& [index, cost] : m_measured)
      if (cost > 0 && (bestCost == 0 || cost < bestCost)) bestCost = cost;
    TuningHistory::Group g;
    for (const auto& [index, cost] : m_measured) {
      g.features.push_back(m_rows.row(index));
      g.labels.push_back(cost > 0 ? static_cast<float>(bestCost / cost) : 0.0f);
    }
    return g;
  }

  void train() {
    std::vector<std::vector<float>> x;
    std::vector<float> y;
    std::vector<unsigned> groups;
    auto append = [&](const TuningHistory::Group& g) {
      if (g.features.empty()) return;
      x.insert(x.end(), g.features.begin(), g.features.end());
      y.insert(y.end(), g.labels.begin(), g.labels.end());
      groups.push_back(static_cast<unsigned>(g.features.size()));
    };
    if (m_history)
      for (const auto& g : m_history->groups(m_historyKind)) append(g);
    append(ownGroup());
    m_model.fit(x, y, groups);
  }

  /// The best measured points, fastest first.
  std::vector<int64_t> bestMeasured() const {
    std::vector<std::pair<double, int64_t>> measured;
    for (const auto& [index, cost] : m_measured)
      if (cost > 0) measured.emplace_back(cost, index);
    std::sort(measured.begin(), measured.end());
    std::vector<int64_t> out;
    for (const auto& [cost, index] : measured) out.push_back(index);
    return out;
  }

  /// The `count` unvisited points of highest predicted score.
  std::vector<int64_t> topUnvisited(const std::vector<float>& scores, int count) {
    std::vector<std::pair<float, int64_t>> ranked;
    for (int64_t i = 0; i < m_space.size(); ++i)
      if (!visited(i)) ranked.emplace_back(scores[static_cast<size_t>(i)], i);
    size_t keep = std::min(ranked.size(), static_cast<size_t>(std::max(0, count)));
    std::partial_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(keep), ranked.end(),
                      [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
    std::vector<int64_t> out;
    for (size_t i = 0; i < keep; ++i) out.push_back(ranked[i].second);
    return out;
  }

  /// Parallel annealing chains over predicted scores (anneal.h), starting from the best measured
  /// points; the best unvisited points they met.
  std::vector<int64_t> anneal(const std::vector<float>& scores, int count) {
    AnnealOptions options;
    options.chains = kChains;
    options.steps = kSteps;
    return tune::anneal(
        scores, [this](int64_t i) -> const std::vector<int64_t>& { return neighbors(i); },
        [this](int64_t i) { return visited(i); }, bestMeasured(), count, m_rng, options);
  }

  /// An evolutionary search (evolve.h) bred from the best measured points, scoring only the
  /// points it meets; the best unvisited ones.
  std::vector<int64_t> evolve(int count) {
    EvolveSpace space;
    space.score = [this](const std::vector<int64_t>& points) {
      std::vector<std::vector<float>> rows;
      for (int64_t p : points) rows.push_back(m_rows.row(p));
      return m_model.predict(rows);
    };
    space.neighbors = [this](int64_t i) -> const std::vector<int64_t>& { return neighbors(i); };
    space.crossover = [this](int64_t a, int64_t b, std::mt19937_64& rng) { return m_space.crossover(a, b, rng); };
    space.random = [this](std::mt19937_64& rng) {
      return std::uniform_int_distribution<int64_t>(0, m_space.size() - 1)(rng);
    };
    space.skip = [this](int64_t i) { return visited(i); };
    return tune::evolve(space, bestMeasured(), count, m_rng);
  }

  const std::vector<int64_t>& neighbors(int64_t index) {
    auto it = m_neighbors.find(index);
    if (it == m_neighbors.end()) it = m_neighbors.emplace(index, m_space.neighbors(index)).first;
    return it->second;
  }

  CostModel m_model;
  std::shared_ptr<TuningHistory> m_history;
  CandidateFeatures m_rows;
  std::string m_historyKind;  // the history's groups this tuner learns from: its kind and feature set
  std::map<int64_t, std::vector<int64_t>> m_neighbors;
};

}  // namespace

const std::vector<std::string>& tunerNames() {
  static const std::vector<std::string> names{"xgb", "random", "grid"};
  return names;
}

std::unique_ptr<Tuner> makeTuner(const std::string& name, const ConfigSpace& space, uint64_t seed,
                                 std::shared_ptr<TuningHistory> history, const TunerOptions& options) {
  if (name == "grid") return std::make_unique<GridTuner>(space, seed);
  if (name == "random") return std::make_unique<RandomTuner>(space, seed);
  if (name == "xgb") return std::make_unique<XgbTuner>(space, seed, std::move(history), options);
  throw Error("unknown tuner '" + name + "' (expected xgb, random or grid)", ErrorKind::Usage);
}

}  // namespace kiln::core::tune
