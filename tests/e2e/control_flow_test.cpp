// Control flow (issue 18): scripted models whose prim::If conditions and prim::Loop trip counts
// are computed from tensors, saved by today's torch in Kiln's Python environment, imported as
// `if` / `loop` nodes with sub-graphs, compiled at -O0, -O2 and -O3 and run on inputs that take
// each branch, against libtorch running the same file on the same inputs. A loop with a constant
// trip count is unrolled at import instead. Skips with a message only when that environment is
// missing (CI has it). Paths known at compile time (tests/filecheck/inline_control_flow.kir) are
// inlined by inline-control-flow from -O1 on and must compute what -O0's loops compute.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "app/facade.h"
#include "app/measure.h"
#include "app/model_text.h"
#include "runtime/module.h"
#include "profiler/store.h"
#include "profiler/torch_baseline.h"
#include "runtime/tensor_values.h"
#include "tests/e2e/expect_matches.h"
#include "tests/e2e/process.h"

using namespace kiln;

namespace {

const char* kScript = R"(import json, sys
import torch
import torch.nn as nn

torch.manual_seed(0)


class Branch(nn.Module):  # if on a reduction of the input; the branches use different weights
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x):
        if x.sum() > 0:
            y = torch.relu(self.a(x))
        else:
            y = torch.sigmoid(self.b(x)) * 2.0
        return y + 1.0


class While(nn.Module):  # while with a computed condition and an int counter carried along
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(8, 8)

    def forward(self, x):
        i = 0
        while bool(x.abs().sum() > 1.0) and i < 20:
            x = torch.tanh(self.l(x)) * 0.5
            i += 1
        return x


class ForComputed(nn.Module):  # for over a trip count read from the input, nested if inside
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(8, 8)

    def forward(self, x):
        n = int(x[0, 0].abs() * 4) + 1
        h = x
        for k in range(n):
            h = torch.tanh(self.l(h)) + x
            if h.mean() > 0.5:
                h = h * 0.5
        return h


class ForStatic(nn.Module):  # a constant trip count: unrolled at import, as tracing would
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(8, 8)

    def forward(self, x):
        for k in range(3):
            x = torch.relu(self.l(x)) + k
        return x


out = sys.argv[1]
cases = {"branch": Branch(), "while": While(), "for_computed": ForComputed(), "for_static": ForStatic()}
for name, module in cases.items():
    scripted = torch.jit.script(module.eval())
    spec = {"inputs": [{"name": "x", "shape": [4, 8], "dtype": "float32"}], "source": "control_flow_test"}
    torch.jit.save(scripted, f"{out}/{name}.pt", _extra_files={"kiln.json": json.dumps(spec)})
print(" ".join(cases))
)";

/// How many nodes of `op` the graph holds, sub-graphs included.
int countOps(const core::Graph& graph, const std::string& op) {
  int n = 0;
  for (const core::Node& node : graph.nodes()) {
    n += node.op == op;
    for (const core::Region& r : node.regions) n += countOps(*r, op);
  }
  return n;
}

/// `base` scaled by `scale` (a copy).
runtime::Tensor scaled(const runtime::Tensor& base, float scale) {
  runtime::Tensor t = base.clone();
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] *= scale;
  return t;
}

class ControlFlow : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(KILN_PYENV_PYTHON))
      GTEST_SKIP() << "Kiln's Python environment (" << KILN_PYENV_PYTHON << ") is missing: run scripts/install-deps.sh";
    m_dir = ::testing::TempDir() + "kiln_control_flow";
    std::filesystem::create_directories(m_dir);
    std::ofstream(m_dir + "/script.py") << kScript;
    testing_support::Outcome o =
        testing_support::runProcess(std::string(KILN_PYENV_PYTHON) + " " + m_dir + "/script.py " + m_dir, m_dir + "/err.txt");
    ASSERT_EQ(o.exitCode, 0) << o.err;
  }

  /// Imports `name`, checks its graph with `expectGraph`, and compares every opt level's outputs
  /// with libtorch's on each input.
  void check(const std::string& name, const std::vector<std::vector<runtime::Tensor>>& inputSets,
             const std::function<void(const core::Graph&)>& expectGraph) {
    SCOPED_TRACE(name);
    std::string path = m_dir + "/" + name + ".pt";
    auto model = app::openModel(path);
    ASSERT_TRUE(model) << model.error().message;
    expectGraph(model.value()->graph);
    profiler::TorchModel torchModel(path, profiler::TorchMode::Eager, 1);
    for (int opt : {0, 2, 3}) {
      app::BuildOptions options;
      options.optLevel = opt;
      options.threads = 2;
      options.verifyPasses = true;
      auto compiled = app::build(model.value(), options);
      ASSERT_TRUE(compiled) << "-O" << opt << ": " << compiled.error().message;
      for (size_t s = 0; s < inputSets.size(); ++s) {
        std::vector<runtime::Tensor> expected = torchModel.run(inputSets[s]);
        auto outputs = app::run(*compiled.value(), inputSets[s]);
        ASSERT_TRUE(outputs) << "-O" << opt << ": " << outputs.error().message;
        EXPECT_EQ(testing_support::firstDifference(outputs.value(), expected, 1e-4), "") << "-O" << opt << ", input set " << s;
      }
    }
  }

  /// x, −x and x/8 for a random x of the model's input shape: both signs of a sum, long and short
  /// loops.
  std::vector<std::vector<runtime::Tensor>> inputSets(const std::string& name) {
    auto model = app::openModel(m_dir + "/" + name + ".pt");
    if (!model) return {};
    runtime::Tensor x = app::randomInputs(*model.value(), 7)[0];
    return {{x}, {scaled(x, -1.0f)}, {scaled(x, 0.125f)}, {scaled(x, 3.0f)}};
  }

  std::string m_dir;
};

TEST_F(ControlFlow, IfOnAComputedConditionRunsEitherBranch) {
  check("branch", inputSets("branch"), [](const core::Graph& g) { EXPECT_EQ(countOps(g, "if"), 1); });
}

TEST_F(ControlFlow, WhileLoopWithComputedConditionAndCounter) {
  check("while", inputSets("while"), [](const core::Graph& g) {
    EXPECT_EQ(countOps(g, "loop"), 1);
    EXPECT_EQ(countOps(g, "if"), 1);  // the `and`, inside the body
  });
}

TEST_F(ControlFlow, ForLoopOverAComputedTripCountWithABranchInside) {
  check("for_computed", inputSets("for_computed"), [](const core::Graph& g) {
    EXPECT_EQ(countOps(g, "loop"), 1);
    EXPECT_EQ(countOps(g, "if"), 1);
  });
}

TEST_F(ControlFlow, ForLoopWithAConstantTripCountIsUnrolled) {
  check("for_static", inputSets("for_static"), [](const core::Graph& g) {
    EXPECT_EQ(countOps(g, "loop"), 0);
    EXPECT_EQ(countOps(g, "dense"), 3);
  });
}

class ControlFlowProfile : public ControlFlow, public ::testing::WithParamInterface<bool> {};

// In this process, and in an isolated measuring worker (`kiln profile`'s way, under the kernel
// watch).
TEST_P(ControlFlowProfile, SplitsALoopsTimeAmongTheCallsInsideIt) {
  app::ProfileOptions o;
  o.repeat = 5;
  o.minRepeatMs = 1;
  o.build.threads = 2;
  o.store.dbPath = m_dir + "/kiln.db";
  o.isolate.enabled = GetParam();
  o.isolate.workerCommand = KILN_BINARY;
  auto r = app::profile(m_dir + "/for_computed.pt", o);
  ASSERT_TRUE(r) << r.error().message;
  const profiler::ProfileRecord& p = r.value().profile;
  const profiler::OpRecord* loop = nullptr;
  for (const auto& op : p.ops)
    if (op.parent < 0 && op.ops == std::vector<std::string>{"loop"}) loop = &op;
  ASSERT_NE(loop, nullptr) << "no top-level loop row";
  int inside = 0, denseRuns = 0;
  double insideUs = 0, topUs = 0;
  for (const auto& op : p.ops) {
    if (op.parent < 0) {
      topUs += op.timeUs;
      continue;
    }
    EXPECT_EQ(op.parent, loop->index) << op.name;
    EXPECT_NE(op.name.find(".body | "), std::string::npos) << op.name;  // says where it runs
    ++inside;
    if (std::find(op.ops.begin(), op.ops.end(), "dense") != op.ops.end()) {
      denseRuns = op.calls;
      EXPECT_GT(op.flops, 0) << op.name;
      EXPECT_GT(op.timeUs, 0) << op.name;
    }
    if (op.name.find(".then | ") == std::string::npos && op.name.find(".else | ") == std::string::npos)
      insideUs += op.timeUs;  // the body's own calls (the branch's are inside its if call)
  }
  EXPECT_GE(inside, 4) << "the body's dense, its if, and the if's branches";
  EXPECT_GE(denseRuns, 1) << "the body's dense runs once per iteration";
  // The calls inside take (nearly) all of the loop's time, and are not counted twice in the sum.
  EXPECT_LE(insideUs, loop->timeUs * 1.05 + 5);
  EXPECT_NEAR(p.sumMs * 1000, topUs, 1e-6 * topUs + 1e-9);
  // Stored and read back with the rows' parents.
  profiler::Store store(o.store.dbPath);
  auto stored = store.latestProfile(r.value().stored.buildId);
  ASSERT_TRUE(stored.has_value());
  ASSERT_EQ(stored->profile.ops.size(), p.ops.size());
  for (size_t i = 0; i < p.ops.size(); ++i) EXPECT_EQ(stored->profile.ops[i].parent, p.ops[i].parent) << i;
}

INSTANTIATE_TEST_SUITE_P(InProcessAndIsolated, ControlFlowProfile, ::testing::Bool());

// An exported module holds the sub-plans (module format 2) and the runtime alone runs them: the
// for over a computed count with an if inside, on inputs that take different trip counts and
// branches, against libtorch.
TEST_F(ControlFlow, ExportedModuleRunsTheLoopsInTheRuntime) {
  const std::string path = m_dir + "/for_computed.pt";
  auto model = app::openModel(path);
  ASSERT_TRUE(model) << model.error().message;
  const std::string dir = m_dir + "/for_computed_module";
  std::filesystem::remove_all(dir);
  auto exported = app::exportModel(model.value(), app::BuildOptions{}, dir);
  ASSERT_TRUE(exported) << exported.error().message;
  auto module = app::loadModule(dir, 2);
  ASSERT_TRUE(module) << module.error().message;
  EXPECT_EQ(module.value()->info().formatVersion, 2);
  profiler::TorchModel torchModel(path, profiler::TorchMode::Eager, 1);
  for (const std::vector<runtime::Tensor>& inputs : inputSets("for_computed")) {
    auto outputs = app::runModule(*module.value(), inputs);
    ASSERT_TRUE(outputs) << outputs.error().message;
    EXPECT_EQ(testing_support::firstDifference(outputs.value(), torchModel.run(inputs), 1e-4), "");
  }
}

TEST_F(ControlFlow, WasmExportRefusesControlFlowInOneLine) {
  auto model = app::openModel(m_dir + "/while.pt");
  ASSERT_TRUE(model) << model.error().message;
  std::string dir = m_dir + "/while_wasm";
  std::filesystem::remove_all(dir);
  app::BuildOptions options;
  options.target = "llvm -mtriple=wasm32-unknown-unknown -mattr=+simd128";
  auto exported = app::exportModel(model.value(), options, dir);
  ASSERT_FALSE(exported);
  EXPECT_EQ(exported.error().kind, ErrorKind::Unsupported);
  EXPECT_NE(exported.error().message.find("control flow"), std::string::npos) << exported.error().message;
  EXPECT_NE(exported.error().message.find("WebAssembly"), std::string::npos) << exported.error().message;
  EXPECT_EQ(exported.error().message.find('\n'), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir)) << "nothing is written";
}

TEST(ControlFlowPaths, KnownPathsAreInlinedAndComputeWhatTheLoopsCompute) {
  auto model = app::openGraphText(std::string(KILN_SOURCE_DIR) + "/tests/filecheck/inline_control_flow.kir");
  ASSERT_TRUE(model) << model.error().message;
  std::vector<runtime::Tensor> inputs = {runtime::Tensor::zeros(runtime::DType::Float32, {4, 8})};
  for (int64_t i = 0; i < 32; ++i) inputs[0].data<float>()[i] = 0.1f * static_cast<float>(i % 11) - 0.4f;
  auto outputsAt = [&](int level) {
    app::BuildOptions options;
    options.optLevel = level;
    options.threads = 1;
    auto built = app::build(model.value(), options);
    EXPECT_TRUE(built) << built.error().message;
    auto out = app::run(*built.value(), inputs);
    EXPECT_TRUE(out) << out.error().message;
    return std::vector<float>(out.value()[0].data<float>(), out.value()[0].data<float>() + 32);
  };
  std::vector<float> loops = outputsAt(0);  // the executor runs every if and loop
  for (int level : {1, 3}) {
    std::vector<float> inlined = outputsAt(level);
    for (size_t i = 0; i < loops.size(); ++i)
      EXPECT_NEAR(inlined[i], loops[i], 1e-5 * (1 + std::fabs(loops[i]))) << "-O" << level << " element " << i;
  }
}

}  // namespace
