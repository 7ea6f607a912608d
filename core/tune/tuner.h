// Search strategies over a ConfigSpace. A tuner proposes configurations it has not proposed
// before, in batches, and learns from the measured costs the caller reports back:
//
//   grid    every configuration in enumeration order;
//   random  a seeded random permutation;
//   xgb     model-guided search: the first batch at random, then an XGBoost ranking model
//           (cost_model.h) trained on everything measured so far scores configurations from
//           their features (features.h), and the batch takes the best-scored unmeasured points,
//           with a share of random ones for exploration. With the knob features (the default,
//           AutoTVM's way; cheap) a space of up to 4096 points is ranked whole and a larger one
//           is walked by simulated-annealing chains (anneal.h). With loop-nest features
//           (TunerOptions::features) scoring compiles each point, so an evolutionary search
//           (evolve.h) breeds the points it scores from the best measured ones, as Ansor's does.
//
// Costs are milliseconds; a cost <= 0 marks a failed candidate (the model learns it as the
// slowest). The caller owns budgets, early stopping and measurement.
//
// Transfer: tasks of one operator kind share what makes a schedule fast (how wide a register
// tile pays, which loop order suits a shape), and their features describe the shape as well as
// the knobs. An XGBoost tuner given a TuningHistory trains on the earlier tasks' measurements
// too (one ranking group per task), so even its first batch is guided, and adds its own task's
// measurements when it finishes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/tune/features.h"
#include "core/tune/space.h"

namespace kiln::core::tune {

/// Measurements of finished tasks, by operator kind: feature rows with relative-speed labels, in
/// one ranking group per task.
class TuningHistory {
 public:
  struct Group {
    std::vector<std::vector<float>> features;
    std::vector<float> labels;
  };
  void add(const std::string& kind, Group group);
  const std::vector<Group>& groups(const std::string& kind) const;

 private:
  std::map<std::string, std::vector<Group>> m_groups;
};

class Tuner {
 public:
  Tuner(const ConfigSpace& space, uint64_t seed);
  virtual ~Tuner() = default;

  /// Up to `count` configurations never proposed or reported before (fewer when the space runs
  /// out).
  std::vector<int64_t> propose(int count);
  /// Measured results; may also report configurations measured elsewhere (records).
  virtual void update(const std::vector<int64_t>& configs, const std::vector<double>& costsMs);
  bool exhausted() const { return static_cast<int64_t>(m_visited.size()) >= m_space.size(); }
  bool visited(int64_t index) const { return m_visited.count(index) != 0; }
  /// The task is done: a tuner with a history leaves its measurements there.
  virtual void finish() {}

 protected:
  virtual std::vector<int64_t> next(int count) = 0;
  /// `count` unvisited configurations at random.
  std::vector<int64_t> randomUnvisited(int count);

  const ConfigSpace& m_space;
  std::mt19937_64 m_rng;
  std::set<int64_t> m_visited;
  std::vector<std::pair<int64_t, double>> m_measured;  // in report order
};

/// How the xgb tuner sees and searches a space.
struct TunerOptions {
  FeatureSet features = FeatureSet::Knobs;  // features.h
  int threads = 0;                          // the runtime's threads (0: this machine's cores)
};

/// "grid", "random" or "xgb"; throws kiln::Error (Usage) for another name. `history` (xgb only;
/// may be null) is read for transfer and extended by finish().
std::unique_ptr<Tuner> makeTuner(const std::string& name, const ConfigSpace& space, uint64_t seed,
                                 std::shared_ptr<TuningHistory> history = nullptr, const TunerOptions& options = {});
const std::vector<std::string>& tunerNames();

}  // namespace kiln::core::tune
