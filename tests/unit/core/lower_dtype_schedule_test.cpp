// Lowering of non-f32 dtypes, zero-size tensors, unsupported combinations, name clashes and
// schedule shapes (where the parallel loop goes).
#include "core/tir/printer.h"
#include "tests/unit/core/lower_test_util.h"

namespace kiln::core::lower {
namespace {

using testing::countLoops;

tir::PrimFunc lowerText(const std::string& text) { return lowerNode(parseGraph(text), 0, "f"); }

TEST(LowerDtypes, Float64ConvAndSoftmax) {
  tir::PrimFunc conv = lowerText(R"(graph(%x: f64[1,1,3,3], %w: f64[1,1,2,2]) {
    %y = conv2d(%x, %w) {padding=[1,1]} : f64[1,1,4,4]
    return %y
  })");
  std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w = {1, 10, 100, 1000}, y(16);
  interpret(conv, {x.data(), w.data(), y.data()});
  // y[i][j] = Σ x[i-1+u][j-1+v]·w[u][v]; corner (0,0) sees only x[0][0]·w[1][1].
  EXPECT_EQ(y[0], 1000.0);
  EXPECT_EQ(y[5], 1 * 1 + 2 * 10 + 4 * 100 + 5 * 1000.0);
  EXPECT_EQ(y[15], 9 * 1.0);

  tir::PrimFunc softmax = lowerText(R"(graph(%x: f64[2,3]) {
    %y = softmax(%x) {axis=-1} : f64[2,3]
    return %y
  })");
  std::vector<double> sx = {1, 2, 3, 0, 0, 1000}, sy(6);
  interpret(softmax, {sx.data(), sy.data()});
  double total = std::exp(-2.0) + std::exp(-1.0) + 1;
  EXPECT_DOUBLE_EQ(sy[0], std::exp(-2.0) / total);
  EXPECT_DOUBLE_EQ(sy[2], 1 / total);
  EXPECT_DOUBLE_EQ(sy[5], 1.0);
}

TEST(LowerDtypes, IntegerUnaryOps) {
  std::vector<std::pair<std::string, std::vector<int32_t>>> cases = {
      {"relu", {0, 0, 0, 4, 9}},
      {"neg", {7, 1, 0, -4, -9}},
      {"abs", {7, 1, 0, 4, 9}},
      {"clamp {max=5, min=-2}", {-2, -1, 0, 4, 5}},
      {"copy", {-7, -1, 0, 4, 9}},
  };
  for (const auto& [op, expected] : cases) {
    std::string name = op.substr(0, op.find(' '));
    std::string attrs = op.find(' ') == std::string::npos ? "" : op.substr(op.find(' '));
    tir::PrimFunc f = lowerText("graph(%x: i32[5]) {\n %y = " + name + "(%x)" + attrs + " : i32[5]\n return %y\n}");
    std::vector<int32_t> x = {-7, -1, 0, 4, 9}, y(5, 99);
    interpret(f, {x.data(), y.data()});
    EXPECT_EQ(y, expected) << op;
  }
}

TEST(LowerDtypes, IntegerMaxPoolAndSum) {
  tir::PrimFunc pool = lowerText(R"(graph(%x: i64[1,1,2,3]) {
    %y = max_pool2d(%x) {kernel=[2,2], padding=[1,1], stride=[2,2]} : i64[1,1,2,2]
    return %y
  })");
  std::vector<int64_t> x = {-5, -6, -7, -8, -9, -1}, y(4);
  interpret(pool, {x.data(), y.data()});
  EXPECT_EQ(y, (std::vector<int64_t>{-5, -6, -8, -1}));
  tir::PrimFunc sum = lowerText(R"(graph(%x: i64[2,3]) {
    %y = sum(%x) {axes=[1], keepdims=1} : i64[2,1]
    return %y
  })");
  std::vector<int64_t> sy(2);
  interpret(sum, {x.data(), sy.data()});
  EXPECT_EQ(sy, (std::vector<int64_t>{-18, -18}));
}

TEST(LowerDtypes, BoolDataMovementUsesBytes) {
  Graph g = parseGraph(R"(graph(%a: bool[2,2], %b: bool[2,1]) {
    %c = concat(%a, %b) {axis=1} : bool[2,3]
    %t = transpose(%c) {perm=[1,0]} : bool[3,2]
    %r = reshape(%t) {shape=[6]} : bool[6]
    return %r
  })");
  LoweredModule m = lowerGraph(g);
  ASSERT_EQ(m.funcs.size(), 3u);
  EXPECT_EQ(m.funcs[0].params[0]->elemType, tir::Type::u8());
  std::vector<uint8_t> a = {1, 0, 0, 1}, b = {1, 0}, c(6), t(6), r(6);
  interpret(m.funcs[0], {a.data(), b.data(), c.data()});
  interpret(m.funcs[1], {c.data(), t.data()});
  interpret(m.funcs[2], {t.data(), r.data()});
  EXPECT_EQ(c, (std::vector<uint8_t>{1, 0, 1, 0, 1, 0}));
  EXPECT_EQ(r, (std::vector<uint8_t>{1, 0, 0, 1, 1, 0}));
}

TEST(LowerDtypes, UnsupportedCombinationsNameTheOp) {
  struct Case {
    std::string text, expect;
  };
  std::vector<Case> cases = {
      {"graph(%x: i64[3]) {\n %y = softmax(%x) {axis=0} : i64[3] loc(\"a.py:1\")\n return %y\n}", "softmax"},
      {"graph(%x: i64[3]) {\n %y = exp(%x) : i64[3] loc(\"a.py:2\")\n return %y\n}", "exp"},
      {"graph(%x: f32[3]) {\n %y = gelu(%x) {approximate=\"erf\"} : f32[3] loc(\"a.py:3\")\n return %y\n}", "gelu"},
      {"graph(%x: bool[3]) {\n %y = relu(%x) : bool[3] loc(\"a.py:4\")\n return %y\n}", "relu"},
      {"graph(%x: i32[2,2]) {\n %y = mean(%x) {axes=[0], keepdims=0} : i32[2] loc(\"a.py:5\")\n return %y\n}", "mean"},
  };
  for (const Case& c : cases) {
    Graph g = parseGraph(c.text);
    try {
      lowerGraph(g);
      ADD_FAILURE() << "expected an error for " << c.text;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
      std::string msg = e.what();
      EXPECT_EQ(msg.rfind(c.expect + ":", 0), 0u) << msg;
      EXPECT_NE(msg.find("(%y at a.py:"), std::string::npos) << msg;
    }
  }
}

TEST(LowerShapes, ZeroSizeConcatInput) {
  auto r = testing::runFirstNode(R"(graph(%a: f32[2,0,3], %b: f32[2,2,3]) {
    %y = concat(%a, %b) {axis=1} : f32[2,2,3]
    return %y
  })");
  EXPECT_EQ(r.output, r.inputs[1]);
}

TEST(LowerNames, LoopVariablesAndLocalsNeverShadowParameters) {
  Graph g = parseGraph(R"(graph(%m: f32[3,4], %k: f32[4,2]) {
    %n = matmul(%m, %k) : f32[3,2]
    %row_max = softmax(%n) {axis=1} : f32[3,2]
    return %row_max
  })");
  tir::PrimFunc mm = lowerNode(g, 0, "mm");
  std::string text = tir::print(mm);
  EXPECT_EQ(text.find("for (m,"), std::string::npos) << text;
  EXPECT_EQ(text.find("for (n,"), std::string::npos) << text;
  EXPECT_EQ(text.find("for (k,"), std::string::npos) << text;
  EXPECT_NE(text.find("for (k_1,"), std::string::npos) << text;
  std::vector<float> a = testing::randomData(12, 1), b = testing::randomData(8, 2), y(6);
  interpret(mm, {a.data(), b.data(), y.data()});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) {
      double acc = 0;
      for (int q = 0; q < 4; ++q) acc += double(a[i * 4 + q]) * b[q * 2 + j];
      EXPECT_NEAR(y[i * 2 + j], acc, 1e-5);
    }
  std::string sm = tir::print(lowerNode(g, 1, "sm"));
  EXPECT_NE(sm.find("allocate row_max_1"), std::string::npos) << sm;
}

TEST(LowerSchedules, SmallBatchConcatParallelizesInnermostLoop) {
  tir::PrimFunc f = lowerText(R"(graph(%a: f32[2,3,40,40], %b: f32[2,5,40,40]) {
    %y = concat(%a, %b) {axis=1} : f32[2,8,40,40]
    return %y
  })");
  // Per input: a serial loop over the 2 batch rows around a parallel contiguous copy.
  EXPECT_EQ(countLoops(f, tir::ForKind::Parallel), 2);
  EXPECT_EQ(countLoops(f, tir::ForKind::Serial), 2);
  const auto* seq = f.body.as<tir::Seq>();
  ASSERT_NE(seq, nullptr);
  const auto* outer = seq->stmts[0].as<tir::For>();
  ASSERT_NE(outer, nullptr);
  EXPECT_EQ(outer->forKind, tir::ForKind::Serial);
  ASSERT_NE(outer->body.as<tir::For>(), nullptr);
  EXPECT_EQ(outer->body.as<tir::For>()->forKind, tir::ForKind::Parallel);
}

TEST(LowerSchedules, ClassifierDenseIsParallelByWork) {
  tir::PrimFunc f = lowerText(R"(graph(%x: f32[1,512], %w: f32[1000,512], %b: f32[1000]) {
    %y = dense(%x, %w, %b) : f32[1,1000]
    return %y
  })");
  EXPECT_EQ(countLoops(f, tir::ForKind::Parallel), 1);
  // The accumulator is private to each parallel iteration.
  const auto* loop = f.body.as<tir::For>();
  ASSERT_NE(loop, nullptr);
  EXPECT_EQ(loop->forKind, tir::ForKind::Parallel);
  EXPECT_NE(loop->body.as<tir::Allocate>(), nullptr);
  tir::PrimFunc small = lowerText(R"(graph(%x: f32[1,16], %w: f32[10,16]) {
    %y = dense(%x, %w) : f32[1,10]
    return %y
  })");
  EXPECT_EQ(countLoops(small, tir::ForKind::Parallel), 0);
}

TEST(LowerSchedules, ConvReductionLoopsAreInnermost) {
  tir::PrimFunc f = lowerText(R"(graph(%x: f32[1,4,8,8], %w: f32[8,4,3,3]) {
    %y = conv2d(%x, %w) {padding=[1,1]} : f32[1,8,8,8]
    return %y
  })");
  std::string text = tir::print(f);
  // The NCHW nest's sketch (conv_search.h "NCHW"): no bounds checks anywhere (each region's taps
  // are those inside the image), the interior's reduction over c, kh and kw around its register
  // tile of channels × vectors of columns, its annotation, trace and key recorded.
  EXPECT_EQ(text.find("if ("), std::string::npos) << text;
  size_t reduction = text.find("for (c_1_1");
  ASSERT_NE(reduction, std::string::npos) << text;
  const size_t kh = text.find("for (kh_1_1", reduction), tile = text.find("unrolled (v_1_1", reduction);
  ASSERT_NE(kh, std::string::npos) << text;
  EXPECT_LT(kh, tile) << text;
  EXPECT_NE(text.find("ramp(", tile), std::string::npos) << text;
  EXPECT_EQ(f.attrs["schedule"].rfind("mi=", 0), 0u) << f.attrs["schedule"];
  EXPECT_NE(f.attrs["trace"].find("cache_write(c_1_1)"), std::string::npos) << f.attrs["trace"];
  EXPECT_EQ(f.attrs["tune_key"],
            "conv2d:n=1,c=4,h=8,w=8,o=8,kh=3,kw=3,sh=1,sw=1,ph=1,pw=1,dh=1,dw=1,g=1:f32");
  EXPECT_EQ(countLoops(f, tir::ForKind::Parallel), 0);
}

}  // namespace
}  // namespace kiln::core::lower
