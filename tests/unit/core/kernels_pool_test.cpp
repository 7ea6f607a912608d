// Pooling schedules: packed (NCHW[x]c, vectorized over the channel block) against NCHW, and
// NCHW (tap ranges instead of bounds checks, vectorized global average) against a plain C++
// reference, through the interpreter and the JIT, on random windows (padding, stride, dilation,
// ceil mode, count_include_pad) and sizes that do not divide the tiles.
#include <random>

#include "core/ir/parser.h"
#include "core/lower/conv_search.h"
#include "core/lower/gemm_search.h"
#include "core/lower/nest_search.h"
#include "core/lower/schedule.h"
#include "runtime/error.h"
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

/// adaptive_avg_pool2d of NCHW `x` to oh × ow in plain C++.
std::vector<float> referenceAdaptive(const runtime::Tensor& x, int64_t oh, int64_t ow) {
  const int64_t nc = x.shape()[0] * x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  std::vector<float> expected;
  for (int64_t p = 0; p < nc; ++p)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        int64_t hs = i * h / oh, he = ((i + 1) * h + oh - 1) / oh, ws = j * w / ow, we = ((j + 1) * w + ow - 1) / ow;
        double acc = 0;
        for (int64_t u = hs; u < he; ++u)
          for (int64_t v = ws; v < we; ++v) acc += x.data<float>()[(p * h + u) * w + v];
        expected.push_back(static_cast<float>(acc / double((he - hs) * (we - ws))));
      }
  return expected;
}

void checkAdaptive(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oh, int64_t ow, int lanes) {
  SCOPED_TRACE("adaptive " + std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w) + " -> " +
               std::to_string(oh) + "x" + std::to_string(ow) + " lanes=" + std::to_string(lanes));
  LowerOptions options;
  options.vectorLanes = lanes;
  runtime::Tensor x = randomTensor({n, c, h, w}, 23);
  std::vector<float> expected = referenceAdaptive(x, oh, ow);
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

// ---- the window nest (conv_search.h) ---------------------------------------------------------

/// The packed pooling graph of `pc` on input [n, c/block, h, w, block] (as alter-layout leaves it),
/// the pool's output the graph's.
Graph packedPoolGraph(const PoolCase& pc, int64_t block) {
  Graph g;
  ValueId x = g.addInput("x", TensorType{DType::Float32, {pc.n, pc.c / block, pc.h, pc.w, block}});
  g.setOutputs({g.add(pc.op, {x}, pc.attrs())});
  return g;
}

/// The kernel of `module` whose tuning key starts with `kind` + ":" (null when none has).
const tir::PrimFunc* kernelOfKind(const LoweredModule& module, const std::string& kind) {
  for (const tir::PrimFunc& f : module.funcs)
    if (f.attrs.count("tune_key") && f.attrs.at("tune_key").rfind(kind + ":", 0) == 0) return &f;
  return nullptr;
}
const tir::PrimFunc* poolKernel(const LoweredModule& module) { return kernelOfKind(module, "pool"); }
const tir::PrimFunc* windowKernel(const LoweredModule& module) { return kernelOfKind(module, "window"); }

/// The packed input's elements in NCHW order, as referencePool reads them.
runtime::Tensor unpacked(const runtime::Tensor& x) {
  const Shape& s = x.shape();
  runtime::Tensor y = runtime::Tensor::zeros(DType::Float32, {s[0], s[1] * s[4], s[2], s[3]});
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t cb = 0; cb < s[1]; ++cb)
      for (int64_t h = 0; h < s[2]; ++h)
        for (int64_t w = 0; w < s[3]; ++w)
          for (int64_t l = 0; l < s[4]; ++l)
            y.data<float>()[((n * s[1] * s[4] + cb * s[4] + l) * s[2] + h) * s[3] + w] =
                x.data<float>()[(((n * s[1] + cb) * s[2] + h) * s[3] + w) * s[4] + l];
  return y;
}

// Every annotation the tuner may pick (tile mi, loop order po, launch granularity) computes the
// pool, in the JIT, for windows with padding, stride, dilation, ceil mode and both divisors.
TEST(KernelsPool, EveryAnnotationOfTheWindowNestComputesThePool) {
  const std::vector<PoolCase> cases = {
      {"max_pool2d", 1, 16, 11, 13, 3, 2, 1, 1, false, true},
      {"avg_pool2d", 2, 16, 9, 10, 3, 2, 1, 1, true, false},
      {"avg_pool2d", 1, 24, 7, 9, 2, 1, 1, 1, true, true},
      {"max_pool2d", 1, 8, 12, 10, 3, 1, 1, 2, false, true},
  };
  for (const PoolCase& pc : cases) {
    SCOPED_TRACE(pc.str());
    const int64_t block = 8;
    LowerOptions options;
    options.vectorLanes = 8;
    options.vectorRegisters = vectorRegistersForLanes(8);
    Graph g = packedPoolGraph(pc, block);
    LoweredModule untuned = lowerGraph(g, options);
    const tir::PrimFunc* kernel = poolKernel(untuned);
    ASSERT_NE(kernel, nullptr);
    ASSERT_TRUE(kernel->attrs.count("trace"));  // scheduled by the window nest's sketch
    const std::string key = kernel->attrs.at("tune_key");
    EXPECT_EQ(key, "pool:" + kernel->attrs.at("workload_key"));
    const ConvSketchShape s = poolSketchShapeOfKey(key);
    runtime::Tensor x = randomTensor(g.type(g.inputs()[0]).shape, 5);
    const Shape& ys = g.type(g.outputs()[0]).shape;
    std::vector<float> expected = referencePool(pc, unpacked(x), ys[2], ys[3]);
    std::vector<Knobs> annotations = convSketchAnnotations(s, options.vectorRegisters);
    ASSERT_GE(annotations.size(), 4u);
    for (Knobs k : annotations) {
      if (k.at("mi") % 3 == 0) k["par_chunks"] = 1;  // a granularity other than the runtime's default
      SCOPED_TRACE(knobsText(k));
      LoweredModule tuned = lowerWithRecord(g, options, key, k);
      ASSERT_NE(poolKernel(tuned), nullptr);
      EXPECT_EQ(poolKernel(tuned)->attrs.at("schedule"), knobsText(k));
      // What the tuner records for this annotation, built from the key alone.
      EXPECT_EQ(poolKernel(tuned)->attrs.at("trace"), sketchTrace(key, k, 8, options.vectorRegisters).str());
      runtime::Tensor got = evalModule(tuned, {x}, Engine::Jit)[0];
      // Packed output [n, c/8, oh, ow, 8] against the NCHW reference.
      std::vector<float> want(static_cast<size_t>(got.numel()));
      const int64_t oh = ys[2], ow = ys[3], cb = ys[1];
      for (int64_t n = 0; n < pc.n; ++n)
        for (int64_t b = 0; b < cb; ++b)
          for (int64_t i = 0; i < oh * ow; ++i)
            for (int64_t l = 0; l < block; ++l)
              want[((n * cb + b) * oh * ow + i) * block + l] =
                  expected[(n * pc.c + b * block + l) * oh * ow + i];
      EXPECT_TRUE(allClose(got, want, 1e-5));
    }
  }
}

// A pool key's workload rebuilds the kernel as a task graph of its own (what the tuner measures).
// An average divides before a fused epilogue, also when a record's trace leaves the output read
// back (the plain window nest then runs). An adaptive pool of uneven windows and NCHW pools
// have no regioned window nest: they are plain window nests (nest_search.h).
TEST(KernelsPool, AWindowNestKeyDescribesItsKernel) {
  const char* text = R"(graph(%x: f32[1,2,7,7,16], %y: f32[1,2,4,4,16]) {
  group @avg {
    %a = avg_pool2d(%x) {kernel=[3,3], stride=[2,2], padding=[1,1], count_include_pad=0} : f32[1,2,4,4,16]
    %b = add(%a, %y) : f32[1,2,4,4,16]
  }
  return %b
}
)";
  Graph g = parseGraph(text);
  LowerOptions options;
  options.vectorLanes = 16;
  runtime::Tensor x = randomTensor({1, 2, 7, 7, 16}, 3), y = randomTensor({1, 2, 4, 4, 16}, 4);
  PoolCase pc{"avg_pool2d", 1, 32, 7, 7, 3, 2, 1, 1, false, false};
  std::vector<float> pooled = referencePool(pc, unpacked(x), 4, 4), want;
  for (int64_t i = 0; i < y.numel(); ++i) {
    const int64_t l = i % 16, p = (i / 16) % 16, b = i / 256;
    want.push_back(pooled[(b * 16 + l) * 16 + p] + y.data<float>()[i]);
  }
  LoweredModule module = lowerGraph(g, options);
  const tir::PrimFunc* kernel = poolKernel(module);
  ASSERT_NE(kernel, nullptr);
  EXPECT_TRUE(allClose(evalModule(module, {x, y}, Engine::Jit)[0], want, 1e-5));
  const std::string key = kernel->attrs.at("tune_key");
  EXPECT_EQ(parseTuneKey(key).kind, "pool");
  const ConvSketchShape s = poolSketchShapeOfKey(key);
  EXPECT_EQ(s.pool, ConvSketchShape::Pool::Sum);
  EXPECT_EQ(s.groups, 2);
  EXPECT_EQ(s.lanes, 16);
  EXPECT_EQ(s.rows * s.pixels, 16);
  EXPECT_EQ(s.kh * s.kw, 9);
  int withKey = 0;
  for (const tir::PrimFunc& f : lowerGraph(nestTaskGraph(key), options).funcs)
    withKey += f.attrs.count("tune_key") && f.attrs.at("tune_key") == key;
  EXPECT_EQ(withKey, 1);

  // A record's trace that keeps the sum in the output: the plain window nest instead, under its own
  // key, with its own trace.
  auto configs = std::make_shared<ScheduleConfigs>();
  configs->traces[key] = "parallel(g)";
  options.schedules = configs;
  LoweredModule replayed = lowerGraph(g, options);
  EXPECT_EQ(poolKernel(replayed), nullptr);
  const tir::PrimFunc* plain = windowKernel(replayed);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->attrs.at("tune_key"), windowNestTuneKey(kernel->attrs.at("workload_key")));
  EXPECT_EQ(plain->attrs.at("schedule"), "par=0,vl=16");  // 512 outputs of 9 taps: not worth threads
  EXPECT_TRUE(allClose(evalModule(replayed, {x, y}, Engine::Jit)[0], want, 1e-5));
  options.schedules = nullptr;

  for (const char* none :
       {"graph(%x: f32[1,2,10,9,16]) {\n  %a = adaptive_avg_pool2d(%x) {output_size=[3,4]} : "
        "f32[1,2,3,4,16]\n"
        "  return %a\n}\n",
        "graph(%x: f32[1,32,8,8]) {\n  %a = max_pool2d(%x) {kernel=[2,2]} : f32[1,32,4,4]\n  return "
        "%a\n}\n"}) {
    SCOPED_TRACE(none);
    LoweredModule module = lowerGraph(parseGraph(none), options);
    EXPECT_EQ(poolKernel(module), nullptr);
    EXPECT_NE(windowKernel(module), nullptr);  // the plain window nest
  }
  EXPECT_THROW(poolSketchShapeOfKey("reduce:fused[mean{axes=[1],keepdims=1}($0:f32[3,37])->f32[3,1]]"),
               kiln::Error);
  EXPECT_THROW(poolSketchShapeOfKey("pool:fused[relu($0:f32[4])->f32[4]]"), kiln::Error);
  EXPECT_THROW(sketchTrace(key, {{"mi", 0}, {"po", 1}}, 16, 32), kiln::Error);  // no such tile
}

// A max pool of integers (a quantized model's u8 activations) is the same window nest: keyed,
// traced as the tuner records it, and every annotation computes the maximum (padding never wins,
// even over 0).
TEST(KernelsPool, AnIntegerMaxPoolIsTheWindowNestToo) {
  Graph g = parseGraph(R"(graph(%x: u8[1,3,9,11,16]) {
  %a = max_pool2d(%x) {kernel=[3,3], stride=[2,2], padding=[1,1]} : u8[1,3,5,6,16]
  return %a
})");
  std::mt19937 rng(9);
  runtime::Tensor x = runtime::Tensor::zeros(DType::UInt8, {1, 3, 9, 11, 16});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<uint8_t>()[i] = static_cast<uint8_t>(rng() % 256);
  std::vector<float> want;
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t oh = 0; oh < 5; ++oh)
      for (int64_t ow = 0; ow < 6; ++ow)
        for (int64_t l = 0; l < 16; ++l) {
          int best = -1;
          for (int64_t ih = oh * 2 - 1; ih <= oh * 2 + 1; ++ih)
            for (int64_t iw = ow * 2 - 1; iw <= ow * 2 + 1; ++iw)
              if (ih >= 0 && ih < 9 && iw >= 0 && iw < 11)
                best = std::max<int>(best, x.data<uint8_t>()[((b * 9 + ih) * 11 + iw) * 16 + l]);
          want.push_back(static_cast<float>(best));
        }
  LowerOptions options;
  options.vectorLanes = 16;
  options.vectorRegisters = 32;
  LoweredModule untuned = lowerGraph(g, options);
  ASSERT_NE(poolKernel(untuned), nullptr);
  const std::string key = poolKernel(untuned)->attrs.at("tune_key");
  const ConvSketchShape s = poolSketchShapeOfKey(key);
  EXPECT_EQ(s.pool, ConvSketchShape::Pool::Max);
  for (const Knobs& k : convSketchAnnotations(s, options.vectorRegisters)) {
    SCOPED_TRACE(knobsText(k));
    LoweredModule tuned = lowerWithRecord(g, options, key, k);
    ASSERT_NE(poolKernel(tuned), nullptr);
    EXPECT_EQ(poolKernel(tuned)->attrs.at("trace"), sketchTrace(key, k, 16, 32).str());
    for (Engine engine : {Engine::Interpreter, Engine::Jit}) {
      runtime::Tensor got = evalModule(tuned, {x}, engine)[0];
      ASSERT_EQ(got.dtype(), DType::UInt8);
      std::vector<float> values;
      for (int64_t i = 0; i < got.numel(); ++i) values.push_back(got.data<uint8_t>()[i]);
      EXPECT_EQ(values, want);
    }
  }
}

// ---- the plain window nest (nest_search.h) ---------------------------------------------------

/// `nchw` [n, c, oh, ow] values in the packed order [n, c/block, oh, ow, block].
std::vector<float> packedOrder(const std::vector<float>& nchw, int64_t n, int64_t c, int64_t plane,
                               int64_t block) {
  std::vector<float> packed(nchw.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < plane; ++p)
        packed[((i * (c / block) + ch / block) * plane + p) * block + ch % block] =
            nchw[(i * c + ch) * plane + p];
  return packed;
}

// Pools the regioned window nest does not take (NCHW inputs with padding, dilation, ceil mode and
// both divisors; adaptive windows of uneven sizes, packed and NCHW; a fused epilogue) are the
// plain window nest: keyed "window:" + their workload, traced as the tuner records it, and every
// annotation computes the pool, interpreted and JIT-compiled.
TEST(KernelsPool, EveryAnnotationOfThePlainWindowNestComputesThePool) {
  struct Case {
    std::string text;
    std::vector<Shape> inputs;
    std::function<std::vector<float>(const std::vector<runtime::Tensor>&)> expected;
  };
  const PoolCase maxCase{"max_pool2d", 2, 5, 11, 13, 3, 2, 1, 2, true, true};
  const PoolCase avgCase{"avg_pool2d", 1, 3, 9, 10, 3, 2, 1, 1, true, false};
  const std::vector<Case> cases = {
      {R"(graph(%x: f32[2,5,11,13]) {
  %a = max_pool2d(%x) {kernel=[3,3], stride=[2,2], padding=[1,1], dilation=[2,2], ceil_mode=1} : f32[2,5,5,6]
  return %a
})",
       {{2, 5, 11, 13}},
       [&](const std::vector<runtime::Tensor>& in) { return referencePool(maxCase, in[0], 5, 6); }},
      {R"(graph(%x: f32[1,3,9,10], %y: f32[1,3,5,6]) {
  group @avg {
    %a = avg_pool2d(%x) {kernel=[3,3], stride=[2,2], padding=[1,1], ceil_mode=1, count_include_pad=0} : f32[1,3,5,6]
    %b = add(%a, %y) : f32[1,3,5,6]
  }
  return %b
})",
       {{1, 3, 9, 10}, {1, 3, 5, 6}},
       [&](const std::vector<runtime::Tensor>& in) {
         std::vector<float> v = referencePool(avgCase, in[0], 5, 6);
         for (size_t i = 0; i < v.size(); ++i) v[i] += in[1].data<float>()[i];
         return v;
       }},
      {R"(graph(%x: f32[1,3,10,9]) {
  %a = adaptive_avg_pool2d(%x) {output_size=[3,4]} : f32[1,3,3,4]
  return %a
})",
       {{1, 3, 10, 9}},
       [](const std::vector<runtime::Tensor>& in) { return referenceAdaptive(in[0], 3, 4); }},
      {R"(graph(%x: f32[1,2,10,9,8]) {
  %a = adaptive_avg_pool2d(%x) {output_size=[3,4]} : f32[1,2,3,4,8]
  return %a
})",
       {{1, 2, 10, 9, 8}},
       [](const std::vector<runtime::Tensor>& in) {
         return packedOrder(referenceAdaptive(unpacked(in[0]), 3, 4), 1, 16, 12, 8);
       }},
  };
  LowerOptions options;
  options.vectorLanes = 8;
  options.vectorRegisters = vectorRegistersForLanes(8);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    Graph g = parseGraph(c.text);
    std::vector<runtime::Tensor> inputs;
    for (size_t i = 0; i < c.inputs.size(); ++i)
      inputs.push_back(randomTensor(c.inputs[i], 40 + static_cast<int>(i)));
    const std::vector<float> want = c.expected(inputs);
    LoweredModule untuned = lowerGraph(g, options);
    EXPECT_EQ(untuned.funcs.size(), 1u);  // the epilogue fused into the nest's stores
    const tir::PrimFunc* kernel = windowKernel(untuned);
    ASSERT_NE(kernel, nullptr);
    const std::string key = kernel->attrs.at("tune_key");
    EXPECT_EQ(key, windowNestTuneKey(kernel->attrs.at("workload_key")));
    const WindowNestShape shape = windowNestShapeOfKey(key);
    EXPECT_EQ(kernel->attrs.at("schedule"), knobsText(windowNestDefaultKnobs(shape)));
    const std::vector<Knobs> annotations = windowNestAnnotations(shape);
    EXPECT_EQ(annotations.size(), shape.lanes == 8 ? 6u : 2u);  // vl 8, 4, 1 (or 1) × par 0, 1
    for (const Knobs& k : annotations) {
      SCOPED_TRACE(knobsText(k));
      LoweredModule tuned = lowerWithRecord(g, options, key, k);
      const tir::PrimFunc* f = windowKernel(tuned);
      ASSERT_NE(f, nullptr);
      EXPECT_EQ(f->attrs.at("schedule"), knobsText(k));
      // (A scalar serial nest applies no step: no trace.)
      EXPECT_EQ(f->attrs.count("trace") ? f->attrs.at("trace") : "",
                sketchTrace(key, k, 8, options.vectorRegisters).str());
      for (Engine e : {Engine::Interpreter, Engine::Jit})
        EXPECT_TRUE(allClose(evalModule(tuned, inputs, e)[0], want, 1e-5))
            << (e == Engine::Jit ? "jit" : "interp");
    }
  }
  EXPECT_THROW(windowNestShapeOfKey("pool:fused[relu($0:f32[4])->f32[4]]"), kiln::Error);
  EXPECT_THROW(windowNestShapeOfKey("window:fused[relu($0:f32[4])->f32[4]]"), kiln::Error);
}

}  // namespace
}  // namespace kiln::core::lower
