// Numerical tests of the pad lowering (core/lower/ops_pad.cpp) in every mode, with negative pads,
// on odd shapes, against a reference written here from the modes' definitions (numpy.pad's
// "constant", "reflect", "edge" and "wrap"), and its shape inference's errors.
#include "tests/unit/core/lower_test_util.h"

namespace kiln::core::lower {
namespace {

using testing::expectClose;
using testing::flatIndex;
using testing::runFirstNode;

/// The input index output index `o` reads along an axis of size n padded by `before`, or -1 for
/// the constant: walks the mode's definition step by step instead of using a closed formula.
int64_t referenceSource(const std::string& mode, int64_t o, int64_t before, int64_t n) {
  int64_t i = o - before;
  if (i >= 0 && i < n) return i;
  if (mode == "constant") return -1;
  if (mode == "replicate") return i < 0 ? 0 : n - 1;
  if (mode == "circular") {
    while (i < 0) i += n;
    while (i >= n) i -= n;
    return i;
  }
  // reflect: bounce off the edges (without repeating them) until inside.
  while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
  return i;
}

std::vector<float> referencePad(const std::vector<float>& x, const std::vector<int64_t>& xs,
                                const std::vector<int64_t>& pads, const std::string& mode, float value) {
  size_t rank = xs.size();
  std::vector<int64_t> ys(rank);
  int64_t numel = 1;
  for (size_t d = 0; d < rank; ++d) numel *= ys[d] = xs[d] + pads[d] + pads[rank + d];
  std::vector<float> y(static_cast<size_t>(numel));
  std::vector<int64_t> idx(rank), src(rank);
  for (int64_t f = 0; f < numel; ++f) {
    int64_t rem = f;
    for (size_t d = rank; d-- > 0;) {
      idx[d] = rem % ys[d];
      rem /= ys[d];
    }
    bool inside = true;
    for (size_t d = 0; d < rank; ++d) {
      src[d] = referenceSource(mode, idx[d], pads[d], xs[d]);
      inside = inside && src[d] >= 0;
    }
    y[f] = inside ? x[flatIndex(src, xs)] : value;
  }
  return y;
}

std::string shapeText(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "," : "") + std::to_string(s[i]);
  return t + "]";
}

void checkPad(const std::vector<int64_t>& xs, const std::vector<int64_t>& pads, const std::string& mode,
              double value = 0.0) {
  SCOPED_TRACE(mode + " " + shapeText(xs) + " pads " + shapeText(pads));
  std::vector<int64_t> ys = xs;
  for (size_t d = 0; d < xs.size(); ++d) ys[d] += pads[d] + pads[xs.size() + d];
  std::string text = "graph(%x: f32" + shapeText(xs) + ") {\n  %y = pad(%x) {mode=\"" + mode +
                     "\", pads=" + shapeText(pads) + ", value=" + std::to_string(value) + "} : f32" + shapeText(ys) +
                     "\n  return %y\n}";
  auto r = runFirstNode(text);
  expectClose(r.output, referencePad(r.inputs[0], xs, pads, mode, static_cast<float>(value)), 0);
}

TEST(LowerPad, ConstantOnAnyAxesWithCropping) {
  checkPad({2, 3, 5, 7}, {0, 1, 2, 0, 0, 0, 1, 3}, "constant", 0.75);
  checkPad({3, 4}, {-1, 2, 1, -3}, "constant", -2);
  checkPad({2, 5, 6}, {0, 0, -2, 0, 0, -1}, "constant");  // only cropping: no fill
  checkPad({1, 16, 19, 21}, {0, 0, 2, 3, 0, 0, 1, 2}, "constant");  // parallel
}

TEST(LowerPad, ReflectIncludingCropOnTheOtherSide) {
  checkPad({2, 3, 5, 7}, {0, 0, 4, 6, 0, 0, 2, 1}, "reflect");
  checkPad({4, 9}, {0, 2, 0, -3}, "reflect");
  checkPad({1, 8, 17, 19}, {0, 0, 3, 3, 0, 0, 3, 3}, "reflect");
}

TEST(LowerPad, ReplicateAndCircular) {
  checkPad({2, 3, 5, 7}, {0, 1, 3, 2, 1, 0, 2, 5}, "replicate");
  checkPad({1, 2, 3, 4, 5}, {0, 0, 2, 1, 3, 0, 0, 1, 2, 4}, "replicate");
  checkPad({2, 3, 5, 7}, {0, 0, 2, 6, 0, 0, 4, 3}, "circular");
  checkPad({3, 4}, {0, 9, 0, 6}, "circular");  // wraps more than once (ONNX's wrap allows it)
  checkPad({5, 6}, {-2, 1, 3, -1}, "circular");
}

TEST(LowerPad, SmallCasesByHand) {
  auto r = runFirstNode(R"(graph(%x: f32[1,3]) {
    %y = pad(%x) {mode="reflect", pads=[0,2,0,1]} : f32[1,6]
    return %y
  })");
  const std::vector<float>& x = r.inputs[0];
  expectClose(r.output, {x[2], x[1], x[0], x[1], x[2], x[1]}, 0);
  r = runFirstNode(R"(graph(%x: f32[3]) {
    %y = pad(%x) {mode="circular", pads=[2,1]} : f32[6]
    return %y
  })");
  expectClose(r.output, {r.inputs[0][1], r.inputs[0][2], r.inputs[0][0], r.inputs[0][1], r.inputs[0][2], r.inputs[0][0]},
              0);
}

TEST(LowerPad, ShapeInferenceRejectsImpossiblePads) {
  auto errorOf = [](const std::string& attrs, const std::string& out) {
    try {
      parseGraph("graph(%x: f32[2,4]) {\n  %y = pad(%x) {" + attrs + "} : f32" + out + "\n  return %y\n}");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(errorOf(R"(mode="reflect", pads=[0,4,0,0])", "[2,8]").find("reflect padding (4, 0) of axis 1 must be less "
                                                                          "than its size 4"),
            std::string::npos);
  EXPECT_NE(errorOf(R"(mode="mirror", pads=[0,1,0,1])", "[2,6]").find("pad mode 'mirror' is not one of"),
            std::string::npos);
  EXPECT_NE(errorOf(R"(mode="constant", pads=[1,1])", "[4,4]").find("pad needs 4 pads"), std::string::npos);
  EXPECT_NE(errorOf(R"(mode="constant", pads=[0,-3,0,-2])", "[2,0]").find("below size 0"), std::string::npos);
}

}  // namespace
}  // namespace kiln::core::lower
