// Tests of lowerGraph (plan, dedupe, output copies), workload keys, parameter naming and the
// printed form of a lowered function.
#include <functional>
#include <map>

#include "core/ir/op_registry.h"
#include "core/tir/printer.h"
#include "tests/unit/core/lower_test_util.h"

namespace kiln::core::lower {
namespace {

using runtime::SlotKind;

/// Runs a plan with the TIR interpreter: every call's kernel is looked up among `funcs`.
std::vector<std::vector<float>> runPlan(const LoweredModule& m, const std::vector<std::vector<float>>& inputs) {
  std::map<std::string, const tir::PrimFunc*> byName;
  for (const auto& f : m.funcs) byName[f.name] = &f;
  std::vector<std::vector<float>> slots(m.plan.slots.size());
  for (size_t s = 0; s < m.plan.slots.size(); ++s) {
    const auto& slot = m.plan.slots[s];
    switch (slot.kind) {
      case SlotKind::Input: slots[s] = inputs.at(slot.index); break;
      case SlotKind::Constant: {
        const auto& t = m.plan.constants.at(slot.index);
        slots[s].assign(t.data<float>(), t.data<float>() + t.numel());
        break;
      }
      case SlotKind::Intermediate: slots[s].assign(runtime::numElements(slot.shape), std::nanf("")); break;
    }
  }
  for (const auto& call : m.plan.calls) {
    std::vector<void*> args;
    for (int s : call.args) args.push_back(slots[s].data());
    interpret(*byName.at(call.kernel), args);
  }
  std::vector<std::vector<float>> outputs;
  for (int s : m.plan.outputs) outputs.push_back(slots[s]);
  return outputs;
}

TEST(LowerGraph, PlanDedupeAndOutputCopy) {
  Graph g = parseGraph(R"(graph(%x: f32[2,8], %y: f32[2,8]) {
    %a = relu(%x) : f32[2,8]
    %b = relu(%y) : f32[2,8] loc("m.py:4")
    %c = add(%a, %b) : f32[2,8]
    return %c, %x
  })");
  LoweredModule m = lowerGraph(g);

  ASSERT_EQ(m.funcs.size(), 3u);  // two identical relus share one kernel
  EXPECT_EQ(m.funcs[0].name, "relu_0");
  EXPECT_EQ(m.funcs[1].name, "add_0");
  EXPECT_EQ(m.funcs[2].name, "copy_0");

  const auto& plan = m.plan;
  ASSERT_EQ(plan.slots.size(), 6u);
  std::vector<SlotKind> kinds;
  for (const auto& s : plan.slots) kinds.push_back(s.kind);
  EXPECT_EQ(kinds, (std::vector<SlotKind>{SlotKind::Input, SlotKind::Input, SlotKind::Intermediate,
                                          SlotKind::Intermediate, SlotKind::Intermediate, SlotKind::Intermediate}));
  EXPECT_EQ(plan.slots[0].name, "x");
  EXPECT_EQ(plan.slots[0].index, 0);
  EXPECT_EQ(plan.slots[1].index, 1);
  EXPECT_EQ(plan.slots[4].shape, (Shape{2, 8}));
  EXPECT_EQ(plan.inputs, (std::vector<int>{0, 1}));
  EXPECT_EQ(plan.outputs, (std::vector<int>{4, 5}));
  EXPECT_TRUE(plan.constants.empty());

  ASSERT_EQ(plan.calls.size(), 4u);
  EXPECT_EQ(plan.calls[0].kernel, "relu_0");
  EXPECT_EQ(plan.calls[0].args, (std::vector<int>{0, 2}));
  EXPECT_EQ(plan.calls[1].kernel, "relu_0");
  EXPECT_EQ(plan.calls[1].args, (std::vector<int>{1, 3}));
  EXPECT_EQ(plan.calls[1].node, "%b = relu (m.py:4)");
  EXPECT_EQ(plan.calls[2].kernel, "add_0");
  EXPECT_EQ(plan.calls[2].args, (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(plan.calls[2].numOutputs, 1);
  EXPECT_EQ(plan.calls[3].kernel, "copy_0");
  EXPECT_EQ(plan.calls[3].args, (std::vector<int>{0, 5}));

  auto x = testing::randomData(16, 1), y = testing::randomData(16, 2);
  auto outs = runPlan(m, {x, y});
  for (int i = 0; i < 16; ++i) EXPECT_EQ(outs[0][i], std::max(x[i], 0.0f) + std::max(y[i], 0.0f));
  EXPECT_EQ(outs[1], x);
}

TEST(LowerGraph, ConstantsAndRepeatedOutputs) {
  Graph g = parseGraph(R"(graph(%x: f32[2]) {
    %w = constant f32[2] [1, 2]
    %unused = constant f32[3] [0, 0, 0]
    %s = add(%x, %w) : f32[2]
    %t = copy(%s) : f32[2]
    return %s, %w, %s, %t
  })");
  LoweredModule m = lowerGraph(g);
  const auto& plan = m.plan;
  ASSERT_EQ(plan.constants.size(), 1u);  // the unused constant gets no slot
  ASSERT_EQ(plan.slots.size(), 6u);      // x, w, s, t, w copy, s copy
  EXPECT_EQ(plan.slots[1].kind, SlotKind::Constant);
  EXPECT_EQ(plan.slots[1].index, 0);
  // The graph's copy node and both output copies share one kernel.
  ASSERT_EQ(m.funcs.size(), 2u);
  EXPECT_EQ(m.funcs[1].name, "copy_0");
  ASSERT_EQ(plan.calls.size(), 4u);
  EXPECT_EQ(plan.calls[2].args, (std::vector<int>{1, 4}));
  EXPECT_EQ(plan.calls[3].args, (std::vector<int>{2, 5}));
  EXPECT_EQ(plan.outputs, (std::vector<int>{2, 4, 5, 3}));

  auto outs = runPlan(m, {{10, 20}});
  EXPECT_EQ(outs[0], (std::vector<float>{11, 22}));
  EXPECT_EQ(outs[1], (std::vector<float>{1, 2}));
  EXPECT_EQ(outs[2], (std::vector<float>{11, 22}));
  EXPECT_EQ(outs[3], (std::vector<float>{11, 22}));
}

TEST(LowerGraph, SmallNetworkEndToEnd) {
  Graph g = parseGraph(R"(graph(%x: f32[1,2,6,5]) {
    %w = constant f32[3,2,1,1] [0.5, -1, 2, 0.25, 1, 1]
    %b = constant f32[3] [0.1, 0.2, 0.3]
    %c = conv2d(%x, %w, %b) : f32[1,3,6,5]
    %r = relu(%c) : f32[1,3,6,5]
    %p = max_pool2d(%r) {kernel=[2,2]} : f32[1,3,3,2]
    %m = mean(%p) {axes=[2,3], keepdims=0} : f32[1,3]
    %s = softmax(%m) {axis=1} : f32[1,3]
    return %s
  })");
  LoweredModule m = lowerGraph(g);
  EXPECT_EQ(m.funcs.size(), 5u);
  auto x = testing::randomData(60, 4);
  auto out = runPlan(m, {x})[0];
  const float w[3][2] = {{0.5f, -1}, {2, 0.25f}, {1, 1}};
  const float b[3] = {0.1f, 0.2f, 0.3f};
  std::vector<double> means(3);
  for (int c = 0; c < 3; ++c) {
    auto r = [&](int i, int j) { return std::max(0.0f, w[c][0] * x[i * 5 + j] + w[c][1] * x[30 + i * 5 + j] + b[c]); };
    double sum = 0;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 2; ++j)
        sum += std::max({r(2 * i, 2 * j), r(2 * i + 1, 2 * j), r(2 * i, 2 * j + 1), r(2 * i + 1, 2 * j + 1)});
    means[c] = sum / 6;
  }
  double mx = std::max({means[0], means[1], means[2]}), total = 0;
  for (double v : means) total += std::exp(v - mx);
  std::vector<float> expected;
  for (double v : means) expected.push_back(static_cast<float>(std::exp(v - mx) / total));
  testing::expectClose(out, expected);
}

TEST(LowerGraph, EveryRegisteredOpCanBeLowered) {
  for (const OpDef* op : allOps()) {
    if (op->regions) continue;  // if/loop become sub-plans of the runtime plan, not kernels
    EXPECT_TRUE(canLower(op->name)) << op->name;
  }
  EXPECT_FALSE(canLower("grid_sampler"));
}

TEST(LowerGraph, ControlFlowBecomesCallsOfSubPlans) {
  Graph g = parseGraph(R"(graph(%x: f32[4], %n: i64[]) {
  %go = constant bool[] [1]
  %t = tanh(%x) : f32[4]
  %y = loop(%n, %go, %t) {carried=1} : f32[4] {
    graph(%i: i64[], %h: f32[4]) {
      %u = tanh(%h) : f32[4]
      %s = sum(%u) {axes=[0], keepdims=0} : f32[]
      %z = constant f32[] [0]
      %c = greater(%s, %z) : bool[]
      %v = if(%c, %u) : f32[4] {
        graph(%a: f32[4]) {
          %r = relu(%a) : f32[4]
          return %r
        }
        graph(%a: f32[4]) {
          return %a
        }
      }
      return %c, %v
    }
  }
  return %y
})");
  LoweredModule m = lowerGraph(g);
  ASSERT_EQ(m.plan.calls.size(), 2u);
  const runtime::KernelCall& loop = m.plan.calls[1];
  EXPECT_EQ(loop.kind, runtime::CallKind::Loop);
  EXPECT_TRUE(loop.kernel.empty());
  EXPECT_EQ(loop.numOutputs, 1);
  EXPECT_EQ(loop.args.size(), 4u);  // trip, cond, the initial value, the output
  ASSERT_EQ(loop.regions, std::vector<int>{0});
  ASSERT_EQ(m.plan.regions.size(), 1u);
  const runtime::GraphPlan& body = m.plan.regions[0];
  EXPECT_EQ(body.inputs.size(), 2u);
  EXPECT_EQ(body.outputs.size(), 2u);
  // The body's tanh shares the enclosing graph's kernel (same workload key); its if is a call of
  // two sub-plans of the body's plan, and the else branch copies its input to its output.
  EXPECT_EQ(body.calls[0].kernel, m.plan.calls[0].kernel);
  const runtime::KernelCall& branch = body.calls.back();
  EXPECT_EQ(branch.kind, runtime::CallKind::If);
  ASSERT_EQ(branch.regions, (std::vector<int>{0, 1}));
  ASSERT_EQ(body.regions.size(), 2u);
  EXPECT_EQ(body.regions[1].calls.size(), 1u);
  EXPECT_EQ(body.regions[1].calls[0].node.find("copy"), body.regions[1].calls[0].node.rfind("copy"));
  // Labels say where a call runs; every kernel any plan calls is in the module, once.
  EXPECT_EQ(body.calls[0].node.rfind("%y.body | %u = tanh", 0), 0u) << body.calls[0].node;
  EXPECT_EQ(body.regions[0].calls[0].node.rfind("%y.body | %v.then | %r = relu", 0), 0u) << body.regions[0].calls[0].node;
  std::map<std::string, int> defined;
  for (const auto& f : m.funcs) ++defined[f.name];
  std::function<void(const runtime::GraphPlan&)> check = [&](const runtime::GraphPlan& p) {
    for (const auto& c : p.calls) {
      if (c.kind == runtime::CallKind::Kernel) {
        EXPECT_EQ(defined[c.kernel], 1) << c.kernel;
      }
    }
    for (const auto& r : p.regions) check(r);
  };
  check(m.plan);
}

TEST(LowerGraph, WorkloadKey) {
  Graph g = parseGraph(R"(graph(%x: f32[1,64,56,56], %w: f32[64,64,3,3], %b: f32[64]) {
    %y = conv2d(%x, %w, %b) {dilation=[1,1], groups=1, padding=[1,1], stride=[1,1]} : f32[1,64,56,56]
    %r = relu(%y) : f32[1,64,56,56]
    return %r
  })");
  EXPECT_EQ(workloadKey(g, 0),
            "conv2d{dilation=[1,1],groups=1,padding=[1,1],stride=[1,1]}(f32[1,64,56,56],f32[64,64,3,3],f32[64])"
            "->f32[1,64,56,56]");
  EXPECT_EQ(workloadKey(g, 1), "relu(f32[1,64,56,56])->f32[1,64,56,56]");
  tir::PrimFunc f = lowerNode(g, 0, "conv2d_0");
  EXPECT_EQ(f.attrs.at("workload_key"), workloadKey(g, 0));
  EXPECT_EQ(f.attrs.at("op"), "conv2d");
  EXPECT_EQ(f.numOutputs, 1);
  ASSERT_EQ(f.params.size(), 4u);
  EXPECT_EQ(f.params[3]->shape, (std::vector<int64_t>{1, 64, 56, 56}));
}

TEST(LowerGraph, ParameterNamesAreSanitizedAndUnique) {
  Graph g = parseGraph(R"(graph(%x.1: f32[3], %x_1: f32[3]) {
    %2 = add(%x.1, %x.1) : f32[3]
    %y = add(%2, %x_1) : f32[3]
    return %y
  })");
  tir::PrimFunc f0 = lowerNode(g, 0, "f0"), f1 = lowerNode(g, 1, "f1");
  EXPECT_EQ(f0.params[0]->name, "x_1");
  EXPECT_EQ(f0.params[1]->name, "x_1_1");
  EXPECT_EQ(f0.params[2]->name, "v2");
  EXPECT_EQ(f1.params[0]->name, "v2");
  EXPECT_EQ(f1.params[1]->name, "x_1");
}

TEST(LowerGraph, GoldenReluText) {
  Graph g = parseGraph(R"(graph(%x: f32[1,8]) {
    %r = relu(%x) : f32[1,8]
    return %r
  })");
  // The innermost loop is vectorized explicitly (vectorize.h): one 8-lane vector here.
  EXPECT_EQ(tir::print(lowerNode(g, 0, "relu_0")),
            "func relu_0(x: f32[1,8], r: f32[1,8]) {\n"
            "  r[ramp(0, 1, 8)] = max(x[ramp(0, 1, 8)], x8(0.0f))\n"
            "}\n");
}

}  // namespace
}  // namespace kiln::core::lower
