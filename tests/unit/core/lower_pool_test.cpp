// Numerical tests of max_pool2d, avg_pool2d and adaptive_avg_pool2d against references that
// follow PyTorch's CPU kernels.
#include "tests/unit/core/lower_test_util.h"

namespace kiln::core::lower {
namespace {

using testing::expectClose;
using testing::runFirstNode;

struct PoolParams {
  int64_t n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw;
  bool ceil, includePad;
  int64_t oh, ow;  // expected output size
};

std::string poolText(const std::string& op, const PoolParams& p) {
  auto pair = [](int64_t a, int64_t b) { return "[" + std::to_string(a) + "," + std::to_string(b) + "]"; };
  std::string attrs = "ceil_mode=" + std::to_string(p.ceil) + ", kernel=" + pair(p.kh, p.kw) +
                      ", padding=" + pair(p.ph, p.pw) + ", stride=" + pair(p.sh, p.sw);
  if (op == "max_pool2d") attrs += ", dilation=" + pair(p.dh, p.dw);
  else attrs += ", count_include_pad=" + std::to_string(p.includePad);
  std::string in = "[" + std::to_string(p.n) + "," + std::to_string(p.c) + "," + std::to_string(p.h) + "," +
                   std::to_string(p.w) + "]";
  std::string out = "[" + std::to_string(p.n) + "," + std::to_string(p.c) + "," + std::to_string(p.oh) + "," +
                    std::to_string(p.ow) + "]";
  return "graph(%x: f32" + in + ") {\n  %y = " + op + "(%x) {" + attrs + "} : f32" + out + "\n  return %y\n}\n";
}

std::vector<float> referenceMaxPool(const PoolParams& p, const std::vector<float>& x) {
  std::vector<float> y;
  for (int64_t nc = 0; nc < p.n * p.c; ++nc)
    for (int64_t i = 0; i < p.oh; ++i)
      for (int64_t j = 0; j < p.ow; ++j) {
        float m = -INFINITY;
        for (int64_t u = 0; u < p.kh; ++u)
          for (int64_t v = 0; v < p.kw; ++v) {
            int64_t ih = i * p.sh - p.ph + u * p.dh, iw = j * p.sw - p.pw + v * p.dw;
            if (ih >= 0 && ih < p.h && iw >= 0 && iw < p.w) m = std::max(m, x[(nc * p.h + ih) * p.w + iw]);
          }
        y.push_back(m);
      }
  return y;
}

// PyTorch's avg_pool2d (aten/src/ATen/native/cpu/AvgPoolKernel.cpp).
std::vector<float> referenceAvgPool(const PoolParams& p, const std::vector<float>& x) {
  std::vector<float> y;
  for (int64_t nc = 0; nc < p.n * p.c; ++nc)
    for (int64_t i = 0; i < p.oh; ++i)
      for (int64_t j = 0; j < p.ow; ++j) {
        int64_t ih0 = i * p.sh - p.ph, iw0 = j * p.sw - p.pw;
        int64_t ih1 = std::min(ih0 + p.kh, p.h + p.ph), iw1 = std::min(iw0 + p.kw, p.w + p.pw);
        int64_t poolSize = (ih1 - ih0) * (iw1 - iw0);
        ih0 = std::max<int64_t>(ih0, 0), iw0 = std::max<int64_t>(iw0, 0);
        ih1 = std::min(ih1, p.h), iw1 = std::min(iw1, p.w);
        if (ih0 >= ih1 || iw0 >= iw1) {
          y.push_back(0);
          continue;
        }
        double sum = 0;
        for (int64_t ih = ih0; ih < ih1; ++ih)
          for (int64_t iw = iw0; iw < iw1; ++iw) sum += x[(nc * p.h + ih) * p.w + iw];
        int64_t divisor = p.includePad ? poolSize : (ih1 - ih0) * (iw1 - iw0);
        y.push_back(static_cast<float>(sum / divisor));
      }
  return y;
}

TEST(LowerMaxPool2d, CeilMode) {
  PoolParams p{1, 2, 8, 9, 3, 3, 2, 2, 1, 1, 1, 1, true, true, 5, 5};
  auto r = runFirstNode(poolText("max_pool2d", p));
  expectClose(r.output, referenceMaxPool(p, r.inputs[0]));
}

TEST(LowerMaxPool2d, DilationAndPadding) {
  PoolParams p{1, 3, 6, 7, 2, 2, 1, 1, 1, 1, 2, 2, false, true, 6, 7};
  auto r = runFirstNode(poolText("max_pool2d", p));
  expectClose(r.output, referenceMaxPool(p, r.inputs[0]));
}

TEST(LowerMaxPool2d, ResNetStemIsParallel) {
  PoolParams p{1, 4, 40, 37, 3, 3, 2, 2, 1, 1, 1, 1, false, true, 20, 19};
  auto r = runFirstNode(poolText("max_pool2d", p));
  expectClose(r.output, referenceMaxPool(p, r.inputs[0]));
  EXPECT_EQ(testing::countLoops(r.func, tir::ForKind::Parallel), 0);  // 1520 outputs: serial
  PoolParams big{2, 16, 40, 37, 3, 3, 2, 2, 1, 1, 1, 1, false, true, 20, 19};
  auto rb = runFirstNode(poolText("max_pool2d", big));
  expectClose(rb.output, referenceMaxPool(big, rb.inputs[0]));
  EXPECT_EQ(testing::countLoops(rb.func, tir::ForKind::Parallel), 1);
}

TEST(LowerAvgPool2d, CeilModeCountIncludePad) {
  PoolParams p{2, 3, 8, 9, 3, 3, 2, 2, 1, 1, 1, 1, true, true, 5, 5};
  auto r = runFirstNode(poolText("avg_pool2d", p));
  expectClose(r.output, referenceAvgPool(p, r.inputs[0]));
}

TEST(LowerAvgPool2d, CeilModeExcludePad) {
  PoolParams p{2, 3, 8, 9, 3, 3, 2, 2, 1, 1, 1, 1, true, false, 5, 5};
  auto r = runFirstNode(poolText("avg_pool2d", p));
  expectClose(r.output, referenceAvgPool(p, r.inputs[0]));
}

TEST(LowerAvgPool2d, CeilWindowPastPaddedInputShrinksDivisor) {
  // The last window starts at 4 and would cover rows 4..6 of a 6-row input with no padding:
  // PyTorch divides by the 2 rows inside input + padding even with count_include_pad.
  for (bool include : {true, false}) {
    PoolParams p{1, 1, 6, 6, 3, 3, 2, 2, 0, 0, 1, 1, true, include, 3, 3};
    auto r = runFirstNode(poolText("avg_pool2d", p));
    auto expected = referenceAvgPool(p, r.inputs[0]);
    expectClose(r.output, expected);
    float corner = (r.inputs[0][4 * 6 + 4] + r.inputs[0][4 * 6 + 5] + r.inputs[0][5 * 6 + 4] + r.inputs[0][5 * 6 + 5]) / 4;
    EXPECT_NEAR(r.output[8], corner, 1e-5);
  }
}

TEST(LowerAvgPool2d, AsymmetricKernelExcludePad) {
  PoolParams p{1, 2, 7, 6, 2, 3, 2, 2, 1, 1, 1, 1, false, false, 4, 3};
  auto r = runFirstNode(poolText("avg_pool2d", p));
  expectClose(r.output, referenceAvgPool(p, r.inputs[0]));
  p.includePad = true;
  auto r2 = runFirstNode(poolText("avg_pool2d", p));
  expectClose(r2.output, referenceAvgPool(p, r2.inputs[0]));
}

TEST(LowerAvgPool2d, DilationIsUnsupported) {
  Graph g = parseGraph(R"(graph(%x: f32[1,1,8,8]) {
    %y = avg_pool2d(%x) {dilation=[2,2], kernel=[2,2]} : f32[1,1,3,3] loc("m.py:7")
    return %y
  })");
  try {
    lowerNode(g, 0, "f");
    FAIL() << "expected an Unsupported error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    std::string msg = e.what();
    EXPECT_NE(msg.find("avg_pool2d"), std::string::npos) << msg;
    EXPECT_NE(msg.find("m.py:7"), std::string::npos) << msg;
  }
}

std::vector<float> referenceAdaptive(int64_t nc, int64_t h, int64_t w, int64_t oh, int64_t ow, const std::vector<float>& x) {
  std::vector<float> y;
  for (int64_t c = 0; c < nc; ++c)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        int64_t h0 = (i * h) / oh, h1 = ((i + 1) * h + oh - 1) / oh;
        int64_t w0 = (j * w) / ow, w1 = ((j + 1) * w + ow - 1) / ow;
        double sum = 0;
        for (int64_t a = h0; a < h1; ++a)
          for (int64_t b = w0; b < w1; ++b) sum += x[(c * h + a) * w + b];
        y.push_back(static_cast<float>(sum / double((h1 - h0) * (w1 - w0))));
      }
  return y;
}

TEST(LowerAdaptiveAvgPool2d, SevenByTenToTwoByThree) {
  auto r = runFirstNode(R"(graph(%x: f32[2,3,7,10]) {
    %y = adaptive_avg_pool2d(%x) {output_size=[2,3]} : f32[2,3,2,3]
    return %y
  })");
  expectClose(r.output, referenceAdaptive(6, 7, 10, 2, 3, r.inputs[0]));
}

TEST(LowerAdaptiveAvgPool2d, GlobalAndUpsampling) {
  auto r = runFirstNode(R"(graph(%x: f32[1,5,7,7]) {
    %y = adaptive_avg_pool2d(%x) {output_size=[1,1]} : f32[1,5,1,1]
    return %y
  })");
  expectClose(r.output, referenceAdaptive(5, 7, 7, 1, 1, r.inputs[0]));
  auto r2 = runFirstNode(R"(graph(%x: f32[1,2,3,2]) {
    %y = adaptive_avg_pool2d(%x) {output_size=[5,4]} : f32[1,2,5,4]
    return %y
  })");
  expectClose(r2.output, referenceAdaptive(2, 3, 2, 5, 4, r2.inputs[0]));
}

}  // namespace
}  // namespace kiln::core::lower
