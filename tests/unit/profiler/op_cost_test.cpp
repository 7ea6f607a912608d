// What each call computes: FLOPs per operator kind, operators from kernel names and fused
// groups, shapes and bytes of a plan's calls.
#include <gtest/gtest.h>

#include "core/ir/graph.h"
#include "profiler/op_cost.h"

namespace kiln::profiler {
namespace {

using core::TensorType;
using runtime::DType;

TensorType f32(runtime::Shape s) { return TensorType{DType::Float32, std::move(s)}; }

TEST(OpCost, ConvolutionFlopsInAnyWeightLayout) {
  // 2·N·OH·OW·OC·IC/groups·KH·KW
  TensorType x = f32({2, 8, 16, 16}), w = f32({16, 8, 3, 3}), y = f32({2, 16, 16, 16});
  EXPECT_DOUBLE_EQ(opFlops("conv2d", {}, {x, w}, {y}), 2.0 * 2 * 16 * 16 * 16 * 8 * 3 * 3);
  // with a bias: one add per output element
  EXPECT_DOUBLE_EQ(opFlops("conv2d", {}, {x, w, f32({16})}, {y}),
                   2.0 * 2 * 16 * 16 * 16 * 8 * 9 + 2 * 16 * 16 * 16);
  // depthwise: groups = channels, weight [C,1,3,3]
  EXPECT_DOUBLE_EQ(opFlops("conv2d", {}, {f32({1, 32, 8, 8}), f32({32, 1, 3, 3})}, {f32({1, 32, 8, 8})}),
                   2.0 * 64 * 32 * 9);
  // packed NCHW[8]c output [N, C/8, H, W, 8], weights [O/8, I/8, KH, KW, 8, 8]: same count
  EXPECT_DOUBLE_EQ(
      opFlops("conv2d", {}, {f32({2, 1, 16, 16, 8}), f32({2, 1, 3, 3, 8, 8})}, {f32({2, 2, 16, 16, 8})}),
      2.0 * 2 * 16 * 16 * 16 * 8 * 9);
  // Winograd F(4x4,3x3): weight [O/8, 6, 6, C, 8] holds 36 positions per channel pair; the count
  // is still the 3x3 convolution's nominal work
  EXPECT_DOUBLE_EQ(opFlops("conv2d_winograd_nchwc", {}, {f32({2, 1, 16, 16, 8}), f32({2, 6, 6, 8, 8})},
                           {f32({2, 2, 16, 16, 8})}),
                   2.0 * 2 * 16 * 16 * 16 * 8 * 9);
}

TEST(OpCost, DenseMatmulElementwisePoolingReductions) {
  EXPECT_DOUBLE_EQ(opFlops("dense", {}, {f32({4, 512}), f32({1000, 512})}, {f32({4, 1000})}),
                   2.0 * 4 * 1000 * 512);
  EXPECT_DOUBLE_EQ(opFlops("matmul", {}, {f32({3, 4, 5}), f32({3, 5, 6})}, {f32({3, 4, 6})}), 2.0 * 72 * 5);
  EXPECT_DOUBLE_EQ(opFlops("relu", {}, {f32({10, 10})}, {f32({10, 10})}), 100);
  EXPECT_DOUBLE_EQ(opFlops("add", {}, {f32({10, 10}), f32({10})}, {f32({10, 10})}), 100);
  EXPECT_DOUBLE_EQ(opFlops("batch_norm", {}, {f32({1, 4, 2, 2})}, {f32({1, 4, 2, 2})}), 32);
  core::Attrs pool{{"kernel", std::vector<int64_t>{3, 3}}};
  EXPECT_DOUBLE_EQ(opFlops("max_pool2d", pool, {f32({1, 4, 8, 8})}, {f32({1, 4, 4, 4})}), 64.0 * 9);
  EXPECT_DOUBLE_EQ(opFlops("adaptive_avg_pool2d", {}, {f32({1, 4, 7, 7})}, {f32({1, 4, 1, 1})}), 196);
  EXPECT_DOUBLE_EQ(opFlops("mean", {}, {f32({2, 50})}, {f32({2})}), 100);
  EXPECT_DOUBLE_EQ(opFlops("softmax", {}, {f32({2, 10})}, {f32({2, 10})}), 100);
  EXPECT_DOUBLE_EQ(opFlops("reshape", {}, {f32({2, 10})}, {f32({20})}), 0);
  EXPECT_DOUBLE_EQ(opFlops("no_such_op", {}, {f32({2})}, {f32({2})}), 0);
}

TEST(OpCost, OperatorsFromKernelNames) {
  EXPECT_EQ(opsFromKernelName("fused_conv2d_add_relu_3"),
            (std::vector<std::string>{"conv2d", "add", "relu"}));
  EXPECT_EQ(opsFromKernelName("max_pool2d_0"), (std::vector<std::string>{"max_pool2d"}));
  EXPECT_EQ(opsFromKernelName("fused_batch_norm_leaky_relu_12"),
            (std::vector<std::string>{"batch_norm", "leaky_relu"}));
  EXPECT_EQ(opsFromKernelName("adaptive_avg_pool2d_1"), (std::vector<std::string>{"adaptive_avg_pool2d"}));
  EXPECT_EQ(opsFromKernelName("copy"), (std::vector<std::string>{"copy"}));
}

/// x → conv2d → add(bias) → relu → dense, with the conv group fused, and a plan like lowering's:
/// one call for the group (internal values have no slot) and one for the dense.
struct FusedFixture {
  core::Graph graph;
  runtime::GraphPlan plan;
  FusedFixture() {
    auto x = graph.addInput("x", f32({1, 4, 8, 8}));
    auto w = graph.addConstant("w", runtime::Tensor::zeros(DType::Float32, {8, 4, 3, 3}));
    auto b = graph.addConstant("b", runtime::Tensor::zeros(DType::Float32, {8, 1, 1}));
    auto conv = graph.add("conv2d", {x, w},
                          {{"stride", std::vector<int64_t>{1, 1}},
                           {"padding", std::vector<int64_t>{1, 1}},
                           {"dilation", std::vector<int64_t>{1, 1}},
                           {"groups", int64_t{1}}});
    auto biased = graph.add("add", {conv, b});
    auto act = graph.add("relu", {biased});
    auto flat = graph.add("reshape", {act}, {{"shape", std::vector<int64_t>{1, 512}}});
    auto dw = graph.addConstant("dw", runtime::Tensor::zeros(DType::Float32, {10, 512}));
    auto out = graph.add("dense", {flat, dw});
    graph.setOutputs({out});
    graph.addGroup("fused_conv2d_add_relu_0", 0, 3);

    auto slot = [&](core::ValueId v, runtime::SlotKind kind) {
      const auto& value = graph.value(v);
      plan.slots.push_back({value.name, value.type.dtype, value.type.shape, kind, 0});
      return static_cast<int>(plan.slots.size() - 1);
    };
    int sx = slot(x, runtime::SlotKind::Input), sw = slot(w, runtime::SlotKind::Constant);
    int sb = slot(b, runtime::SlotKind::Constant), sa = slot(act, runtime::SlotKind::Intermediate);
    int sf = slot(flat, runtime::SlotKind::Intermediate), sdw = slot(dw, runtime::SlotKind::Constant);
    int so = slot(out, runtime::SlotKind::Intermediate);
    plan.calls.push_back(
        {"fused_conv2d_add_relu_0", {sx, sw, sb, sa}, 1, "%relu = @fused_conv2d_add_relu_0"});
    plan.calls.push_back({"reshape_0", {sa, sf}, 1, "%reshape = reshape"});
    plan.calls.push_back({"dense_0", {sf, sdw, so}, 1, "%dense = dense"});
    // An output copy writes a slot of its own that the graph does not know.
    plan.slots.push_back({"out_out0", DType::Float32, {1, 10}, runtime::SlotKind::Intermediate, -1});
    int sc = static_cast<int>(plan.slots.size() - 1);
    plan.calls.push_back({"copy_0", {so, sc}, 1, "%out_out0 = copy (output 0)"});
    plan.inputs = {sx};
    plan.outputs = {so};
  }
};

TEST(OpCost, DescribesFusedAndPlainCalls) {
  FusedFixture f;
  auto costs = describeCalls(f.graph, f.plan);
  ASSERT_EQ(costs.size(), 4u);
  EXPECT_EQ(costs[0].ops, (std::vector<std::string>{"conv2d", "add", "relu"}));
  double conv = 2.0 * 64 * 8 * 4 * 9, elem = 8 * 64;
  EXPECT_DOUBLE_EQ(costs[0].flops, conv + 2 * elem);
  EXPECT_EQ(costs[0].inputShapes, (std::vector<std::string>{"f32[1,4,8,8]", "f32[8,4,3,3]", "f32[8,1,1]"}));
  EXPECT_EQ(costs[0].outputShape, "f32[1,8,8,8]");
  EXPECT_DOUBLE_EQ(costs[0].bytes, 4.0 * (256 + 288 + 8 + 512));
  EXPECT_EQ(costs[1].ops, (std::vector<std::string>{"reshape"}));
  EXPECT_DOUBLE_EQ(costs[1].flops, 0);
  EXPECT_EQ(costs[2].ops, (std::vector<std::string>{"dense"}));
  EXPECT_DOUBLE_EQ(costs[2].flops, 2.0 * 10 * 512);
  EXPECT_EQ(costs[2].key, f.graph.value(f.graph.outputs()[0]).name);
  EXPECT_EQ(costs[3].ops, (std::vector<std::string>{"copy"}));  // from the kernel name
}

}  // namespace
}  // namespace kiln::profiler
