// Builds a model file through the façade as a user would (open, build at an opt level, run) and
// checks its outputs against reference tensors (today's torch's, saved as .npy at build time):
// every output within `tolerance` of its scale, and no output numerically dead. Shared by the
// end-to-end tests of the importers (TorchScript, ONNX, torch.export, recurrent layers, control
// flow).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "app/facade.h"
#include "runtime/tensor_values.h"

namespace kiln::testing_support {

/// "" when every output matches within tol·(1 + |expected|), else the first difference.
inline std::string firstDifference(const std::vector<runtime::Tensor>& actual,
                                   const std::vector<runtime::Tensor>& expected, double tol) {
  if (actual.size() != expected.size())
    return std::to_string(actual.size()) + " outputs, expected " + std::to_string(expected.size());
  for (size_t o = 0; o < actual.size(); ++o) {
    if (actual[o].shape() != expected[o].shape())
      return "output " + std::to_string(o) + " has shape " + runtime::shapeString(actual[o].shape()) + ", expected " +
             runtime::shapeString(expected[o].shape());
    for (int64_t i = 0; i < actual[o].numel(); ++i) {
      double a = runtime::elementAsDouble(actual[o], i), e = runtime::elementAsDouble(expected[o], i);
      if (std::fabs(a - e) <= tol * (1 + std::fabs(e))) continue;
      std::ostringstream s;
      s << "output " << o << " element " << i << ": " << a << ", expected " << e;
      return s.str();
    }
  }
  return "";
}

inline void expectBuildMatches(const std::string& path, const app::OpenOptions& open,
                               const std::vector<runtime::Tensor>& inputs,
                               const std::vector<runtime::Tensor>& expected, int optLevel = 3,
                               double tolerance = 1e-4) {
  SCOPED_TRACE(path + " -O" + std::to_string(optLevel));
  auto model = app::openModel(path, open);
  ASSERT_TRUE(model.ok()) << model.error().message;
  app::BuildOptions options;
  options.optLevel = optLevel;
  options.threads = 2;
  auto compiled = app::build(model.value(), options);
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  auto outputs = app::run(*compiled.value(), inputs);
  ASSERT_TRUE(outputs.ok()) << outputs.error().message;
  ASSERT_EQ(outputs.value().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const runtime::Tensor& got = outputs.value()[i];
    ASSERT_EQ(got.shape(), expected[i].shape()) << "output " << i;
    double scale = 0;
    for (int64_t k = 0; k < expected[i].numel(); ++k)
      scale = std::max(scale, std::fabs(runtime::elementAsDouble(expected[i], k)));
    EXPECT_GT(scale, 1e-3) << "output " << i << " is numerically dead";
    // NaN anywhere is NaN (app::maxAbsDiff), which no bound accepts.
    EXPECT_LE(app::maxAbsDiff({got}, {expected[i]}), tolerance * std::max(1.0, scale)) << "output " << i;
  }
}

}  // namespace kiln::testing_support
