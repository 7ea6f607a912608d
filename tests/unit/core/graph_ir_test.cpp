#include <gtest/gtest.h>

#include "core/ir/graph.h"
#include "core/ir/op_registry.h"
#include "core/ir/parser.h"
#include "core/ir/printer.h"
#include "runtime/error.h"

using namespace kiln;
using namespace kiln::core;

namespace {

const char* kBlock = R"(graph(%x: f32[1,3,8,8]) {
  %w = constant f32[2,3,1,1] [0.5, -1, 2, 0.25, 3, -0.125]
  %b = constant f32[2] [0.100000001, -0.200000003]
  %conv = conv2d(%x, %w, %b) {dilation=[1,1], groups=1, padding=[0,0], stride=[1,1]} : f32[1,2,8,8] loc("model.py:12")
  %relu = relu(%conv) : f32[1,2,8,8]
  %k = constant f32[] [1.5]
  %mul = mul(%relu, %k) : f32[1,2,8,8]
  %pool = adaptive_avg_pool2d(%mul) {output_size=[1,1]} : f32[1,2,1,1]
  %flat = reshape(%pool) {shape=[1,-1]} : f32[1,2]
  %sm = softmax(%flat) {axis=1} : f32[1,2]
  %lrelu = leaky_relu(%sm) {alpha=0.10000000000000001} : f32[1,2]
  return %lrelu, %relu
}
)";

/// Expects `text` to be refused with a message containing `needle`.
void expectError(const std::string& text, const std::string& needle) {
  try {
    parseGraph(text);
    ADD_FAILURE() << "accepted: " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(GraphText, PrintParsePrintIsIdentity) {
  Graph g = parseGraph(kBlock);
  std::string printed = printGraph(g);
  EXPECT_EQ(printed, kBlock);
  Graph again = parseGraph(printed);
  EXPECT_TRUE(again == g);
  EXPECT_EQ(g.nodes().size(), 7u);
  EXPECT_EQ(g.outputs().size(), 2u);
  EXPECT_EQ(g.node(0).location, "model.py:12");
}

TEST(GraphText, FullConstantsRoundTripExactly) {
  Graph g;
  ValueId x = g.addInput("x", {DType::Float32, {2, 40}});
  runtime::Tensor w = runtime::Tensor::zeros(DType::Float32, {3, 40});
  for (int i = 0; i < w.numel(); ++i) w.data<float>()[i] = 1.0f / (i + 3.0f) - 0.2f;
  ValueId wid = g.addConstant("w", w);
  g.setOutputs({g.add("dense", {x, wid})});
  PrintOptions full;
  full.fullConstants = true;
  Graph back = parseGraph(printGraph(g, full));
  EXPECT_TRUE(back == g);
  // Elided constants parse back as zeros: structurally equal types, different data.
  Graph elided = parseGraph(printGraph(g));
  EXPECT_FALSE(elided == g);
  EXPECT_EQ(printGraph(elided), printGraph(g));
}

TEST(GraphText, ParseErrorsCarryLineAndColumn) {
  expectError("graph(%x: f32[2]) {\n  %y = relu(%z) : f32[2]\n  return %y\n}", "line 2");
  expectError("graph(%x: f32[2]) {\n  %y = relu(%z) : f32[2]\n  return %y\n}", "undefined value %z");
  expectError("graph(%x: f99[2]) { return %x }", "unknown dtype");
  expectError("graph(%x: f32[2]) {\n  %y = frobnicate(%x) : f32[2]\n  return %y\n}", "frobnicate");
  expectError("graph(%x: f32[2]) {\n  %y = relu(%x) : f32[3]\n  return %y\n}", "differs from inferred");
  expectError("graph(%x: f32[2]) {\n  %y = relu(%x) : f32[2]\n  return %y\n", "expected '}'");
}

TEST(OpRegistry, InfersShapesLikePyTorch) {
  Graph g;
  ValueId x = g.addInput("x", {DType::Float32, {1, 3, 7, 9}});
  ValueId w = g.addConstant("w", runtime::Tensor::zeros(DType::Float32, {5, 3, 3, 3}));
  ValueId c = g.add("conv2d", {x, w}, {{"stride", std::vector<int64_t>{2, 2}}, {"padding", std::vector<int64_t>{1, 1}}, {"dilation", std::vector<int64_t>{2, 2}}, {"groups", int64_t{1}}});
  EXPECT_EQ(g.type(c).shape, (Shape{1, 5, 3, 4}));
  ValueId p = g.add("max_pool2d", {x}, {{"kernel", std::vector<int64_t>{3, 3}}, {"stride", std::vector<int64_t>{2, 2}}, {"padding", std::vector<int64_t>{1, 1}}, {"ceil_mode", int64_t{1}}});
  EXPECT_EQ(g.type(p).shape, (Shape{1, 3, 4, 5}));
  ValueId y = g.addInput("y", {DType::Float32, {3, 1, 9}});
  EXPECT_EQ(g.type(g.add("add", {x, y})).shape, (Shape{1, 3, 7, 9}));
  ValueId a = g.addInput("a", {DType::Float32, {2, 1, 4, 5}});
  ValueId b = g.addInput("b", {DType::Float32, {3, 5, 6}});
  EXPECT_EQ(g.type(g.add("matmul", {a, b})).shape, (Shape{2, 3, 4, 6}));
  EXPECT_EQ(g.type(g.add("mean", {x}, {{"axes", std::vector<int64_t>{2, -1}}, {"keepdims", int64_t{0}}})).shape, (Shape{1, 3}));
  EXPECT_EQ(g.type(g.add("transpose", {x}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}})).shape, (Shape{1, 7, 9, 3}));
}

TEST(OpRegistry, RejectsBadShapesWithTheOpName) {
  Graph g;
  ValueId x = g.addInput("x", {DType::Float32, {1, 3, 8, 8}});
  ValueId w = g.addConstant("w", runtime::Tensor::zeros(DType::Float32, {4, 2, 3, 3}));
  try {
    g.add("conv2d", {x, w}, {}, "m.py:3");
    FAIL();
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind("conv2d:", 0), 0u) << msg;
    EXPECT_NE(msg.find("(m.py:3)"), std::string::npos) << msg;
    EXPECT_EQ(e.kind(), ErrorKind::InvalidModel);
  }
  ValueId y = g.addInput("y", {DType::Float32, {4, 8}});
  EXPECT_THROW(g.add("add", {x, y}), Error);
  try {
    g.add("grid_sample", {x});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  }
}

TEST(Attrs, IntOrPairAttributesReadAsTwoValues) {
  Attrs a{{"stride", std::vector<int64_t>{2}},
          {"padding", std::vector<int64_t>{1, 3}},
          {"kernel", std::vector<int64_t>{3, 3, 3}}};
  EXPECT_EQ(a.getPair("stride", 1), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(a.getPair("padding", 0), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(a.getPair("dilation", 1), (std::vector<int64_t>{1, 1}));
  try {
    a.getPair("kernel", 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidModel);
    EXPECT_NE(std::string(e.what()).find("'kernel' must have 1 or 2 values"), std::string::npos) << e.what();
  }
  // A graph whose conv2d says so is refused with the op's name, as any bad attribute.
  Graph g;
  ValueId x = g.addInput("x", {DType::Float32, {1, 3, 8, 8}});
  ValueId w = g.addConstant("w", runtime::Tensor::zeros(DType::Float32, {4, 3, 3, 3}));
  try {
    g.add("conv2d", {x, w}, {{"stride", std::vector<int64_t>{1, 1, 1}}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("conv2d:", 0), 0u) << e.what();
    EXPECT_EQ(e.kind(), ErrorKind::InvalidModel);
  }
}

TEST(OpRegistry, ListsEveryOpOnce) {
  auto ops = allOps();
  EXPECT_GE(ops.size(), 35u);
  for (size_t i = 1; i < ops.size(); ++i) EXPECT_LT(ops[i - 1]->name, ops[i]->name);
  EXPECT_NE(findOp("conv2d"), nullptr);
  EXPECT_EQ(findOp("aten::conv2d"), nullptr);
}

namespace {

const char* kLoop = R"(graph(%x: f32[2,3], %n: i64[]) {
  %go = constant bool[] [1]
  %y, %y_1 = loop(%n, %go, %x, %n, %x) {carried=2} : f32[2,3], i64[] loc("model.py:7") {
    graph(%i: i64[], %h: f32[2,3], %c: i64[], %x: f32[2,3]) {
      %t = tanh(%h) : f32[2,3]
      %s = add(%t, %x) : f32[2,3]
      %one = constant i64[] [1]
      %c1 = sub(%c, %one) : i64[]
      %z = constant i64[] [0]
      %more = greater(%c1, %z) : bool[]
      %b = if(%more, %s) : f32[2,3] {
        graph(%a: f32[2,3]) {
          %r = relu(%a) : f32[2,3]
          return %r
        }
        graph(%a: f32[2,3]) {
          return %a
        }
      }
      return %more, %b, %c1
    }
  }
  return %y, %y_1
}
)";

}  // namespace

TEST(GraphText, RegionsPrintNestedAndParseBack) {
  Graph g = parseGraph(kLoop);
  EXPECT_EQ(printGraph(g), kLoop);
  EXPECT_TRUE(parseGraph(printGraph(g)) == g);
  ASSERT_EQ(g.nodes().size(), 1u);
  const Node& loop = g.node(0);
  ASSERT_EQ(loop.regions.size(), 1u);
  EXPECT_EQ(loop.regions[0]->inputs().size(), 4u);
  EXPECT_EQ(loop.regions[0]->node(4).op, "if");
  EXPECT_EQ(loop.regions[0]->node(4).regions.size(), 2u);
  // A region's names are its own: %x inside is not the enclosing graph's %x.
  EXPECT_EQ(loop.regions[0]->value(loop.regions[0]->inputs()[3]).name, "x");
  // Equality looks inside regions.
  std::string changed = kLoop;
  changed.replace(changed.find("relu(%a)"), 4, "tanh");
  EXPECT_FALSE(parseGraph(changed) == g);
}

TEST(GraphText, RegionTypeErrorsNameTheBranchOrBody) {
  // Branches returning different types.
  expectError(R"(graph(%c: bool[], %x: f32[2]) {
  %y = if(%c, %x) : f32[2] {
    graph(%a: f32[2]) { return %a }
    graph(%a: f32[2]) {
      %s = sum(%a) {axes=[0], keepdims=0} : f32[]
      return %s
    }
  }
  return %y
})", "the else branch (f32[])");
  // A branch that takes other operands than the node passes.
  expectError(R"(graph(%c: bool[], %x: f32[2]) {
  %y = if(%c, %x) : f32[2] {
    graph(%a: f32[3]) { return %a }
    graph(%a: f32[2]) { return %a }
  }
  return %y
})", "the then branch takes (f32[3])");
  // A condition of several elements.
  expectError(R"(graph(%c: bool[2], %x: f32[2]) {
  %y = if(%c, %x) : f32[2] {
    graph(%a: f32[2]) { return %a }
    graph(%a: f32[2]) { return %a }
  }
  return %y
})", "the condition must hold one element");
  // A body whose carried value changes type.
  expectError(R"(graph(%n: i64[], %x: f32[2]) {
  %go = constant bool[] [1]
  %y = loop(%n, %go, %x) {carried=1} : f32[2] {
    graph(%i: i64[], %h: f32[2]) {
      %s = sum(%h) {axes=[0], keepdims=0} : f32[]
      return %go, %s
    }
  }
  return %y
})", "undefined value %go");
  expectError(R"(graph(%n: i64[], %x: f32[2]) {
  %go = constant bool[] [1]
  %y = loop(%n, %go, %x) {carried=1} : f32[2] {
    graph(%i: i64[], %h: f32[2]) {
      %t = constant bool[] [1]
      %s = sum(%h) {axes=[0], keepdims=0} : f32[]
      return %t, %s
    }
  }
  return %y
})", "carried values keep their types");
  // Without its regions.
  expectError("graph(%c: bool[], %x: f32[2]) {\n  %y = if(%c, %x) : f32[2]\n  return %y\n}", "expected 2 sub-graphs");
  // A trip count that is not i64.
  expectError(R"(graph(%n: f32[], %x: f32[2]) {
  %go = constant bool[] [1]
  %y = loop(%n, %go, %x) {carried=1} : f32[2] {
    graph(%i: i64[], %h: f32[2]) {
      %t = constant bool[] [1]
      return %t, %h
    }
  }
  return %y
})", "the trip count must be i64");
}
