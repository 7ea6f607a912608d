// Numerical tests of reshape, transpose, concat, mean/sum and softmax lowerings.
#include "tests/unit/core/lower_test_util.h"

namespace kiln::core::lower {
namespace {

using testing::expectClose;
using testing::flatIndex;
using testing::runFirstNode;

/// Calls f(index) for every index of `shape` in row-major order.
template <typename F>
void forEachIndex(const std::vector<int64_t>& shape, F f) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  std::vector<int64_t> idx(shape.size());
  for (int64_t i = 0; i < numel; ++i) {
    int64_t rem = i;
    for (size_t d = shape.size(); d-- > 0;) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
    }
    f(idx);
  }
}

TEST(LowerReshape, CopiesElementsInOrder) {
  auto r = runFirstNode(R"(graph(%x: f32[2,3,4]) {
    %y = reshape(%x) {shape=[4,-1]} : f32[4,6]
    return %y
  })");
  EXPECT_EQ(r.output, r.inputs[0]);
}

TEST(LowerTranspose, NchwToNhwc) {
  auto r = runFirstNode(R"(graph(%x: f32[2,3,4,5]) {
    %y = transpose(%x) {perm=[0,2,3,1]} : f32[2,4,5,3]
    return %y
  })");
  std::vector<float> expected(r.output.size());
  forEachIndex({2, 3, 4, 5}, [&](const std::vector<int64_t>& i) {
    expected[flatIndex({i[0], i[2], i[3], i[1]}, {2, 4, 5, 3})] = r.inputs[0][flatIndex(i, {2, 3, 4, 5})];
  });
  EXPECT_EQ(r.output, expected);
}

TEST(LowerTranspose, NegativeAxesAndLargeIsParallel) {
  auto r = runFirstNode(R"(graph(%x: f32[3,40,50]) {
    %y = transpose(%x) {perm=[-1,0,1]} : f32[50,3,40]
    return %y
  })");
  EXPECT_EQ(testing::countLoops(r.func, tir::ForKind::Parallel), 1);
  std::vector<float> expected(r.output.size());
  forEachIndex({3, 40, 50}, [&](const std::vector<int64_t>& i) {
    expected[flatIndex({i[2], i[0], i[1]}, {50, 3, 40})] = r.inputs[0][flatIndex(i, {3, 40, 50})];
  });
  EXPECT_EQ(r.output, expected);
}

TEST(LowerTranspose, Int64Elements) {
  Graph g = parseGraph(R"(graph(%x: i64[2,3]) {
    %y = transpose(%x) {perm=[1,0]} : i64[3,2]
    return %y
  })");
  std::vector<int64_t> x = {1, 2, 3, 4, 5, 6}, y(6, 0);
  interpret(lowerNode(g, 0, "f"), {x.data(), y.data()});
  EXPECT_EQ(y, (std::vector<int64_t>{1, 4, 2, 5, 3, 6}));
}

void checkConcat(const std::vector<std::vector<int64_t>>& shapes, int64_t axis, const std::vector<int64_t>& out) {
  auto shapeText = [](const std::vector<int64_t>& s) {
    std::string t = "[";
    for (size_t i = 0; i < s.size(); ++i) t += (i ? "," : "") + std::to_string(s[i]);
    return t + "]";
  };
  std::string params, args;
  for (size_t j = 0; j < shapes.size(); ++j) {
    params += (j ? ", %x" : "%x") + std::to_string(j) + ": f32" + shapeText(shapes[j]);
    args += (j ? ", %x" : "%x") + std::to_string(j);
  }
  std::string text = "graph(" + params + ") {\n  %y = concat(" + args + ") {axis=" + std::to_string(axis) +
                     "} : f32" + shapeText(out) + "\n  return %y\n}\n";
  SCOPED_TRACE(text);
  auto r = runFirstNode(text);
  int64_t a = axis < 0 ? axis + static_cast<int64_t>(out.size()) : axis;
  std::vector<float> expected(r.output.size(), -1000);
  int64_t offset = 0;
  for (size_t j = 0; j < shapes.size(); ++j) {
    forEachIndex(shapes[j], [&](const std::vector<int64_t>& i) {
      std::vector<int64_t> o = i;
      o[a] += offset;
      expected[flatIndex(o, out)] = r.inputs[j][flatIndex(i, shapes[j])];
    });
    offset += shapes[j][a];
  }
  EXPECT_EQ(r.output, expected);
}

TEST(LowerConcat, ThreeInputsAlongChannels) { checkConcat({{2, 3, 4}, {2, 1, 4}, {2, 5, 4}}, 1, {2, 9, 4}); }
TEST(LowerConcat, LastAxisNegative) { checkConcat({{3, 2}, {3, 5}}, -1, {3, 7}); }
TEST(LowerConcat, FirstAxis) { checkConcat({{1, 4}, {2, 4}, {3, 4}}, 0, {6, 4}); }
TEST(LowerConcat, LargeChannelConcat) { checkConcat({{1, 24, 16, 16}, {1, 8, 16, 16}}, 1, {1, 32, 16, 16}); }

void checkReduce(const std::string& op, const std::vector<int64_t>& shape, const std::vector<int64_t>& axes,
                 bool keep, const std::string& inText, const std::string& outText) {
  std::string axesText = "[";
  for (size_t i = 0; i < axes.size(); ++i) axesText += (i ? "," : "") + std::to_string(axes[i]);
  axesText += "]";
  std::string text = "graph(%x: f32" + inText + ") {\n  %y = " + op + "(%x) {axes=" + axesText +
                     ", keepdims=" + std::to_string(keep) + "} : f32" + outText + "\n  return %y\n}\n";
  SCOPED_TRACE(text);
  auto r = runFirstNode(text);
  std::vector<bool> reduced(shape.size(), false);
  for (int64_t a : axes) reduced[a < 0 ? a + static_cast<int64_t>(shape.size()) : a] = true;
  std::vector<int64_t> keptShape = shape;
  int64_t count = 1;
  for (size_t d = 0; d < shape.size(); ++d)
    if (reduced[d]) keptShape[d] = 1, count *= shape[d];
  std::vector<double> sums(r.output.size(), 0.0);
  forEachIndex(shape, [&](const std::vector<int64_t>& i) {
    std::vector<int64_t> o = i;
    for (size_t d = 0; d < shape.size(); ++d)
      if (reduced[d]) o[d] = 0;
    sums[flatIndex(o, keptShape)] += r.inputs[0][flatIndex(i, shape)];
  });
  std::vector<float> expected;
  for (double s : sums) expected.push_back(static_cast<float>(op == "mean" ? s / count : s));
  expectClose(r.output, expected);
}

TEST(LowerReduce, MeanSpatialKeepdims) { checkReduce("mean", {2, 3, 5, 7}, {2, 3}, true, "[2,3,5,7]", "[2,3,1,1]"); }
TEST(LowerReduce, SumMiddleAxis) { checkReduce("sum", {2, 3, 5}, {1}, false, "[2,3,5]", "[2,5]"); }
TEST(LowerReduce, SumNonAdjacentAxes) { checkReduce("sum", {3, 4, 5}, {0, 2}, false, "[3,4,5]", "[4]"); }
TEST(LowerReduce, MeanLastNegativeAxis) { checkReduce("mean", {4, 6}, {-1}, false, "[4,6]", "[4]"); }
TEST(LowerReduce, SumEverything) { checkReduce("sum", {3, 4}, {0, 1}, false, "[3,4]", "[]"); }
TEST(LowerReduce, MeanLargeIsParallel) {
  checkReduce("mean", {8, 40, 30}, {1}, true, "[8,40,30]", "[8,1,30]");
}

void checkSoftmax(const std::vector<int64_t>& shape, int64_t axis, const std::string& shapeText, float scale) {
  std::string text = "graph(%x: f32" + shapeText + ") {\n  %y = softmax(%x) {axis=" + std::to_string(axis) +
                     "} : f32" + shapeText + "\n  return %y\n}\n";
  SCOPED_TRACE(text);
  auto r = runFirstNode(text, 17, -scale, scale);
  int64_t a = axis < 0 ? axis + static_cast<int64_t>(shape.size()) : axis;
  std::vector<float> expected(r.output.size());
  forEachIndex(shape, [&](const std::vector<int64_t>& i) {
    if (i[a] != 0) return;
    std::vector<int64_t> j = i;
    double m = -INFINITY, s = 0;
    for (j[a] = 0; j[a] < shape[a]; ++j[a]) m = std::max<double>(m, r.inputs[0][flatIndex(j, shape)]);
    for (j[a] = 0; j[a] < shape[a]; ++j[a]) s += std::exp(r.inputs[0][flatIndex(j, shape)] - m);
    for (j[a] = 0; j[a] < shape[a]; ++j[a])
      expected[flatIndex(j, shape)] = static_cast<float>(std::exp(r.inputs[0][flatIndex(j, shape)] - m) / s);
  });
  expectClose(r.output, expected);
}

TEST(LowerSoftmax, AxisOne) { checkSoftmax({2, 5, 3, 4}, 1, "[2,5,3,4]", 3); }
TEST(LowerSoftmax, LastAxisLargeValuesStayFinite) { checkSoftmax({3, 7}, -1, "[3,7]", 200); }
TEST(LowerSoftmax, LargeIsParallel) {
  checkSoftmax({64, 100}, 1, "[64,100]", 5);
  auto r = runFirstNode(R"(graph(%x: f32[64,100]) {
    %y = softmax(%x) {axis=-1} : f32[64,100]
    return %y
  })");
  EXPECT_EQ(testing::countLoops(r.func, tir::ForKind::Parallel), 1);
}

}  // namespace
}  // namespace kiln::core::lower
