// The learned cost model of the model-guided tuner: gradient-boosted trees (XGBoost, through its
// C API) with a pairwise ranking objective. The tuner only needs to know which candidates are
// faster than which, not how fast each is, and a ranking loss learns exactly that from a few
// dozen measurements (TVM's AutoTVM made the same choice). Labels are relative throughputs
// within a task (best cost / cost, 0 for a failed candidate); predictions are scores whose order
// is meaningful and whose scale is not.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::core::tune {

class CostModel {
 public:
  explicit CostModel(uint64_t seed = 1, int rounds = 60);
  ~CostModel();
  CostModel(const CostModel&) = delete;
  CostModel& operator=(const CostModel&) = delete;

  /// Trains from scratch on `features` (rows of equal length) and `labels` (higher is better);
  /// rows of one ranking group (one task) are contiguous and `groups` lists their sizes.
  /// Throws kiln::Error (Internal) when XGBoost reports an error.
  void fit(const std::vector<std::vector<float>>& features, const std::vector<float>& labels,
           const std::vector<unsigned>& groups);
  bool trained() const { return m_booster != nullptr; }
  /// Scores (higher: predicted faster); all zeros before fit().
  std::vector<float> predict(const std::vector<std::vector<float>>& features) const;

 private:
  void* m_booster = nullptr;  // BoosterHandle
  uint64_t m_seed;
  int m_rounds;
};

}  // namespace kiln::core::tune
