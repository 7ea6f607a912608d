// The comparison's output check and its JSON: max |diff| over tensors of every dtype (a NaN
// anywhere shows as NaN, integer and bool outputs are compared exactly), and how a row that was
// not checked, failed or NaN is written.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "app/facade.h"

namespace kiln {
namespace {

using runtime::DType;
using runtime::Tensor;

Tensor floats(std::vector<float> values) {
  Tensor t = Tensor::zeros(DType::Float32, {static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

template <typename T>
Tensor ints(DType dtype, std::vector<T> values) {
  Tensor t = Tensor::zeros(dtype, {static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

TEST(MaxAbsDiff, ANanAnywhereShowsAsNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(app::maxAbsDiff({floats({nan, nan})}, {floats({nan, nan})})));  // all NaN: not 0
  EXPECT_TRUE(std::isnan(app::maxAbsDiff({floats({1, 2, 3})}, {floats({1, nan, 3})})));
  EXPECT_TRUE(std::isnan(app::maxAbsDiff({floats({1, nan, 3})}, {floats({1, 2, 3})})));
  // A NaN in a later output is not hidden by a large difference in an earlier one.
  EXPECT_TRUE(std::isnan(app::maxAbsDiff({floats({0}), floats({nan})}, {floats({100}), floats({1})})));
  EXPECT_DOUBLE_EQ(app::maxAbsDiff({floats({1, 2, 3})}, {floats({1, 2.5f, 2})}), 1.0);
}

TEST(MaxAbsDiff, IntegerAndBoolOutputsAreComparedExactly) {
  EXPECT_EQ(app::maxAbsDiff({ints<int64_t>(DType::Int64, {4, 2, 9})}, {ints<int64_t>(DType::Int64, {4, 2, 9})}), 0);
  EXPECT_EQ(app::maxAbsDiff({ints<int64_t>(DType::Int64, {4, 2, 9})}, {ints<int64_t>(DType::Int64, {4, 3, 9})}), 1);
  // Large indices differ by one: exact, not lost to float rounding.
  int64_t big = (int64_t{1} << 40) + 1;
  EXPECT_EQ(app::maxAbsDiff({ints<int64_t>(DType::Int64, {big})}, {ints<int64_t>(DType::Int64, {big - 1})}), 1);
  EXPECT_EQ(app::maxAbsDiff({ints<bool>(DType::Bool, {true, false})}, {ints<bool>(DType::Bool, {true, false})}), 0);
  EXPECT_EQ(app::maxAbsDiff({ints<bool>(DType::Bool, {true, false})}, {ints<bool>(DType::Bool, {true, true})}), 1);
  EXPECT_EQ(app::maxAbsDiff({ints<int32_t>(DType::Int32, {-7})}, {ints<int32_t>(DType::Int32, {7})}), 14);
  // Outputs that differ in count, shape or dtype cannot be compared: infinity.
  EXPECT_TRUE(std::isinf(app::maxAbsDiff({ints<int32_t>(DType::Int32, {1})}, {floats({1})})));
  EXPECT_TRUE(std::isinf(app::maxAbsDiff({floats({1})}, {floats({1, 2})})));
  EXPECT_TRUE(std::isinf(app::maxAbsDiff({floats({1})}, {})));
}

TEST(CompareJson, NanUncheckedAndFailedRowsAreWrittenAsSuch) {
  app::CompareResult r;
  app::BackendResult nanRow;
  nanRow.backend = "kiln";
  nanRow.maxAbsDiff = std::nan("");
  app::BackendResult unchecked;
  unchecked.backend = "pytorch-compiled";
  unchecked.maxAbsDiff = -1;
  app::BackendResult failed;
  failed.backend = "kiln-untuned";
  failed.available = false;
  failed.status = "timeout";
  failed.reason = "a run timed out after 30 s in fused_conv2d_0";
  r.backends = {nanRow, unchecked, failed};
  nlohmann::json j = nlohmann::json::parse(app::compareJson(r));
  EXPECT_EQ(j["backends"][0]["max_abs_diff_vs_eager"], "nan");
  EXPECT_TRUE(j["backends"][1]["max_abs_diff_vs_eager"].is_null());
  EXPECT_EQ(j["backends"][2]["status"], "timeout");
  EXPECT_EQ(j["backends"][2]["reason"], failed.reason);
  EXPECT_TRUE(j["backends"][2]["median_ms"].is_null());
}

}  // namespace
}  // namespace kiln
