// Numerical tests of the conv2d, dense and matmul lowerings against plain C++ references.
#include "tests/unit/core/lower_test_util.h"

namespace kiln::core::lower {
namespace {

using testing::expectClose;
using testing::runFirstNode;

struct ConvParams {
  int64_t n, c, h, w, oc, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  bool bias;
};

std::vector<float> referenceConv(const ConvParams& p, const std::vector<float>& x, const std::vector<float>& wt,
                                 const std::vector<float>* b, int64_t oh, int64_t ow) {
  int64_t cg = p.c / p.groups, ocg = p.oc / p.groups;
  std::vector<float> y(static_cast<size_t>(p.n * p.oc * oh * ow));
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t o = 0; o < p.oc; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = b ? (*b)[o] : 0.0;
          int64_t g = o / ocg;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t u = 0; u < p.kh; ++u)
              for (int64_t v = 0; v < p.kw; ++v) {
                int64_t ih = i * p.sh - p.ph + u * p.dh, iw = j * p.sw - p.pw + v * p.dw;
                if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
                acc += double(x[((n * p.c + g * cg + ic) * p.h + ih) * p.w + iw]) *
                       wt[((o * cg + ic) * p.kh + u) * p.kw + v];
              }
          y[((n * p.oc + o) * oh + i) * ow + j] = static_cast<float>(acc);
        }
  return y;
}

void checkConv(const ConvParams& p) {
  int64_t oh = (p.h + 2 * p.ph - p.dh * (p.kh - 1) - 1) / p.sh + 1;
  int64_t ow = (p.w + 2 * p.pw - p.dw * (p.kw - 1) - 1) / p.sw + 1;
  auto shape = [](std::initializer_list<int64_t> d) {
    std::string s = "[";
    for (int64_t v : d) s += (s.size() > 1 ? "," : "") + std::to_string(v);
    return s + "]";
  };
  std::string text = "graph(%x: f32" + shape({p.n, p.c, p.h, p.w}) + ", %w: f32" +
                     shape({p.oc, p.c / p.groups, p.kh, p.kw}) + (p.bias ? ", %b: f32" + shape({p.oc}) : "") +
                     ") {\n  %y = conv2d(%x, %w" + (p.bias ? ", %b" : "") + ") {dilation=" + shape({p.dh, p.dw}) +
                     ", groups=" + std::to_string(p.groups) + ", padding=" + shape({p.ph, p.pw}) +
                     ", stride=" + shape({p.sh, p.sw}) + "} : f32" + shape({p.n, p.oc, oh, ow}) +
                     "\n  return %y\n}\n";
  SCOPED_TRACE(text);
  auto r = runFirstNode(text, 11);
  auto expected = referenceConv(p, r.inputs[0], r.inputs[1], p.bias ? &r.inputs[2] : nullptr, oh, ow);
  expectClose(r.output, expected);
}

TEST(LowerConv2d, StridePaddingDilationBias) {
  // 1x3x7x9, 5 output channels, stride 2, pad 1, dilation 2 → 1x5x3x4.
  checkConv({1, 3, 7, 9, 5, 3, 3, 2, 2, 1, 1, 2, 2, 1, true});
}

TEST(LowerConv2d, GroupsAsymmetricStrideNoBias) {
  checkConv({2, 4, 6, 5, 6, 3, 2, 1, 2, 1, 0, 1, 1, 2, false});
}

TEST(LowerConv2d, Depthwise) {
  checkConv({1, 6, 9, 8, 6, 3, 3, 2, 2, 1, 1, 1, 1, 6, true});
}

TEST(LowerConv2d, KernelWiderThanInputNoInterior) {
  checkConv({1, 2, 3, 3, 3, 5, 5, 1, 1, 2, 2, 1, 1, 1, true});
}

TEST(LowerConv2d, PointwiseNoPadding) {
  checkConv({2, 5, 4, 3, 7, 1, 1, 1, 1, 0, 0, 1, 1, 1, true});
}

TEST(LowerConv2d, LargeOutputIsParallelAndSplitsBorders) {
  ConvParams p{1, 8, 17, 19, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, true};
  checkConv(p);
  auto r = runFirstNode(R"(graph(%x: f32[1,8,17,19], %w: f32[16,8,3,3], %b: f32[16]) {
    %y = conv2d(%x, %w, %b) {padding=[1,1]} : f32[1,16,17,19]
    return %y
  })");
  EXPECT_EQ(testing::countLoops(r.func, tir::ForKind::Parallel), 1);
  // 3 row ranges × 3 column ranges, each with its own ow loop.
  EXPECT_GE(testing::countLoops(r.func, tir::ForKind::Serial), 9);
}

TEST(LowerDense, BatchedWithBias) {
  auto r = runFirstNode(R"(graph(%x: f32[2,3,7], %w: f32[5,7], %b: f32[5]) {
    %y = dense(%x, %w, %b) : f32[2,3,5]
    return %y
  })");
  std::vector<float> expected(30);
  for (int m = 0; m < 6; ++m)
    for (int n = 0; n < 5; ++n) {
      double acc = r.inputs[2][n];
      for (int k = 0; k < 7; ++k) acc += double(r.inputs[0][m * 7 + k]) * r.inputs[1][n * 7 + k];
      expected[m * 5 + n] = static_cast<float>(acc);
    }
  expectClose(r.output, expected);
}

TEST(LowerDense, VectorInputNoBias) {
  auto r = runFirstNode(R"(graph(%x: f32[7], %w: f32[4,7]) {
    %y = dense(%x, %w) : f32[4]
    return %y
  })");
  std::vector<float> expected(4);
  for (int n = 0; n < 4; ++n) {
    double acc = 0;
    for (int k = 0; k < 7; ++k) acc += double(r.inputs[0][k]) * r.inputs[1][n * 7 + k];
    expected[n] = static_cast<float>(acc);
  }
  expectClose(r.output, expected);
}

/// Reference numpy matmul on shapes a, b (rank ≥ 1).
std::vector<float> referenceMatmul(std::vector<int64_t> as, std::vector<int64_t> bs, const std::vector<float>& a,
                                   const std::vector<float>& b, std::vector<int64_t>& outShape) {
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec) as.insert(as.begin(), 1);
  if (bVec) bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  size_t rank = std::max(as.size(), bs.size());
  while (as.size() < rank) as.insert(as.begin(), 1);
  while (bs.size() < rank) bs.insert(bs.begin(), 1);
  std::vector<int64_t> batch(rank - 2);
  for (size_t d = 0; d + 2 < rank; ++d) batch[d] = std::max(as[d], bs[d]);
  int64_t numBatch = 1;
  for (int64_t d : batch) numBatch *= d;
  std::vector<float> out(static_cast<size_t>(numBatch * m * n));
  std::vector<int64_t> idx(batch.size());
  for (int64_t bi = 0; bi < numBatch; ++bi) {
    int64_t rem = bi;
    for (size_t d = batch.size(); d-- > 0;) {
      idx[d] = rem % batch[d];
      rem /= batch[d];
    }
    int64_t aOff = 0, bOff = 0;
    for (size_t d = 0; d < batch.size(); ++d) {
      aOff = aOff * as[d] + (as[d] == 1 ? 0 : idx[d]);
      bOff = bOff * bs[d] + (bs[d] == 1 ? 0 : idx[d]);
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < k; ++q) acc += double(a[(aOff * m + i) * k + q]) * b[(bOff * k + q) * n + j];
        out[(bi * m + i) * n + j] = static_cast<float>(acc);
      }
  }
  outShape = batch;
  if (!aVec) outShape.push_back(m);
  if (!bVec) outShape.push_back(n);
  return out;
}

void checkMatmul(const std::string& aType, const std::string& bType, const std::string& outType,
                 std::vector<int64_t> as, std::vector<int64_t> bs, std::vector<int64_t> expectShape) {
  std::string text = "graph(%a: f32" + aType + ", %b: f32" + bType + ") {\n  %y = matmul(%a, %b) : f32" + outType +
                     "\n  return %y\n}\n";
  SCOPED_TRACE(text);
  auto r = runFirstNode(text, 5);
  std::vector<int64_t> shape;
  auto expected = referenceMatmul(as, bs, r.inputs[0], r.inputs[1], shape);
  EXPECT_EQ(shape, expectShape);
  expectClose(r.output, expected);
}

TEST(LowerMatmul, Plain2D) { checkMatmul("[7,3]", "[3,2]", "[7,2]", {7, 3}, {3, 2}, {7, 2}); }
TEST(LowerMatmul, VectorDotVector) { checkMatmul("[5]", "[5]", "[]", {5}, {5}, {}); }
TEST(LowerMatmul, MatrixTimesVector) { checkMatmul("[3,4]", "[4]", "[3]", {3, 4}, {4}, {3}); }
TEST(LowerMatmul, VectorTimesBatchedMatrix) { checkMatmul("[4]", "[2,4,5]", "[2,5]", {4}, {2, 4, 5}, {2, 5}); }
TEST(LowerMatmul, BatchBroadcast) {
  checkMatmul("[2,1,3,4]", "[3,4,6]", "[2,3,3,6]", {2, 1, 3, 4}, {3, 4, 6}, {2, 3, 3, 6});
}
TEST(LowerMatmul, ThreeDimensionalBatchBroadcastLeft) {
  checkMatmul("[1,5,3]", "[4,3,2]", "[4,5,2]", {1, 5, 3}, {4, 3, 2}, {4, 5, 2});
}

TEST(LowerMatmul, LargeOutputIsParallel) {
  auto r = runFirstNode(R"(graph(%a: f32[2,40,3], %b: f32[3,70]) {
    %y = matmul(%a, %b) : f32[2,40,70]
    return %y
  })");
  EXPECT_EQ(testing::countLoops(r.func, tir::ForKind::Parallel), 1);
  std::vector<int64_t> shape;
  expectClose(r.output, referenceMatmul({2, 40, 3}, {3, 70}, r.inputs[0], r.inputs[1], shape));
}

}  // namespace
}  // namespace kiln::core::lower
