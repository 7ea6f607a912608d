// Pooling schedules: packed (NCHW[x]c, vectorized over the channel block) against NCHW, and
// NCHW (tap ranges instead of bounds checks, vectorized global average) against a plain C++
// reference, through the interpreter and the JIT, on random windows (padding, stride, dilation,
// ceil mode, count_include_pad) and sizes that do not divide the tiles.
#include <random>

#include "core/lower/schedule.h"
#include "tests/unit/core/kernels_test_util.h"

namespace kiln::core::lower {
namespace {

using namespace testing;

int64_t channelBlockForTest(int64_t channels, int lanes) {
  LowerOptions o;
  o.vectorLanes = lanes;
  return channelBlock(channels, o);
}

struct PoolCase {
  std::string op = "max_pool2d";
  int64_t n = 1, c = 8, h = 9, w = 9, k = 3, s = 2, p = 1, d = 1;
  bool ceil = false, includePad = true;
  std::string str() const {
    return op + " x[" + std::to_string(n) + "," + std::to_string(c) + "," + std::to_string(h) + "," + std::to_string(w) +
           "] k=" + std::to_string(k) + " s=" + std::to_string(s) + " p=" + std::to_string(p) + " d=" +
           std::to_string(d) + (ceil ? " ceil" : "") + (includePad ? "" : " exclude_pad");
  }
  Attrs attrs() const {
    Attrs a{{"kernel", std::vector<int64_t>{k, k}}, {"stride", std::vector<int64_t>{s, s}},
            {"padding", std::vector<int64_t>{p, p}}, {"ceil_mode", int64_t{ceil}}};
    if (op == "max_pool2d") a.set("dilation", std::vector<int64_t>{d, d});
    else a.set("count_include_pad", int64_t{includePad});
    return a;
  }
};

/// PyTorch semantics in plain C++ (see ops_pool.cpp).
std::vector<float> referencePool(const PoolCase& pc, const runtime::Tensor& x, int64_t oh, int64_t ow) {
  std::vector<float> y;
  const float* xp = x.data<float>();
  for (int64_t nc = 0; nc < pc.n * pc.c; ++nc)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        double acc = pc.op == "max_pool2d" ? -INFINITY : 0.0;
        int64_t inside = 0;
        for (int64_t u = 0; u < pc.k; ++u)
          for (int64_t v = 0; v < pc.k; ++v) {
            int64_t ih = i * pc.s - pc.p + u * pc.d, iw = j * pc.s - pc.p + v * pc.d;
            if (ih < 0 || ih >= pc.h || iw < 0 || iw >= pc.w) continue;
            double e = xp[(nc * pc.h + ih) * pc.w + iw];
            acc = pc.op == "max_pool2d" ? std::max(acc, e) : acc + e;
            ++inside;
          }
        if (pc.op == "avg_pool2d") {
          int64_t hs = i * pc.s - pc.p, ws = j * pc.s - pc.p;
          int64_t he = std::min(hs + pc.k, pc.h + pc.p), we = std::min(ws + pc.k, pc.w + pc.p);
          int64_t count = pc.includePad ? (he - hs) * (we - ws) : std::max<int64_t>(inside, 1);
          acc /= static_cast<double>(count);
        }
        y.push_back(static_cast<float>(acc));
      }
  return y;
}

void checkPool(const PoolCase& pc, int lanes, bool interpreter) {
  SCOPED_TRACE(pc.str() + " lanes=" + std::to_string(lanes));
  LowerOptions options;
  options.vectorLanes = lanes;
  options.vectorRegisters = kiln::core::lower::vectorRegistersForLanes(lanes);
  runtime::Tensor x = randomTensor({pc.n, pc.c, pc.h, pc.w}, 17);
  // NCHW graph, and the same pooling on the packed layout between two transforms.
  Graph plain, packed;
  ValueId px = plain.addInput("x", TensorType{DType::Float32, x.shape()});
  ValueId py = plain.add(pc.op, {px}, pc.attrs());
  plain.setOutputs({py});
  int64_t block = channelBlockForTest(pc.c, lanes);
  std::string layout = "NCHW" + std::to_string(block) + "c";
  ValueId qx = packed.addInput("x", TensorType{DType::Float32, x.shape()});
  ValueId qp = packed.add("layout_transform", {qx}, Attrs{{"src", std::string("NCHW")}, {"dst", layout}});
  ValueId qy = packed.add(pc.op, {qp}, pc.attrs());
  packed.setOutputs({packed.add("layout_transform", {qy}, Attrs{{"src", layout}, {"dst", std::string("NCHW")}})});
  const Shape& ys = plain.type(py).shape;
  std::vector<float> expected = referencePool(pc, x, ys[2], ys[3]);
  for (Engine e : {Engine::Interpreter, Engine::Jit}) {
    if (e == Engine::Interpreter && !interpreter) continue;
    const char* name = e == Engine::Jit ? "jit" : "interpreter";
    EXPECT_TRUE(allClose(evalGraph(plain, {x}, e, options)[0], expected, 1e-5)) << "nchw " << name;
    EXPECT_TRUE(allClose(evalGraph(packed, {x}, e, options)[0], expected, 1e-5)) << "packed " << name;
  }
}

TEST(KernelsPool, ResNetStemMaxPool) { checkPool({"max_pool2d", 1, 64, 20, 20, 3, 2, 1, 1, false, true}, 16, true); }

TEST(KernelsPool, AvgPoolPaddingModes) {
  checkPool({"avg_pool2d", 2, 12, 7, 10, 3, 2, 1, 1, true, false}, 8, true);
  checkPool({"avg_pool2d", 1, 16, 8, 8, 2, 2, 0, 1, false, true}, 16, true);
}

TEST(KernelsPool, RandomWindows) {
  std::mt19937 rng(31);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int i = 0; i < 16; ++i) {
    PoolCase pc;
    pc.op = i % 2 ? "avg_pool2d" : "max_pool2d";
    pc.n = pick(1, 2), pc.c = pick(1, 24), pc.k = pick(1, 4), pc.s = pick(1, 3);
    pc.p = pick(0, pc.k / 2), pc.d = pc.op == "max_pool2d" ? pick(1, 2) : 1;
    pc.h = pick(pc.d * (pc.k - 1) + 1, 17), pc.w = pick(pc.d * (pc.k - 1) + 1, 23);
    pc.ceil = pick(0, 1) == 1, pc.includePad = pick(0, 1) == 1;
    checkPool(pc, std::vector<int>{4, 8, 16}[i % 3], i % 4 == 0);
  }
}

void checkAdaptive(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oh, int64_t ow, int lanes) {
  SCOPED_TRACE("adaptive " + std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w) + " -> " +
               std::to_string(oh) + "x" + std::to_string(ow) + " lanes=" + std::to_string(lanes));
  LowerOptions options;
  options.vectorLanes = lanes;
  runtime::Tensor x = randomTensor({n, c, h, w}, 23);
  std::vector<float> expected;
  for (int64_t nc = 0; nc < n * c; ++nc)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        int64_t hs = i * h / oh, he = ((i + 1) * h + oh - 1) / oh, ws = j * w / ow, we = ((j + 1) * w + ow - 1) / ow;
        double acc = 0;
        for (int64_t u = hs; u < he; ++u)
          for (int64_t v = ws; v < we; ++v) acc += x.data<float>()[(nc * h + u) * w + v];
        expected.push_back(static_cast<float>(acc / double((he - hs) * (we - ws))));
      }
  Attrs attrs{{"output_size", std::vector<int64_t>{oh, ow}}};
  Graph plain, packed;
  plain.setOutputs({plain.add("adaptive_avg_pool2d", {plain.addInput("x", TensorType{DType::Float32, x.shape()})}, attrs)});
  std::string layout = "NCHW" + std::to_string(channelBlockForTest(c, lanes)) + "c";
  ValueId qx = packed.addInput("x", TensorType{DType::Float32, x.shape()});
  ValueId qp = packed.add("layout_transform", {qx}, Attrs{{"src", std::string("NCHW")}, {"dst", layout}});
  ValueId qy = packed.add("adaptive_avg_pool2d", {qp}, attrs);
  packed.setOutputs({packed.add("layout_transform", {qy}, Attrs{{"src", layout}, {"dst", std::string("NCHW")}})});
  for (Engine e : {Engine::Interpreter, Engine::Jit}) {
    EXPECT_TRUE(allClose(evalGraph(plain, {x}, e, options)[0], expected, 1e-5)) << "nchw";
    EXPECT_TRUE(allClose(evalGraph(packed, {x}, e, options)[0], expected, 1e-5)) << "packed";
  }
}

TEST(KernelsPool, AdaptiveAverage) {
  checkAdaptive(1, 32, 7, 7, 1, 1, 16);   // global, plane of 49
  checkAdaptive(2, 24, 5, 3, 1, 1, 8);    // plane shorter than two vectors
  checkAdaptive(1, 12, 10, 9, 3, 4, 4);   // overlapping windows
}

}  // namespace
}  // namespace kiln::core::lower
