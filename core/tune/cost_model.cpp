// XGBoost ranking cost model; see cost_model.h.
#include "core/tune/cost_model.h"

#include <limits>
#include <string>

#include <xgboost/c_api.h>

#include "runtime/error.h"

namespace kiln::core::tune {
namespace {

void check(int status, const char* what) {
  if (status != 0) throw Error(std::string("xgboost: ") + what + ": " + XGBGetLastError(), ErrorKind::Internal);
}

/// A DMatrix of dense rows, freed with its owner.
class Matrix {
 public:
  explicit Matrix(const std::vector<std::vector<float>>& rows) {
    size_t cols = rows.empty() ? 0 : rows[0].size();
    std::vector<float> flat;
    flat.reserve(rows.size() * cols);
    for (const auto& r : rows) {
      if (r.size() != cols) throw Error("cost model: feature rows differ in length", ErrorKind::Internal);
      flat.insert(flat.end(), r.begin(), r.end());
    }
    check(XGDMatrixCreateFromMat(flat.data(), rows.size(), cols, std::numeric_limits<float>::quiet_NaN(), &m_handle),
          "creating a matrix");
  }
  ~Matrix() { XGDMatrixFree(m_handle); }
  Matrix(const Matrix&) = delete;
  Matrix& operator=(const Matrix&) = delete;
  DMatrixHandle handle() const { return m_handle; }

 private:
  DMatrixHandle m_handle = nullptr;
};

}  // namespace

CostModel::CostModel(uint64_t seed, int rounds) : m_seed(seed), m_rounds(rounds) {}

CostModel::~CostModel() {
  if (m_booster) XGBoosterFree(m_booster);
}

void CostModel::fit(const std::vector<std::vector<float>>& features, const std::vector<float>& labels,
                    const std::vector<unsigned>& groups) {
  if (features.empty()) return;
  Matrix train(features);
  check(XGDMatrixSetFloatInfo(train.handle(), "label", labels.data(), labels.size()), "setting labels");
  check(XGDMatrixSetUIntInfo(train.handle(), "group", groups.data(), groups.size()), "setting groups");
  if (m_booster) XGBoosterFree(m_booster), m_booster = nullptr;
  BoosterHandle booster = nullptr;
  DMatrixHandle dm = train.handle();
  check(XGBoosterCreate(&dm, 1, &booster), "creating a booster");
  m_booster = booster;
  const std::string seed = std::to_string(m_seed);
  const std::pair<const char*, const char*> params[] = {
      {"objective", "rank:pairwise"}, {"eta", "0.2"},       {"max_depth", "6"}, {"min_child_weight", "1"},
      {"subsample", "1.0"},           {"gamma", "0.0001"},  {"nthread", "1"},   {"verbosity", "0"},
      {"seed", seed.c_str()}};
  for (const auto& [name, value] : params) check(XGBoosterSetParam(booster, name, value), name);
  for (int i = 0; i < m_rounds; ++i) check(XGBoosterUpdateOneIter(booster, i, dm), "training");
}

std::vector<float> CostModel::predict(const std::vector<std::vector<float>>& features) const {
  std::vector<float> out(features.size(), 0.0f);
  if (!m_booster || features.empty()) return out;
  Matrix m(features);
  bst_ulong length = 0;
  const float* result = nullptr;
  check(XGBoosterPredict(m_booster, m.handle(), 0, 0, 0, &length, &result), "predicting");
  for (size_t i = 0; i < out.size() && i < length; ++i) out[i] = result[i];
  return out;
}

}  // namespace kiln::core::tune
