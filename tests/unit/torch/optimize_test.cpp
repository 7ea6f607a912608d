// kiln::torch::optimize against libtorch: modules with an unsupported operator run with the rest
// compiled, plans are cached per input signature, sample networks run fully compiled, and bad
// usage raises kiln::Error. Modules are scripted here from TorchScript source (no Python).
#include "app/torch/optimize.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/import.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "runtime/error.h"

namespace {

using kiln::torch::OptimizedModule;
using kiln::torch::ShapeEntryReport;

at::Tensor randn(at::IntArrayRef shape, uint64_t seed) {
  at::manual_seed(seed);
  return at::randn(shape);
}

/// conv → relu → grid_sampler (not compiled by Kiln) → conv → relu → +1 → pool → flatten.
torch::jit::Module middleModule() {
  torch::jit::Module m("Middle");
  m.register_buffer("w1", randn({8, 4, 3, 3}, 1) * 0.3);
  m.register_buffer("b1", randn({8}, 2) * 0.1);
  m.register_buffer("w2", randn({6, 8, 3, 3}, 3) * 0.2);
  m.register_buffer("b2", randn({6}, 4) * 0.1);
  // A mild affine warp of an 8x8 output grid.
  at::Tensor theta = at::tensor({0.9, 0.1, 0.0, -0.1, 0.9, 0.05}, at::kFloat).view({1, 2, 3});
  m.register_buffer("grid", at::affine_grid_generator(theta, {1, 8, 8, 8}, false));
  m.define(R"(
def forward(self, x):
    y = torch.relu(torch.conv2d(x, self.w1, self.b1, [1, 1], [1, 1], [1, 1], 1))
    y = torch.grid_sampler(y, self.grid, 0, 0, False)
    y = torch.relu(torch.conv2d(y, self.w2, self.b2, [1, 1], [1, 1], [1, 1], 1)) + 1.0
    return torch.flatten(torch.adaptive_avg_pool2d(y, [1, 1]), 1)
)");
  m.eval();
  return m;
}

/// The unsupported operator on a side branch: the main path stays one compiled subgraph.
torch::jit::Module sideBranchModule() {
  torch::jit::Module m("Side");
  m.register_buffer("w1", randn({8, 4, 3, 3}, 5) * 0.3);
  m.register_buffer("w2", randn({8, 8, 3, 3}, 6) * 0.2);
  at::Tensor theta = at::tensor({1.0, 0.0, 0.1, 0.0, 1.0, -0.1}, at::kFloat).view({1, 2, 3});
  m.register_buffer("grid", at::affine_grid_generator(theta, {1, 8, 8, 8}, false));
  m.define(R"(
def forward(self, x):
    a = torch.conv2d(x, self.w1, None, [1, 1], [1, 1], [1, 1], 1)
    b = torch.grid_sampler(a, self.grid, 0, 0, False)
    c = torch.conv2d(torch.relu(a), self.w2, None, [1, 1], [1, 1], [1, 1], 1)
    d = torch.sigmoid(c) * 2.0
    return d + torch.tanh(b)
)");
  m.eval();
  return m;
}

double maxAbsDiff(const at::Tensor& a, const at::Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  if (a.sizes() != b.sizes()) return 1e30;
  return (a - b).abs().max().item<double>();
}

at::Tensor reference(torch::jit::Module& m, const at::Tensor& x) {
  at::NoGradGuard noGrad;
  return m.forward({x}).toTensor();
}

kiln::torch::OptimizeOptions opts() {
  kiln::torch::OptimizeOptions o;
  o.threads = 2;
  return o;
}

int countSubgraphs(const ShapeEntryReport& e, bool compiled) {
  return static_cast<int>(std::count_if(e.subgraphs.begin(), e.subgraphs.end(),
                                        [&](const auto& s) { return s.compiled == compiled; }));
}

TEST(TorchOptimize, UnsupportedOpInTheMiddleRunsWithTheRestCompiled) {
  torch::jit::Module m = middleModule();
  OptimizedModule fast = kiln::torch::optimize(m, opts());
  at::Tensor x = randn({1, 4, 8, 8}, 7);
  at::Tensor want = reference(m, x);
  at::Tensor got = fast.forward({x}).toTensor();
  EXPECT_LT(maxAbsDiff(got, want), 1e-4);
  EXPECT_GT(want.abs().max().item<double>(), 0.5);  // numerically alive

  auto report = fast.report();
  ASSERT_EQ(report.entries.size(), 1u);
  const ShapeEntryReport& e = report.entries[0];
  EXPECT_EQ(e.calls, 1);
  EXPECT_GT(e.compiledOpShare(), 0.0);
  EXPECT_LT(e.compiledOpShare(), 1.0);
  EXPECT_EQ(e.totalOps - e.compiledOps, 1);
  ASSERT_EQ(e.fallbacks.size(), 1u);
  EXPECT_EQ(e.fallbacks[0].kind, "aten::grid_sampler");
  EXPECT_NE(e.fallbacks[0].reason.find("aten::grid_sampler"), std::string::npos) << e.fallbacks[0].reason;
  // kiln (conv, relu) → libtorch (grid_sampler) → kiln (conv, relu, add, pool, flatten).
  ASSERT_EQ(e.subgraphs.size(), 3u) << report.text();
  EXPECT_TRUE(e.subgraphs[0].compiled);
  EXPECT_FALSE(e.subgraphs[1].compiled);
  EXPECT_TRUE(e.subgraphs[2].compiled);
  EXPECT_EQ(e.subgraphs[1].ops, std::vector<std::string>{"aten::grid_sampler"});
  EXPECT_GT(e.subgraphs[0].kernels, 0);
  std::string text = report.text();
  EXPECT_NE(text.find("aten::grid_sampler"), std::string::npos) << text;

  // A second call reuses the plan and gives the same result.
  at::Tensor again = fast.forward({x}).toTensor();
  EXPECT_EQ(maxAbsDiff(again, got), 0.0);
  EXPECT_EQ(fast.report().entries[0].calls, 2);
  EXPECT_EQ(fast.cacheSize(), 1u);
}

TEST(TorchOptimize, SideBranchDoesNotSplitTheMainPath) {
  torch::jit::Module m = sideBranchModule();
  OptimizedModule fast = kiln::torch::optimize(m, opts());
  at::Tensor x = randn({1, 4, 8, 8}, 8);
  EXPECT_LT(maxAbsDiff(fast.forward({x}).toTensor(), reference(m, x)), 1e-4);
  const ShapeEntryReport e = fast.report().entries.at(0);
  // conv, relu, conv, sigmoid, mul in one subgraph; grid_sampler; tanh, add in the last one.
  ASSERT_EQ(e.subgraphs.size(), 3u) << fast.report().text();
  EXPECT_EQ(countSubgraphs(e, true), 2);
  EXPECT_EQ(e.subgraphs[0].ops.size(), 5u) << fast.report().text();
  EXPECT_EQ(e.compiledOps, e.totalOps - 1);
}

TEST(TorchOptimize, NewInputShapeCompilesOnceMore) {
  torch::jit::Module m = middleModule();
  OptimizedModule fast = kiln::torch::optimize(m, opts());
  at::Tensor small = randn({1, 4, 8, 8}, 9), large = randn({1, 4, 12, 12}, 10);
  EXPECT_LT(maxAbsDiff(fast({small}).toTensor(), reference(m, small)), 1e-4);
  EXPECT_LT(maxAbsDiff(fast({large}).toTensor(), reference(m, large)), 1e-4);
  EXPECT_LT(maxAbsDiff(fast({small}).toTensor(), reference(m, small)), 1e-4);
  EXPECT_EQ(fast.cacheSize(), 2u);
  auto report = fast.report();
  ASSERT_EQ(report.entries.size(), 2u);
  EXPECT_EQ(report.entries[0].signature, "x:f32[1,4,8,8]");
  EXPECT_EQ(report.entries[0].calls, 2);
  EXPECT_EQ(report.entries[1].signature, "x:f32[1,4,12,12]");
  EXPECT_EQ(report.entries[1].calls, 1);
  for (const auto& e : report.entries) {
    EXPECT_EQ(countSubgraphs(e, true), 2) << report.text();
    EXPECT_GT(e.compileSeconds, 0.0);
  }
  // Copies share the cache.
  OptimizedModule copy = fast;
  copy({large});
  EXPECT_EQ(fast.report().entries[1].calls, 2);
}

TEST(TorchOptimize, TupleResultsAndSeveralInputs) {
  torch::jit::Module m("Pair");
  m.define(R"(
def forward(self, x, y):
    s = torch.relu(x + y)
    return s * 2.0, torch.cumsum(s, 1), x
)");
  OptimizedModule fast = kiln::torch::optimize(m, opts());
  at::Tensor x = randn({2, 5}, 11), y = randn({2, 5}, 12);
  c10::IValue got = fast.forward({x, y});
  c10::IValue want = m.forward({x, y});
  ASSERT_TRUE(got.isTuple());
  const auto& g = got.toTupleRef().elements();
  const auto& w = want.toTupleRef().elements();
  ASSERT_EQ(g.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_LT(maxAbsDiff(g[i].toTensor(), w[i].toTensor()), 1e-5) << i;
  auto e = fast.report().entries.at(0);
  EXPECT_EQ(e.signature, "x:f32[2,5], y:f32[2,5]");
  EXPECT_GT(e.compiledOps, 0) << fast.report().text();
}

TEST(TorchOptimize, ListsScalarsAndShapesCrossSegments) {
  // chunk's list feeds libtorch's cumsum, a size read from cumsum's result shapes a compiled view,
  // and a number computed from data (aten::Float) scales the result.
  torch::jit::Module m("Crossing");
  m.define(R"(
def forward(self, x):
    a, b = torch.chunk(torch.relu(x), 2, 1)
    c = torch.cumsum(a, 1)
    n = c.size(2)
    d = torch.cat([c, b], 1).view(-1, n)
    return torch.sigmoid(d) * float(x.sum())
)");
  OptimizedModule fast = kiln::torch::optimize(m, opts());
  at::Tensor x = randn({2, 6, 5}, 16);
  EXPECT_LT(maxAbsDiff(fast({x}).toTensor(), m.forward({x}).toTensor()), 1e-4) << fast.report().text();
  at::Tensor y = randn({2, 6, 5}, 17);  // another value of the data-dependent number
  EXPECT_LT(maxAbsDiff(fast({y}).toTensor(), m.forward({y}).toTensor()), 1e-4);
  auto e = fast.report().entries.at(0);
  EXPECT_GT(e.compiledOps, 0) << fast.report().text();
  EXPECT_LT(e.compiledOps, e.totalOps);
  bool cumsum = std::any_of(e.fallbacks.begin(), e.fallbacks.end(), [](const auto& f) { return f.kind == "aten::cumsum"; });
  EXPECT_TRUE(cumsum) << fast.report().text();
}

TEST(TorchOptimize, DataDependentControlFlowIsCompiled) {
  torch::jit::Module m("Branchy");
  m.define(R"(
def forward(self, x):
    y = torch.relu(x) * 2.0
    if bool(y.sum() > 10.0):
        z = y + 1.0
    else:
        z = y - 1.0
    return torch.sigmoid(z)
)");
  OptimizedModule fast = kiln::torch::optimize(m, opts());
  for (double scale : {0.01, 3.0}) {  // both branches
    at::Tensor x = randn({4, 8}, 18) * scale;
    EXPECT_LT(maxAbsDiff(fast({x}).toTensor(), m.forward({x}).toTensor()), 1e-5) << scale;
  }
  // The branch on the sum is an `if` node: one compiled subgraph, nothing left to libtorch.
  auto e = fast.report().entries.at(0);
  EXPECT_TRUE(e.fallbacks.empty()) << fast.report().text();
  EXPECT_EQ(e.compiledOps, e.totalOps) << fast.report().text();
  EXPECT_EQ(countSubgraphs(e, true), 1) << fast.report().text();
  EXPECT_EQ(countSubgraphs(e, false), 0) << fast.report().text();
}

TEST(TorchOptimize, MinSubgraphOpsLeavesSmallSubgraphsToLibtorch) {
  torch::jit::Module m = middleModule();
  kiln::torch::OptimizeOptions o = opts();
  o.minSubgraphOps = 3;  // the two ops before grid_sampler stay in libtorch
  OptimizedModule fast = kiln::torch::optimize(m, o);
  at::Tensor x = randn({1, 4, 8, 8}, 13);
  EXPECT_LT(maxAbsDiff(fast({x}).toTensor(), reference(m, x)), 1e-4);
  auto e = fast.report().entries.at(0);
  EXPECT_EQ(countSubgraphs(e, true), 1) << fast.report().text();
  EXPECT_EQ(e.totalOps - e.compiledOps, 3);
  bool named = std::any_of(e.fallbacks.begin(), e.fallbacks.end(),
                           [](const auto& f) { return f.reason.find("minSubgraphOps=3") != std::string::npos; });
  EXPECT_TRUE(named) << fast.report().text();
}

TEST(TorchOptimize, EveryOptLevelMatchesLibtorch) {
  torch::jit::Module m = sideBranchModule();
  at::Tensor x = randn({1, 4, 8, 8}, 19);
  at::Tensor want = reference(m, x);
  for (int level = 0; level <= 4; ++level) {
    kiln::torch::OptimizeOptions o = opts();
    o.optLevel = level;
    OptimizedModule fast = kiln::torch::optimize(m, o);
    EXPECT_LT(maxAbsDiff(fast({x}).toTensor(), want), level == 4 ? 1e-3 : 1e-4) << "-O" << level;
    EXPECT_EQ(fast.options().optLevel, level);
    EXPECT_EQ(countSubgraphs(fast.report().entries.at(0), true), 2) << "-O" << level;
  }
}

TEST(TorchOptimize, InputDtypeKilnDoesNotCompileRunsInLibtorch) {
  torch::jit::Module m("Half");
  m.define(R"(
def forward(self, x):
    return x * 2 + 1
)");
  OptimizedModule fast = kiln::torch::optimize(m, opts());
  at::Tensor x = at::arange(6, at::kShort).view({2, 3});
  EXPECT_TRUE(at::equal(fast({x}).toTensor(), m.forward({x}).toTensor()));
  auto e = fast.report().entries.at(0);
  EXPECT_EQ(e.compiledOps, 0);
  ASSERT_FALSE(e.fallbacks.empty());
  EXPECT_NE(e.fallbacks[0].reason.find("dtype Short"), std::string::npos) << e.fallbacks[0].reason;
}

TEST(TorchOptimize, ConcurrentCallsShareOnePlan) {
  torch::jit::Module m = middleModule();
  OptimizedModule fast = kiln::torch::optimize(m, opts());
  at::Tensor x = randn({1, 4, 8, 8}, 14);
  at::Tensor want = reference(m, x);
  std::vector<double> diffs(4, 1e30);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] { diffs[t] = (fast({x}).toTensor() - want).abs().max().item<double>(); });
  for (auto& t : threads) t.join();
  for (double d : diffs) EXPECT_LT(d, 1e-4);
  EXPECT_EQ(fast.cacheSize(), 1u);
  EXPECT_EQ(fast.report().entries.at(0).calls, 4);
}

TEST(TorchOptimize, BadUsageRaisesKilnErrors) {
  torch::jit::Module empty("Empty");
  try {
    kiln::torch::optimize(empty);
    FAIL() << "a module without forward was accepted";
  } catch (const kiln::Error& e) {
    EXPECT_EQ(e.kind(), kiln::ErrorKind::InvalidModel);
    EXPECT_NE(std::string(e.what()).find("no forward method"), std::string::npos) << e.what();
  }

  torch::jit::Module scaled("Scaled");
  scaled.define(R"(
def forward(self, x, n: int):
    return x * n
)");
  try {
    kiln::torch::optimize(scaled);
    FAIL() << "an int forward argument was accepted";
  } catch (const kiln::Error& e) {
    EXPECT_EQ(e.kind(), kiln::ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("'n'"), std::string::npos) << e.what();
  }

  kiln::torch::OptimizeOptions bad = opts();
  bad.optLevel = 9;
  EXPECT_THROW(kiln::torch::optimize(middleModule(), bad), kiln::Error);
  bad = opts();
  bad.records = "/nonexistent/records.jsonl";
  try {
    kiln::torch::optimize(middleModule(), bad);
    FAIL() << "a missing records file was accepted";
  } catch (const kiln::Error& e) {
    EXPECT_EQ(e.kind(), kiln::ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/records.jsonl"), std::string::npos) << e.what();
  }

  OptimizedModule fast = kiln::torch::optimize(middleModule(), opts());
  try {
    fast.forward({c10::IValue(3)});
    FAIL() << "an int input was accepted";
  } catch (const kiln::Error& e) {
    EXPECT_EQ(e.kind(), kiln::ErrorKind::InvalidInput);
    EXPECT_NE(std::string(e.what()).find("expected a tensor"), std::string::npos) << e.what();
  }
  try {
    fast.forward({});
    FAIL() << "a call without inputs was accepted";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("forward takes 1 argument (x), got 0"), std::string::npos) << e.what();
  }
  EXPECT_EQ(fast.cacheSize(), 0u);
}

// ---- sample networks (slow: a full build each) ------------------------------------------------

void expectFullyCompiled(const std::string& name) {
  std::string path = std::string(KILN_MODELS_DIR) + "/" + name + ".pt";
  // The sample models are exported by the build (target kiln_models): a missing one is a build
  // failure, not a reason to pass.
  ASSERT_TRUE(std::filesystem::is_regular_file(path)) << path << " is missing: the build did not export it";
  torch::jit::Module m = torch::jit::load(path);
  m.eval();
  OptimizedModule fast = kiln::torch::optimize(m, opts());
  at::Tensor x = randn({1, 3, 224, 224}, 15);
  at::Tensor want = reference(m, x);
  at::Tensor got = fast({x}).toTensor();
  EXPECT_GT(want.std().item<double>(), 0.1);  // numerically alive logits
  EXPECT_LT(maxAbsDiff(got, want), 2e-3);
  auto e = fast.report().entries.at(0);
  EXPECT_EQ(e.compiledOps, e.totalOps) << fast.report().text();
  EXPECT_GT(e.totalOps, 20);
  EXPECT_EQ(e.compiledOpShare(), 1.0);
  EXPECT_EQ(countSubgraphs(e, true), 1) << fast.report().text();
  EXPECT_TRUE(e.fallbacks.empty()) << fast.report().text();
}

TEST(TorchNetworks, resnet18) { expectFullyCompiled("resnet18"); }
TEST(TorchNetworks, mobilenet_v2) { expectFullyCompiled("mobilenet_v2"); }

}  // namespace
