// core/tune: tuning keys, spaces, records and tuners — and that a configuration from a record
// really changes the generated kernel while computing the same values (interpreter and JIT).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "../core/kernels_test_util.h"
#include "../core/lower_test_util.h"
#include "core/lower/conv_search.h"
#include "core/lower/gemm_search.h"
#include "core/lower/nest_search.h"
#include "core/lower/schedule.h"
#include "core/lower/schedule_config.h"
#include "core/lower/winograd_search.h"
#include "core/passes/alter_layout.h"
#include "core/passes/pass_manager.h"
#include "core/tir/loop_features.h"
#include "core/tune/anneal.h"
#include "core/tune/cost_model.h"
#include "core/tune/evolve.h"
#include "core/tune/features.h"
#include "core/tune/records.h"
#include "core/tune/space.h"
#include "core/tune/task.h"
#include "core/tune/tune_loop.h"
#include "core/tune/tuner.h"
#include "runtime/error.h"
#include "tests/unit/tune/tune_test_util.h"

namespace kiln::core::tune {
namespace {

namespace fs = std::filesystem;
using lower::Knobs;
using lower::testing::Engine;
using lower::testing::evalGraph;

lower::LowerOptions avx2() { return lower::lowerOptionsFor("haswell", ""); }

const std::string kConv = "conv2d_nchwc:n=1,c=8,h=9,w=11,o=32,kh=3,kw=3,sh=1,sw=1,ph=1,pw=1,dh=1,dw=1,g=1:f32";
const std::string kPointwise = "conv2d_nchwc:n=1,c=16,h=7,w=7,o=32,kh=1,kw=1,sh=1,sw=1,ph=0,pw=0,dh=1,dw=1,g=1:f32";
const std::string kDense = "dense:m=2,k=37,n=21:f32";
// An element nest: a transpose, a broadcast add, a reshape and a sigmoid in one fused group.
const std::string kNest =
    "nest:fused[transpose{perm=[1,0,2]}($0:f32[2,8,24])->f32[8,2,24]; add(%0,$1:f32[24])->f32[8,2,24]; "
    "reshape{shape=[8,48]}(%1)->f32[8,48]; sigmoid(%2)->f32[8,48]]";
// A max pool's window nest (conv_search.h), as alter-layout leaves it on AVX2.
const std::string kPool =
    "pool:fused[max_pool2d{ceil_mode=0,dilation=[1,1],kernel=[3,3],padding=[1,1],stride=[2,2]}"
    "($0:f32[1,2,9,11,8])->f32[1,2,5,6,8]]";
// An adaptive average of uneven windows (rows of 4 taps, columns of 3): a plain window nest
// (nest_search.h).
const std::string kWindow =
    "window:fused[adaptive_avg_pool2d{output_size=[3,4]}($0:f32[1,2,10,9,8])->f32[1,2,3,4,8]]";

// A grouped NCHW convolution (conv_search.h "NCHW"), as -O2 leaves it: 9 × 13 with padding 1.
const std::string kNchw = "conv2d:n=1,c=4,h=9,w=13,o=12,kh=3,kw=3,sh=1,sw=1,ph=1,pw=1,dh=1,dw=1,g=2:f32";

/// The task graph after alter-layout with `configs`, lowered.
lower::LoweredModule lowerTask(const std::string& key, const lower::LowerOptions& base,
                               std::shared_ptr<lower::ScheduleConfigs> configs) {
  Graph g = taskGraph(key);
  passes::PassManagerOptions pm;
  pm.schedules = configs;
  passes::PassManager(passes::parsePipeline("alter-layout{lanes=" + std::to_string(base.vectorLanes) + "}"), pm).run(g);
  lower::LowerOptions options = base;
  options.schedules = configs;
  return lower::lowerGraph(g, options);
}

const tir::PrimFunc& taskKernel(const lower::LoweredModule& m, const std::string& key) {
  for (const auto& f : m.funcs) {
    auto it = f.attrs.find("tune_key");
    if (it != f.attrs.end() && it->second == key) return f;
  }
  throw InternalError("no kernel with key " + key);
}

TEST(TuneKeys, RoundTripAndGeometry) {
  lower::TuneKeyParts parts = lower::parseTuneKey(kConv);
  EXPECT_EQ(parts.kind, "conv2d_nchwc");
  EXPECT_EQ(parts.dtype, "f32");
  EXPECT_EQ(parts.params.at("w"), 11);
  EXPECT_DOUBLE_EQ(taskFlops(kConv), 2.0 * 32 * 9 * 11 * 8 * 9);
  EXPECT_DOUBLE_EQ(taskFlops(kDense), 2.0 * 2 * 37 * 21);
  EXPECT_THROW(lower::parseTuneKey("conv2d"), Error);
  EXPECT_THROW(lower::parseKnobs("a=1,b"), Error);
  EXPECT_THROW(lower::parseKnobs("a=x"), Error);
  EXPECT_EQ(lower::knobsText(lower::parseKnobs("b=2,a=-1")), "a=-1,b=2");
}

// A candidate knows which of its inputs index a table, so a worker fills them with rows of it
// (an embedding lookup's ids), not with arbitrary integers the kernel would clamp.
TEST(TuneKeys, ACandidateKnowsTheTablesItsInputsIndex) {
  const std::string take =
      "nest:fused[take{axis=0}($0:f32[7,6],$1:i64[2,5])->f32[2,5,6]; add(%0,$2:f32[2,5,6])->f32[2,5,6]]";
  EXPECT_EQ(compileCandidate(take, {}, avx2(), 3).indexBounds, (std::vector<int64_t>{0, 7, 0}));
  EXPECT_EQ(compileCandidate(kNest, {}, avx2(), 3).indexBounds, (std::vector<int64_t>{0, 0}));
}

TEST(TuneKeys, LoweredKernelCarriesTheKeyItsTaskGraphIsBuiltFrom) {
  for (const std::string& key : {kConv, kPointwise, kDense, kNest, kWindow}) {
    lower::LoweredModule m = lowerTask(key, avx2(), nullptr);
    const tir::PrimFunc& f = taskKernel(m, key);
    EXPECT_FALSE(f.attrs.at("schedule").empty()) << key;
  }
}

TEST(TuneSpace, EveryConfigurationIsValidDistinctAndCanonical) {
  for (const std::string& key : {kConv, kPointwise, kDense, kNest, kPool, kWindow}) {
    ConfigSpace space = ConfigSpace::forKey(key, avx2());
    ASSERT_GT(space.size(), 4) << key;
    std::set<Knobs> seen;
    size_t width = space.features(0).size();
    for (int64_t i = 0; i < space.size(); ++i) {
      EXPECT_TRUE(seen.insert(space.config(i)).second);
      EXPECT_EQ(space.indexOf(space.config(i)), i);
      EXPECT_EQ(space.features(i).size(), width);
      for (int64_t j : space.neighbors(i)) {
        int differ = 0;
        for (const auto& [name, values] : space.knobValues())  // a knob left out (par_chunks) counts too
          differ += lower::knob(space.config(j), name, -1) != lower::knob(space.config(i), name, -1);
        EXPECT_EQ(differ, 1);
      }
    }
  }
  EXPECT_THROW(ConfigSpace::forKey("softmax:n=1:f32", avx2()), Error);
}

// The heuristic's choice is always a point of the space (it is the tuner's baseline), for the
// shapes of real networks on both vector widths.
TEST(TuneSpace, HeuristicIsInTheSpace) {
  const char* keys[] = {
      "conv2d_nchwc:n=1,c=512,h=7,w=7,o=512,kh=3,kw=3,sh=1,sw=1,ph=1,pw=1,dh=1,dw=1,g=1:f32",
      "conv2d_nchwc:n=1,c=64,h=56,w=56,o=64,kh=3,kw=3,sh=1,sw=1,ph=1,pw=1,dh=1,dw=1,g=1:f32",  // Winograd
      "conv2d_nchwc:n=1,c=256,h=14,w=14,o=512,kh=1,kw=1,sh=2,sw=2,ph=0,pw=0,dh=1,dw=1,g=1:f32",
      "conv2d_nchwc:n=1,c=3,h=224,w=224,o=64,kh=7,kw=7,sh=2,sw=2,ph=3,pw=3,dh=1,dw=1,g=1:f32",
      "conv2d_nchwc:n=1,c=1024,h=14,w=14,o=256,kh=1,kw=1,sh=1,sw=1,ph=0,pw=0,dh=1,dw=1,g=1:f32",
      "conv2d_nchwc:n=1,c=96,h=56,w=56,o=96,kh=3,kw=3,sh=1,sw=1,ph=1,pw=1,dh=1,dw=1,g=96:f32",
      // Weights smaller than the input (rows outside, convChannelsOuter) but one channel group,
      // or one flat row: the orders coincide and the heuristic names the one in the space.
      "conv2d_nchwc:n=1,c=8,h=16,w=16,o=8,kh=3,kw=3,sh=1,sw=1,ph=1,pw=1,dh=1,dw=1,g=1:f32",
      "conv2d_nchwc:n=1,c=16,h=7,w=7,o=16,kh=1,kw=1,sh=1,sw=1,ph=0,pw=0,dh=1,dw=1,g=1:f32",
      "conv2d_nchwc:n=1,c=32,h=28,w=28,o=32,kh=3,kw=3,sh=2,sw=2,ph=1,pw=1,dh=1,dw=1,g=1:f32",
      "dense:m=1,k=512,n=1000:f32"};
  for (const lower::LowerOptions& options : {avx2(), lower::lowerOptionsFor("skylake-avx512", "")}) {
    for (const char* key : keys) {
      lower::LoweredModule m = lowerTask(key, options, nullptr);
      std::string heuristic = taskKernel(m, key).attrs.at("schedule");
      EXPECT_TRUE(ConfigSpace::forKey(key, options).indexOf(lower::parseKnobs(heuristic)).has_value())
          << key << " lanes " << options.vectorLanes << ": " << heuristic;
      if (std::string(key).find("c=64,h=56") != std::string::npos) {
        EXPECT_EQ(lower::knob(lower::parseKnobs(heuristic), "algo", 0), 4);
      }
    }
  }
}

/// Runs the task graph of `key` as a build with `configs` would (alter-layout, then lowering, on
/// the interpreter and the JIT) and expects `expected` from input `x`.
void expectResultWith(const std::string& key, const std::shared_ptr<lower::ScheduleConfigs>& configs,
                      const runtime::Tensor& x, const std::vector<runtime::Tensor>& expected) {
  SCOPED_TRACE(key + " with " + lower::knobsText(configs->byKey.at(key)));
  Graph g = taskGraph(key);
  passes::PassManagerOptions pm;
  pm.schedules = configs;
  passes::PassManager(passes::parsePipeline("alter-layout{lanes=8}"), pm).run(g);
  lower::LowerOptions options = avx2();
  options.schedules = configs;
  for (Engine engine : {Engine::Interpreter, Engine::Jit}) {
    std::vector<runtime::Tensor> got = evalGraph(g, {x}, engine, options);
    ASSERT_EQ(got[0].numel(), expected[0].numel());
    for (int64_t i = 0; i < got[0].numel(); ++i)
      ASSERT_NEAR(got[0].data<float>()[i], expected[0].data<float>()[i], 1e-4) << "at " << i;
  }
}

/// Every annotation of nest `key`'s space (18 on AVX2: vl 8, 4, 1 × un 1, 2, 4 × par 0, 1) builds
/// its own schedule and computes what the default does, in the interpreter and the JIT; at least
/// `traces` of them differ (an annotation whose unrolling finds no loop to unroll builds the trace
/// of another).
void expectEveryNestAnnotationMatches(const std::string& key, size_t traces = 9) {
  SCOPED_TRACE(key);
  ConfigSpace space = ConfigSpace::forKey(key, avx2());
  EXPECT_EQ(space.size(), 18);
  Graph g = taskGraph(key);
  std::vector<runtime::Tensor> inputs;
  for (size_t i = 0; i < g.inputs().size(); ++i)
    inputs.push_back(lower::testing::randomTensor(g.type(g.inputs()[i]).shape, 5 + static_cast<uint32_t>(i)));
  std::vector<runtime::Tensor> expected = evalGraph(g, inputs, Engine::Interpreter, avx2());
  std::set<std::string> built;
  for (int64_t i = 0; i < space.size(); ++i) {
    auto configs = std::make_shared<lower::ScheduleConfigs>();
    configs->byKey[key] = space.config(i);
    lower::LowerOptions options = avx2();
    options.schedules = configs;
    const lower::LoweredModule module = lower::lowerGraph(g, options);
    const tir::PrimFunc& f = taskKernel(module, key);
    EXPECT_EQ(f.attrs.at("schedule"), lower::knobsText(space.config(i)));
    built.insert(f.attrs.count("trace") ? f.attrs.at("trace") : "");  // scalar and serial: no step
    for (Engine engine : {Engine::Interpreter, Engine::Jit}) {
      std::vector<runtime::Tensor> got = evalGraph(g, inputs, engine, options);
      for (int64_t e = 0; e < got[0].numel(); ++e)
        ASSERT_NEAR(got[0].data<float>()[e], expected[0].data<float>()[e], 1e-5)
            << lower::knobsText(space.config(i));
    }
  }
  EXPECT_GE(built.size(), traces);
}

// An element nest counts one operation per output element.
TEST(TuneSpace, EveryElementNestAnnotationBuildsAndMatches) {
  EXPECT_DOUBLE_EQ(taskFlops(kNest), 8 * 48);
  EXPECT_THROW(taskFlops("nest:fused[relu($0:f32[4])->f32[4]"), Error);
  expectEveryNestAnnotationMatches(kNest);
}

// A concatenation is one nest per input, each sketched alike: parts of 13 and 7 columns (vectors
// and their tails) after a relu, only the larger of them worth threads; and channel blocks of a
// packed layout, each one contiguous range of the output (a flat loop).
TEST(TuneSpace, EveryConcatNestAnnotationBuildsAndMatches) {
  const std::string columns =
      "nest:fused[relu($0:f32[8,40,13])->f32[8,40,13]; concat{axis=2}(%0,$1:f32[8,40,7])->f32[8,40,20]]";
  const std::string blocks =
      "nest:fused[concat{axis=1}($0:f32[1,2,5,7,8],$1:f32[1,3,5,7,8])->f32[1,5,5,7,8]]";
  EXPECT_DOUBLE_EQ(taskFlops(columns), 8 * 40 * 20);
  for (const std::string& key : {columns, blocks}) {
    const lower::LoweredModule m = lowerTask(key, avx2(), nullptr);
    EXPECT_EQ(taskKernel(m, key).attrs.at("ops"), key == columns ? "relu,concat" : "concat");
    // vl 8, 4, 1 × par 0, 1 at least (13 and 7 columns unroll no vector)
    expectEveryNestAnnotationMatches(key, key == columns ? 6 : 3);
  }
  // With par, the part of 4160 elements runs parallel, the part of 2240 serial.
  auto configs = std::make_shared<lower::ScheduleConfigs>();
  configs->byKey[columns] = {{"vl", 8}, {"un", 1}, {"par", 1}};
  lower::LowerOptions options = avx2();
  options.schedules = configs;
  const lower::LoweredModule m = lower::lowerGraph(taskGraph(columns), options);
  EXPECT_EQ(lower::testing::countLoops(taskKernel(m, columns), tir::ForKind::Parallel), 1);
}

// A row nest (a reduction, a softmax) counts one operation per element read.
/// Every annotation of int8 key `key`'s space at the default launch granularity builds its own
/// schedule (with dot4 steps when `words`) and computes exactly the bytes of the default,
/// interpreted and compiled; the default is a point of the space, and at least `least` points
/// are checked.
void expectEveryQuantizedAnnotationMatches(const std::string& key, bool words, int64_t least) {
  SCOPED_TRACE(key);
  ConfigSpace space = ConfigSpace::forKey(key, avx2());
  Graph g = taskGraph(key);
  runtime::Tensor x = runtime::Tensor::zeros(DType::UInt8, g.type(g.inputs()[0]).shape);
  std::mt19937 rng(3);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.data<uint8_t>()[i] = static_cast<uint8_t>(rng() % 8);  // what a worker feeds
  const lower::LoweredModule plain = lower::lowerGraph(g, avx2());
  const tir::PrimFunc& kernel = taskKernel(plain, key);
  EXPECT_TRUE(space.indexOf(lower::parseKnobs(kernel.attrs.at("schedule"))).has_value());
  EXPECT_EQ(kernel.attrs.at("trace").find("dot4(") != std::string::npos, words) << kernel.attrs.at("trace");
  const std::vector<runtime::Tensor> expected = evalGraph(g, {x}, Engine::Interpreter, avx2());
  int64_t checked = 0;
  for (int64_t i = 0; i < space.size(); ++i) {
    if (space.config(i).count("par_chunks")) continue;
    auto configs = std::make_shared<lower::ScheduleConfigs>();
    configs->byKey[key] = space.config(i);
    lower::LowerOptions options = avx2();
    options.schedules = configs;
    for (Engine engine : {Engine::Interpreter, Engine::Jit}) {
      std::vector<runtime::Tensor> got = evalGraph(g, {x}, engine, options);
      ASSERT_EQ(got[0].numel(), expected[0].numel());
      for (int64_t e = 0; e < got[0].numel(); ++e)
        ASSERT_EQ(got[0].data<uint8_t>()[e], expected[0].data<uint8_t>()[e])
            << lower::knobsText(space.config(i)) << " at " << e;
    }
    ++checked;
  }
  EXPECT_GE(checked, least);
  // The outputs are not all one value (the comparison would prove nothing).
  std::set<uint8_t> values(expected[0].data<uint8_t>(), expected[0].data<uint8_t>() + expected[0].numel());
  EXPECT_GT(values.size(), 8u);
}

// A quantized dense key (qnn.dense, u8): every annotation of its space builds the dense sketch
// with dot4 steps and computes exactly the bytes of the default.
TEST(TuneSpace, EveryQuantizedDenseAnnotationComputesTheSameBytes) {
  const std::string key = "dense:m=3,k=72,n=21:u8";
  EXPECT_DOUBLE_EQ(taskFlops(key), 2.0 * 3 * 72 * 21);
  EXPECT_THROW(taskGraph("dense:m=1,k=50,n=8:u8"), Error);  // K not a multiple of 4: no sketch
  // rows 1 or 3 × 1..12 rows of w × serial or parallel, as fit
  expectEveryQuantizedAnnotationMatches(key, true, 24);
}

// A quantized convolution key (qnn.conv2d_nchwc, u8, with its blocks): the convolution sketch on
// the int8 nest, every weight group V the blocks allow; each annotation computes exactly the
// bytes of the default: a padded 3×3 (regions, a tail tile), a pointwise one (three blocks: V 1
// or 3), a strided 1×1 and a depthwise 3×3 at stride 2 (no words: no dot4).
TEST(TuneSpace, EveryQuantizedConvAnnotationComputesTheSameBytes) {
  const std::string padded =
      "conv2d_nchwc:n=1,c=8,h=5,w=7,o=16,kh=3,kw=3,sh=1,sw=1,ph=1,pw=1,dh=1,dw=1,g=1,ib=8,ob=8:u8";
  EXPECT_DOUBLE_EQ(taskFlops(padded), 2.0 * 5 * 7 * 16 * 8 * 9);
  EXPECT_THROW(taskGraph("conv2d_nchwc:n=1,c=8,h=5,w=7,o=12,kh=1,kw=1,g=1,ib=8,ob=8:u8"), Error);  // 12 % 8
  expectEveryQuantizedAnnotationMatches(padded, true, 20);
  expectEveryQuantizedAnnotationMatches(
      "conv2d_nchwc:n=1,c=16,h=3,w=5,o=24,kh=1,kw=1,sh=1,sw=1,ph=0,pw=0,dh=1,dw=1,g=1,ib=8,ob=8:u8", true,
      20);
  expectEveryQuantizedAnnotationMatches(
      "conv2d_nchwc:n=1,c=8,h=6,w=6,o=16,kh=1,kw=1,sh=2,sw=2,ph=0,pw=0,dh=1,dw=1,g=1,ib=8,ob=8:u8", true, 6);
  expectEveryQuantizedAnnotationMatches(
      "conv2d_nchwc:n=1,c=16,h=6,w=5,o=16,kh=3,kw=3,sh=2,sw=2,ph=1,pw=1,dh=1,dw=1,g=16,ib=8,ob=8:u8", false,
      4);
}

TEST(TuneSpace, EveryRowNestAnnotationBuildsAndMatches) {
  const std::string mean = "reduce:fused[mean{axes=[1],keepdims=1}($0:f32[3,37])->f32[3,1]]";
  const std::string softmax = "reduce:fused[softmax{axis=-1}($0:f32[6,45])->f32[6,45]]";
  EXPECT_DOUBLE_EQ(taskFlops(mean), 3 * 37);
  EXPECT_THROW(taskFlops("reduce:fused[relu($0:f32[4])->f32[4]]"), Error);
  expectEveryNestAnnotationMatches(mean);
  expectEveryNestAnnotationMatches(softmax);
}

/// Every configuration of pooling key `key`'s space builds a kernel that records its knobs and
/// computes exactly what the interpreter computes for the untuned one.
void expectEveryConfigurationPools(const ConfigSpace& space, const std::string& key) {
  Graph g = taskGraph(key);
  runtime::Tensor x = lower::testing::randomTensor(g.type(g.inputs()[0]).shape, 5);
  std::vector<runtime::Tensor> expected = evalGraph(g, {x}, Engine::Interpreter, avx2());
  for (int64_t i = 0; i < space.size(); ++i) {
    auto configs = std::make_shared<lower::ScheduleConfigs>();
    configs->byKey[key] = space.config(i);
    lower::LowerOptions options = avx2();
    options.schedules = configs;
    EXPECT_EQ(taskKernel(lower::lowerGraph(g, options), key).attrs.at("schedule"),
              lower::knobsText(space.config(i)));
    std::vector<runtime::Tensor> got = evalGraph(g, {x}, Engine::Jit, options);
    for (int64_t e = 0; e < got[0].numel(); ++e)
      ASSERT_EQ(got[0].data<float>()[e], expected[0].data<float>()[e]) << lower::knobsText(space.config(i));
  }
}

// A pool counts one operation per tap of every output. Its space is the window nest's annotations,
// the default first, at every launch granularity; each builds its own schedule and computes what
// the default does.
TEST(TuneSpace, EveryPoolAnnotationBuildsAndMatches) {
  EXPECT_DOUBLE_EQ(taskFlops(kPool), 2 * 5 * 6 * 8 * 9);
  ConfigSpace space = ConfigSpace::forKey(kPool, avx2());
  const lower::ConvSketchShape s = lower::poolSketchShapeOfKey(kPool);
  EXPECT_EQ(space.config(0), lower::convSketchDefaultKnobs(s, avx2().vectorRegisters));
  EXPECT_EQ(space.size(),
            3 * static_cast<int64_t>(lower::convSketchAnnotations(s, avx2().vectorRegisters).size()));
  expectEveryConfigurationPools(space, kPool);
}

// A plain window nest counts one operation per tap of its widest window, for every output. Its
// space is its annotations, the default first; each builds its own schedule and computes what the
// default does.
TEST(TuneSpace, EveryWindowAnnotationBuildsAndMatches) {
  EXPECT_DOUBLE_EQ(taskFlops(kWindow), 1 * 2 * 3 * 4 * 8 * (4 * 3));
  ConfigSpace space = ConfigSpace::forKey(kWindow, avx2());
  const lower::WindowNestShape s = lower::windowNestShapeOfKey(kWindow);
  EXPECT_EQ(space.config(0), lower::windowNestDefaultKnobs(s));
  EXPECT_EQ(space.size(), 6);  // vl 8, 4, 1 × par 0, 1
  expectEveryConfigurationPools(space, kWindow);
  EXPECT_THROW(taskFlops("window:fused[relu($0:f32[4])->f32[4]]"), Error);
}

// A plain NCHW convolution's task is the conv2d itself (alter-layout does not pack it), its FLOPs a
// convolution's. Its space is the default annotation first, then every annotation of each weight
// group V that divides a group's six output channels (1, 2, 3, 6), with and without vectors of
// half the lanes, at every launch granularity; each lowers to its own schedule and trace and
// computes the convolution, in the interpreter and as JIT code.
TEST(TuneSpace, EveryNchwConvAnnotationBuildsAndMatches) {
  EXPECT_DOUBLE_EQ(taskFlops(kNchw), 2.0 * 12 * 9 * 13 * 2 * 9);
  ConfigSpace space = ConfigSpace::forKey(kNchw, avx2());
  std::optional<lower::ConvSketchShape> one = lower::convSketchShapeOfKey(kNchw, 1, avx2().vectorLanes);
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(space.config(0), lower::convSketchDefaultKnobs(*one, avx2().vectorRegisters));
  Graph g = taskGraph(kNchw);
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0].op, "conv2d");
  std::set<int64_t> groups, lanes;
  const runtime::Tensor x = lower::testing::randomTensor(g.type(g.inputs()[0]).shape, 5);
  const std::vector<runtime::Tensor> expected = evalGraph(g, {x}, Engine::Interpreter, avx2());
  for (int64_t i = 0; i < space.size(); ++i) {
    const Knobs& k = space.config(i);
    SCOPED_TRACE(lower::knobsText(k));
    groups.insert(k.at("oc_vecs"));
    lanes.insert(lower::knob(k, "vl", 8));
    auto configs = std::make_shared<lower::ScheduleConfigs>();
    configs->byKey[kNchw] = k;
    const lower::LoweredModule module = lowerTask(kNchw, avx2(), configs);
    const tir::PrimFunc& f = taskKernel(module, kNchw);
    EXPECT_EQ(f.attrs.at("schedule"), lower::knobsText(k));
    EXPECT_EQ(f.attrs.at("trace"), lower::sketchTrace(kNchw, k, 8, 16).str());
    lower::LowerOptions options = avx2();
    options.schedules = configs;
    for (Engine e : {Engine::Interpreter, Engine::Jit}) {
      const std::vector<runtime::Tensor> got = evalGraph(g, {x}, e, options);
      EXPECT_TRUE(lower::testing::allClose(got[0], lower::testing::toVector(expected[0])));
    }
    if (HasFailure()) return;
  }
  EXPECT_EQ(groups, (std::set<int64_t>{1, 2, 3, 6}));
  EXPECT_EQ(lanes, (std::set<int64_t>{4, 8}));
}

// Apply-best changes the generated schedule: every configuration of the space lowers to a
// kernel that records exactly those knobs, and computes what the heuristic's kernel computes.
TEST(TuneSpace, EachConfigurationBuildsItsOwnScheduleWithEqualResults) {
  for (const std::string& key : {kConv, kPointwise, kDense}) {
    ConfigSpace space = ConfigSpace::forKey(key, avx2());
    Graph reference = taskGraph(key);
    runtime::Tensor x = lower::testing::randomTensor(reference.type(reference.inputs()[0]).shape, 3);
    lower::LoweredModule base = lowerTask(key, avx2(), nullptr);
    std::string heuristic = taskKernel(base, key).attrs.at("schedule");
    std::vector<runtime::Tensor> expected = evalGraph(taskGraph(key), {x}, Engine::Interpreter, avx2());
    std::set<std::string> schedules;
    // Every configuration for the small dense space; for the convolutions a spread of them plus
    // one of every (algo, oc_vecs, po, par_chunks) combination (the tallest tile).
    int64_t step = std::max<int64_t>(1, space.size() / 12);
    std::set<int64_t> indices;
    for (int64_t i = 0; i < space.size(); i += step) indices.insert(i);
    std::map<std::vector<int64_t>, int64_t> widest;
    for (int64_t i = 0; i < space.size(); ++i) {
      const Knobs& k = space.config(i);
      if (!k.count("oc_vecs")) break;
      std::vector<int64_t> group{lower::knob(k, "algo", 0), k.at("oc_vecs"), k.at("po"),
                                 lower::knob(k, "par_chunks", lower::defaultParallelChunks())};
      auto [it, fresh] = widest.emplace(group, i);
      if (!fresh && space.config(it->second).at("mi") < k.at("mi")) it->second = i;
    }
    for (const auto& [group, i] : widest) indices.insert(i);
    for (int64_t i : indices) {
      auto configs = std::make_shared<lower::ScheduleConfigs>();
      configs->byKey[key] = space.config(i);
      lower::LoweredModule m = lowerTask(key, avx2(), configs);
      EXPECT_EQ(taskKernel(m, key).attrs.at("schedule"), lower::knobsText(space.config(i))) << key;
      schedules.insert(taskKernel(m, key).attrs.at("schedule"));
      expectResultWith(key, configs, x, expected);
    }
    EXPECT_GT(schedules.size(), 2u) << key;
    EXPECT_TRUE(space.indexOf(lower::parseKnobs(heuristic)).has_value()) << "heuristic outside the space: " << heuristic;
  }
}

// A convolution's space (pointwise, windowed or depthwise) seeds the sketch's default annotation
// of every packing (and of the Winograd sketch's, where Winograd applies), so a tuning run times
// them right after the heuristic's; other operators' spaces have no seeds.
TEST(TuneSpace, ConvSpacesSeedTheSketchDefault) {
  const std::string depthwise =
      "conv2d_nchwc:n=1,c=32,h=9,w=11,o=32,kh=3,kw=3,sh=1,sw=1,ph=1,pw=1,dh=1,dw=1,g=32:f32";
  for (const std::string& key : {kPointwise, kConv, depthwise}) {
    SCOPED_TRACE(key);
    ConfigSpace space = ConfigSpace::forKey(key, avx2());
    ASSERT_FALSE(space.seeds().empty());
    std::set<std::pair<int64_t, int64_t>> packings;  // algorithm, oc_vecs
    std::set<int64_t> algos;
    for (int64_t seed : space.seeds()) {
      const Knobs& k = space.config(seed);
      ASSERT_EQ(k.count("mi"), 1u) << lower::knobsText(k);
      const int64_t algo = lower::knob(k, "algo", 0), v = k.at("oc_vecs");
      packings.insert({algo, v});
      algos.insert(algo);
      if (algo == 0) {
        auto shape = lower::convSketchShapeOfKey(key, v, avx2().vectorLanes);
        ASSERT_TRUE(shape.has_value());
        EXPECT_EQ(k, lower::convSketchDefaultKnobs(*shape, avx2().vectorRegisters));
      } else {
        auto shape = lower::winogradShapeOfKey(key, static_cast<int>(algo), v, avx2().vectorLanes);
        ASSERT_TRUE(shape.has_value());
        EXPECT_EQ(k, lower::winogradSketchDefaultKnobs(*shape, avx2().vectorRegisters));
      }
    }
    EXPECT_EQ(packings.size(), space.seeds().size());
    // A Winograd-eligible 3×3 also seeds the Winograd sketch of both tiles.
    const std::set<int64_t> want = key == kConv ? std::set<int64_t>{0, 2, 4} : std::set<int64_t>{0};
    EXPECT_EQ(algos, want);
  }
  EXPECT_TRUE(ConfigSpace::forKey(kDense, avx2()).seeds().empty());
}

// Every point of a convolution's space is a sketch annotation (conv_search.h, winograd_search.h):
// there is no other schedule of these kernels. Each annotation comes at the runtime's launch
// granularity first (par_chunks left out), then at the others.
TEST(TuneSpace, ConvSpacesAreSketchAnnotationsAtEveryGranularity) {
  ConfigSpace conv = ConfigSpace::forKey(kConv, avx2());
  // The direct kernel's annotations leave algo out (0); Winograd's carry 2 or 4.
  EXPECT_EQ(conv.knobValues().at("algo"), (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(conv.knobValues().at("par_chunks"), lower::parallelChunkChoices());
  // Pointwise, strided and depthwise convolutions have no algorithm choice.
  EXPECT_EQ(ConfigSpace::forKey(kPointwise, avx2()).knobValues().count("algo"), 0u);
  const std::string depthwise = "conv2d_nchwc:n=1,c=16,h=8,w=8,o=16,kh=3,kw=3,sh=1,sw=1,ph=1,pw=1,dh=1,dw=1,g=16:f32";
  EXPECT_EQ(ConfigSpace::forKey(depthwise, avx2()).knobValues().count("algo"), 0u);
  int64_t winograd = 0;
  for (const std::string& key : {kConv, kPointwise, depthwise}) {
    ConfigSpace space = ConfigSpace::forKey(key, avx2());
    std::set<std::string> names;
    for (const auto& [name, values] : space.knobValues()) names.insert(name);
    std::set<std::string> want{"mi", "oc_vecs", "par_chunks", "po"};
    if (key == kConv) want.insert("algo");
    EXPECT_EQ(names, want);
    for (int64_t i = 0; i < space.size(); ++i) {
      const Knobs& k = space.config(i);
      ASSERT_EQ(k.count("mi"), 1u) << lower::knobsText(k);
      winograd += lower::knob(k, "algo", 0) != 0;
      if (k.count("par_chunks")) {
        // Its twin at the default granularity comes right before it (one or two points back).
        EXPECT_NE(k.at("par_chunks"), lower::defaultParallelChunks());
        Knobs twin = k;
        twin.erase("par_chunks");
        std::optional<int64_t> t = space.indexOf(twin);
        ASSERT_TRUE(t.has_value()) << lower::knobsText(k);
        EXPECT_TRUE(*t == i - 1 || *t == i - 2) << lower::knobsText(k);
        std::vector<int64_t> around = space.neighbors(i);
        EXPECT_NE(std::find(around.begin(), around.end(), *t), around.end());
        EXPECT_NE(space.features(i), space.features(*t));
      }
    }
    // The default granularity given explicitly names the same point; other values none.
    Knobs first = space.config(0);
    first["par_chunks"] = lower::defaultParallelChunks();
    EXPECT_EQ(space.indexOf(first), 0);
    first["par_chunks"] = 3;
    EXPECT_FALSE(space.indexOf(first).has_value());
  }
  EXPECT_GT(winograd, 0);
}

// A record with algo=4 changes the generated kernel (the Winograd lowering, with the record's
// tile) and the result still matches the untuned direct kernel (the sketch's default). The record
// here has the knobs of the former hand-written Winograd builder: it builds the Winograd sketch
// with its loop order (oc_outer as po) and the nearest tile that merges (5 of the 9 tiles as 3).
TEST(TuneSpace, WinogradRecordChangesTheKernelAndStillMatches) {
  Graph reference = taskGraph(kConv);
  runtime::Tensor x = lower::testing::randomTensor(reference.type(reference.inputs()[0]).shape, 3);
  std::vector<runtime::Tensor> expected = evalGraph(reference, {x}, Engine::Jit, avx2());
  std::string heuristic = taskKernel(lowerTask(kConv, avx2(), nullptr), kConv).attrs.at("schedule");
  EXPECT_NE(heuristic.find("mi="), std::string::npos) << heuristic;
  EXPECT_EQ(heuristic.find("algo"), std::string::npos) << heuristic;
  auto configs = std::make_shared<lower::ScheduleConfigs>();
  configs->byKey[kConv] = {{"algo", 4},    {"oc_vecs", 2}, {"ow_block", 5},    {"flatten", 0},
                           {"oc_outer", 0}, {"unroll", 4},  {"par_chunks", 16}};
  lower::LoweredModule m = lowerTask(kConv, avx2(), configs);
  const tir::PrimFunc& f = taskKernel(m, kConv);
  EXPECT_EQ(f.attrs.at("schedule"), "algo=4,mi=3,oc_vecs=2,par_chunks=16,po=0");
  EXPECT_EQ(f.attrs.count("trace"), 1u);
  expectResultWith(kConv, configs, x, expected);
  // The same record given to lowering only (weights packed for the direct kernel) is ignored.
  Graph direct = taskGraph(kConv);
  passes::PassManager(passes::parsePipeline("alter-layout{lanes=8}")).run(direct);
  lower::LowerOptions options = avx2();
  options.schedules = configs;
  EXPECT_EQ(taskKernel(lower::lowerGraph(direct, options), kConv).attrs.at("schedule"), heuristic);
}

TEST(TuneSpace, RecordWithAnotherPackingIsIgnoredNotMisapplied) {
  // oc_vecs decides the weight packing in alter-layout; a lowering that meets a weight packed
  // otherwise (the record applied to lowering only) must keep the heuristic.
  auto configs = std::make_shared<lower::ScheduleConfigs>();
  configs->byKey[kConv] = {{"oc_vecs", 4}, {"mi", 2}, {"po", 0}};
  Graph g = taskGraph(kConv);
  passes::PassManager(passes::parsePipeline("alter-layout{lanes=8}")).run(g);  // no configs: heuristic packing
  lower::LowerOptions options = avx2();
  options.schedules = configs;
  lower::LoweredModule m = lower::lowerGraph(g, options);
  EXPECT_NE(taskKernel(m, kConv).attrs.at("schedule"), lower::knobsText(configs->byKey[kConv]));
}

TEST(TuneRecords, WrittenReadBackAndBestPerKeyAndTarget) {
  fs::path dir = fs::temp_directory_path() / ("kiln_records_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::string path = (dir / "sub" / "r.jsonl").string();
  auto rec = [](std::string key, std::string target, Knobs k, double ms, std::string error = "") {
    TuneRecord r;
    r.key = std::move(key), r.target = std::move(target), r.knobs = std::move(k), r.costMs = ms;
    r.costsMs = {ms, ms * 1.1};
    r.error = std::move(error);
    r.tuner = "random", r.timestamp = "2026-11-21T00:00:00Z", r.version = "test";
    return r;
  };
  appendRecords(path, {rec(kDense, "llvm -mcpu=haswell", {{"rows", 1}, {"cols", 4}}, 2.0),
                       rec(kDense, "llvm -mcpu=haswell", {{"rows", 2}, {"cols", 4}}, 1.0),
                       rec(kDense, "llvm -mcpu=haswell", {{"rows", 2}, {"cols", 8}}, 0.0, "crashed (signal 11)"),
                       rec(kDense, "llvm -mcpu=znver4", {{"rows", 1}, {"cols", 1}}, 0.5)});
  RecordFile file = readRecords(path);
  ASSERT_EQ(file.records.size(), 4u);
  EXPECT_EQ(file.badLines, 0);
  EXPECT_EQ(file.records[2].error, "crashed (signal 11)");
  EXPECT_EQ(file.records[1].costsMs.size(), 2u);
  lower::ScheduleConfigs best = bestConfigs(file.records, "llvm -mcpu=haswell");
  EXPECT_EQ(lower::knobsText(best.byKey.at(kDense)), "cols=4,rows=2");
  EXPECT_EQ(lower::knobsText(bestConfigs(file.records, "llvm -mcpu=znver4").byKey.at(kDense)), "cols=1,rows=1");

  // A torn last line and garbage are skipped and counted; appending after them still works.
  {
    std::ofstream out(path, std::ios::app);
    out << "not json\n{\"key\":\"dense:m=1:f32\"}\n{\"key\":\"" << kDense << "\",\"target\":\"x\",\"kn";
  }
  appendRecords(path, {rec(kDense, "llvm -mcpu=haswell", {{"rows", 1}, {"cols", 2}}, 0.25)});
  file = readRecords(path);
  EXPECT_EQ(file.records.size(), 5u);
  EXPECT_EQ(file.badLines, 3);
  EXPECT_NE(file.firstProblem.find("line 5"), std::string::npos) << file.firstProblem;
  EXPECT_EQ(lower::knobsText(bestConfigs(file.records, "llvm -mcpu=haswell").byKey.at(kDense)), "cols=2,rows=1");
  EXPECT_TRUE(readRecords((dir / "missing.jsonl").string()).records.empty());
  fs::remove_all(dir);
}

TEST(TuneRecords, TheLatestConfirmationRoundDecides) {
  auto rec = [](Knobs k, double ms, std::string tuner, std::string stamp, std::string target = "llvm -mcpu=znver4") {
    TuneRecord r;
    r.key = kDense, r.target = std::move(target), r.knobs = std::move(k), r.costMs = ms, r.costsMs = {ms};
    r.tuner = std::move(tuner), r.timestamp = std::move(stamp), r.version = "test";
    return r;
  };
  const Knobs a{{"rows", 1}, {"cols", 1}}, b{{"rows", 2}, {"cols", 1}}, c{{"rows", 1}, {"cols", 2}};
  // The search found `a` fastest (at a quiet moment); timed side by side, `b` wins.
  std::vector<TuneRecord> records{rec(a, 1.0, "xgb", "2026-11-21T10:00:01Z"), rec(b, 1.4, "xgb", "2026-11-21T10:00:02Z"),
                                  rec(c, 1.6, "xgb", "2026-11-21T10:00:03Z")};
  EXPECT_EQ(bestConfigs(records, "llvm -mcpu=znver4").byKey.at(kDense), a);
  records.push_back(rec(a, 1.5, kConfirmTuner, "2026-11-21T10:00:09Z"));
  records.push_back(rec(b, 1.3, kConfirmTuner, "2026-11-21T10:00:09Z"));
  EXPECT_EQ(bestConfigs(records, "llvm -mcpu=znver4").byKey.at(kDense), b);
  // A later round replaces the earlier one, even when the earlier one had a lower figure; a
  // failed record of the round, and rounds on another target, do not count.
  records.push_back(rec(c, 1.45, kConfirmTuner, "2026-11-21T11:00:00Z"));
  records.push_back(rec(b, 1.5, kConfirmTuner, "2026-11-21T11:00:00Z"));
  TuneRecord failed = rec(a, 0.0, kConfirmTuner, "2026-11-21T11:00:00Z");
  failed.error = "timeout (10 s)";
  records.push_back(failed);
  records.push_back(rec(a, 0.1, kConfirmTuner, "2026-11-21T12:00:00Z", "llvm -mcpu=haswell"));
  EXPECT_EQ(bestConfigs(records, "llvm -mcpu=znver4").byKey.at(kDense), c);
  EXPECT_EQ(bestConfigs(records, "llvm -mcpu=haswell").byKey.at(kDense), a);

  // What decides: the latest round's error-free records, whole; alone they choose the same.
  std::vector<TuneRecord> deciding = decidingRecords(records, "llvm -mcpu=znver4");
  ASSERT_EQ(deciding.size(), 2u);
  for (const TuneRecord& r : deciding) EXPECT_EQ(r.timestamp, "2026-11-21T11:00:00Z");
  EXPECT_EQ(bestConfigs(deciding, "llvm -mcpu=znver4").byKey.at(kDense), c);
  // Without a round, the fastest record alone.
  std::vector<TuneRecord> searched(records.begin(), records.begin() + 3);
  deciding = decidingRecords(searched, "llvm -mcpu=znver4");
  ASSERT_EQ(deciding.size(), 1u);
  EXPECT_EQ(deciding[0].knobs, a);
}

// A round's default (flagged, and so written and read back) stays unless the fastest beats it by
// kDefaultMargin; without the flag (older records) the fastest of the round decides.
TEST(TuneRecords, ARoundKeepsItsDefaultUnlessBeatenByTheMargin) {
  const Knobs def{{"rows", 1}, {"cols", 1}}, other{{"rows", 2}, {"cols", 1}};
  auto round = [&](double otherMs, bool flagged) {
    TuneRecord d, o;
    d.key = o.key = kDense, d.target = o.target = "llvm", d.tuner = o.tuner = kConfirmTuner;
    d.timestamp = o.timestamp = "2026-11-30T10:00:00Z", d.version = o.version = "test";
    d.knobs = def, d.costMs = 1.0, d.costsMs = {1.0}, d.isDefault = flagged;
    o.knobs = other, o.costMs = otherMs, o.costsMs = {otherMs};
    TuneRecord back;
    EXPECT_TRUE(parseRecord(recordJson(d), back));
    EXPECT_EQ(back.isDefault, flagged);
    EXPECT_EQ(recordJson(d).find("\"default\"") != std::string::npos, flagged);
    return bestConfigs({back, o}, "llvm").byKey.at(kDense);
  };
  EXPECT_EQ(round(0.985, true), def);    // 1.5 % faster: within the margin
  EXPECT_EQ(round(0.95, true), other);   // 5 %: replaces it
  EXPECT_EQ(round(0.985, false), other); // no flag: the fastest
  EXPECT_EQ(roundChoice({}), nullptr);
}

/// Times every candidate from a table: the task's default 1 ms, the first other candidate it is
/// given `rivalMs`, every other 1.5 ms.
class TableMeasurer : public Measurer {
 public:
  TableMeasurer(std::string defaultKnobs, double rivalMs)
      : m_default(std::move(defaultKnobs)), m_rivalMs(rivalMs) {}
  void measure(const std::string&, const std::vector<std::string>& knobs,
               const std::function<void(size_t, const Measurement&)>& done) override {
    for (size_t i = 0; i < knobs.size(); ++i) done(i, timed(knobs[i]));
  }
  std::vector<Measurement> measureSideBySide(const std::string&,
                                            const std::vector<std::string>& knobs) override {
    std::vector<Measurement> out;
    for (const std::string& k : knobs) out.push_back(timed(k));
    return out;
  }
  std::string rival;

 private:
  Measurement timed(const std::string& knobs) {
    if (knobs != m_default && rival.empty()) rival = knobs;
    double ms = knobs == m_default ? 1.0 : knobs == rival ? m_rivalMs : 1.5;
    return Measurement{"", ms, {ms, ms, ms}};
  }
  std::string m_default;
  double m_rivalMs;
};

// The tuning loop's summary, the builds from its records and a rerun's summary choose alike: a
// rival 1 % faster than the default in the confirmation round leaves the default; 10 % replaces it.
TEST(TuneLoop, SummaryBuildsAndRerunsChooseTheRoundsRecordAlike) {
  std::vector<TuneTask> tasks = extractTasks(lower::lowerGraph(taskGraph(kDense), lower::LowerOptions{}));
  ASSERT_EQ(tasks.size(), 1u);
  const TuneTask& task = tasks[0];
  for (double rivalMs : {0.99, 0.9}) {
    SCOPED_TRACE(rivalMs);
    TableMeasurer measurer(task.defaultKnobs, rivalMs);
    TuneLoopOptions options = testing::smallLoopOptions("2026-12-06T01:00:00Z");
    std::vector<TuneRecord> records;
    TuneLoopResult result =
        runTuneLoop(tasks, {6}, {}, measurer, options, [&](const TuneRecord& r) { records.push_back(r); });
    ASSERT_EQ(result.tasks.size(), 1u);
    ASSERT_FALSE(measurer.rival.empty());
    const std::string want = rivalMs > 0.95 ? task.defaultKnobs : measurer.rival;
    const TuneTaskResult& summary = result.tasks[0];
    EXPECT_EQ(summary.confirmed, 2);
    EXPECT_EQ(summary.bestKnobs, want);
    EXPECT_DOUBLE_EQ(summary.bestMs, rivalMs > 0.95 ? 1.0 : rivalMs);
    EXPECT_DOUBLE_EQ(summary.defaultMs, 1.0);
    EXPECT_EQ(lower::knobsText(bestConfigs(records, "llvm").byKey.at(kDense)), want);
    TuneTaskResult rerun;
    EXPECT_EQ(takeLatestRound(rerun, task, records), 2);
    EXPECT_EQ(rerun.bestKnobs, want);
    EXPECT_DOUBLE_EQ(rerun.bestMs, summary.bestMs);
  }
}

// A deterministic synthetic cost over the conv space: the tuners must propose each
// configuration at most once, only valid ones, and cover the space when asked for all of it.
TEST(Tuners, ProposeEachConfigurationOnceAndExhaustTheSpace) {
  ConfigSpace space = ConfigSpace::forKey(kConv, avx2());
  auto cost = [&](int64_t i) {
    const Knobs& k = space.config(i);
    return 1.0 + std::abs(static_cast<double>(k.at("mi") - 6)) +
           0.5 * static_cast<double>(k.at("oc_vecs") != 2);
  };
  for (const std::string& name : tunerNames()) {
    auto tuner = makeTuner(name, space, 7);
    std::set<int64_t> seen;
    while (!tuner->exhausted()) {
      std::vector<int64_t> batch = tuner->propose(8);
      ASSERT_FALSE(batch.empty()) << name;
      std::vector<double> costs;
      for (int64_t i : batch) {
        ASSERT_GE(i, 0);
        ASSERT_LT(i, space.size());
        EXPECT_TRUE(seen.insert(i).second) << name << " proposed " << i << " twice";
        costs.push_back(i % 11 == 0 ? -1.0 : cost(i));  // some candidates fail
      }
      tuner->update(batch, costs);
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), space.size()) << name;
    EXPECT_TRUE(tuner->propose(4).empty());
  }
  EXPECT_THROW(makeTuner("annealing", space, 1), Error);
}

TEST(Tuners, ReportedRecordsAreNotProposedAgain) {
  ConfigSpace space = ConfigSpace::forKey(kDense, avx2());
  auto tuner = makeTuner("xgb", space, 3);
  std::vector<int64_t> known;
  for (int64_t i = 0; i < space.size(); i += 2) known.push_back(i);
  tuner->update(known, std::vector<double>(known.size(), 1.0));
  for (int64_t i : tuner->propose(static_cast<int>(space.size()))) EXPECT_EQ(i % 2, 1);
}

/// Share of the pairs of points with different costs whose scores order them the same way (faster
/// scores higher); equal scores count as half. Chance is 0.5.
double concordance(const std::vector<float>& scores, const std::vector<double>& costs) {
  double agree = 0;
  int pairs = 0;
  for (size_t i = 0; i < costs.size(); ++i) {
    for (size_t j = i + 1; j < costs.size(); ++j) {
      if (costs[i] == costs[j]) continue;
      ++pairs;
      bool iFaster = costs[i] < costs[j];
      if (scores[i] == scores[j]) agree += 0.5;
      else if ((scores[i] > scores[j]) == iFaster) agree += 1;
    }
  }
  return pairs ? agree / pairs : 0;
}

// The cost model learns: trained on one half of a synthetic cost table (a nonlinear function of
// six features with interactions and a little noise), it ranks the held-out half far better
// than chance, and its favourite held-out point is among the fastest.
TEST(CostModel, RanksAHeldOutSyntheticCostTable) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::normal_distribution<double> noise(0.0, 0.03);
  auto cost = [&](const std::vector<float>& f) {
    return 1.0 + 4.0 * (f[0] - 0.3) * (f[0] - 0.3) + 1.5 * f[1] * f[2] + 0.5 * std::sin(6.0 * f[3]) +
           (f[4] > 0.5f ? 0.8 * f[5] : 0.0) + noise(rng);
  };
  std::vector<std::vector<float>> trainX, testX;
  std::vector<double> trainCost, testCost;
  for (int i = 0; i < 400; ++i) {
    std::vector<float> f(6);
    for (float& v : f) v = unit(rng);
    (i % 2 ? testX : trainX).push_back(f);
    (i % 2 ? testCost : trainCost).push_back(cost(f));
  }
  // Labels as the tuner makes them: relative speed, best cost / cost.
  const double best = *std::min_element(trainCost.begin(), trainCost.end());
  std::vector<float> labels;
  for (double c : trainCost) labels.push_back(static_cast<float>(best / c));

  CostModel model(1);
  EXPECT_FALSE(model.trained());
  model.fit(trainX, labels, {static_cast<unsigned>(trainX.size())});
  ASSERT_TRUE(model.trained());
  const std::vector<float> scores = model.predict(testX);
  ASSERT_EQ(scores.size(), testX.size());
  const double heldOut = concordance(scores, testCost), seen = concordance(model.predict(trainX), trainCost);
  std::printf("pairs ordered right: %.3f held out, %.3f trained on (chance 0.5)\n", heldOut, seen);
  EXPECT_GT(heldOut, 0.8);

  std::vector<double> sorted = testCost;
  std::sort(sorted.begin(), sorted.end());
  const size_t favourite = static_cast<size_t>(std::max_element(scores.begin(), scores.end()) - scores.begin());
  EXPECT_LE(testCost[favourite], sorted[sorted.size() / 10]) << "the model's favourite is not among the fastest 10 %";
}

/// A synthetic space of `knobs` knobs with `values` values each (a point's index holds its knob
/// values as digits), with one-knob neighbours as ConfigSpace has them, cached as the tuner caches
/// them.
struct KnobGrid {
  int64_t values;
  int knobs;
  std::map<int64_t, std::vector<int64_t>> cache;
  int64_t knob(int64_t index, int k) const {
    for (int i = 0; i < k; ++i) index /= values;
    return index % values;
  }
  const std::vector<int64_t>& neighbors(int64_t i) {
    auto [it, fresh] = cache.try_emplace(i);
    if (!fresh) return it->second;
    int64_t stride = 1;
    for (int k = 0; k < knobs; ++k, stride *= values)
      for (int64_t v = 0; v < values; ++v)
        if (v != knob(i, k)) it->second.push_back(i + (v - knob(i, k)) * stride);
    return it->second;
  }
};

// Annealing finds the optimum of a known space too large to visit: 4 knobs of 10 values each
// (10,000 points, one-knob neighbours as in ConfigSpace), scored like a cost model's predictions:
// bounded, a peak of 1 at knobs (7, 2, 9, 4) with coupled knobs, and a lower peak of 0.7 at
// (2, 8, 1, 6) to lure chains away. 48 chains of 80 steps meet at most 3,840 points; their random
// starts alone would hold the optimum in 0.5 % of the runs. Annealing ends slightly warm, so a
// run may stop one knob short: here 8 of the 10 seeds return the optimum itself, and every one
// returns a point within one knob of it.
TEST(Anneal, FindsTheOptimumOfAKnownSpace) {
  constexpr int64_t kValues = 10, kKnobs = 4, kSize = kValues * kValues * kValues * kValues;
  const int64_t peak[kKnobs] = {7, 2, 9, 4}, lure[kKnobs] = {2, 8, 1, 6};
  KnobGrid grid{kValues, kKnobs, {}};
  auto knob = [&](int64_t index, int k) { return grid.knob(index, k); };
  std::vector<float> scores(kSize);
  for (int64_t i = 0; i < kSize; ++i) {
    double d[kKnobs], e[kKnobs];
    for (int k = 0; k < kKnobs; ++k) {
      d[k] = static_cast<double>(knob(i, k) - peak[k]);
      e[k] = static_cast<double>(knob(i, k) - lure[k]);
    }
    double q = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + d[3] * d[3] + 0.8 * d[0] * d[1] + 0.5 * d[2] * d[3];
    double r = e[0] * e[0] + e[1] * e[1] + e[2] * e[2] + e[3] * e[3];
    scores[static_cast<size_t>(i)] = static_cast<float>(std::exp(-q / 8) + 0.7 * std::exp(-r / 8));
  }
  const int64_t optimum = peak[0] + kValues * (peak[1] + kValues * (peak[2] + kValues * peak[3]));
  ASSERT_EQ(std::max_element(scores.begin(), scores.end()) - scores.begin(), optimum);
  const float oneKnobOff = 0.88f;  // exp(-1/8) = 0.8825: the best points but the optimum
  auto neighbors = [&](int64_t i) -> const std::vector<int64_t>& { return grid.neighbors(i); };
  auto none = [](int64_t) { return false; };

  int found = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<int64_t> best = anneal(scores, neighbors, none, {}, 5, rng);
    ASSERT_EQ(best.size(), 5u) << "seed " << seed;
    found += best[0] == optimum;
    EXPECT_GE(scores[static_cast<size_t>(best[0])], oneKnobOff) << "seed " << seed << ": stopped at " << best[0];
    for (size_t i = 1; i < best.size(); ++i)
      EXPECT_GE(scores[static_cast<size_t>(best[i - 1])], scores[static_cast<size_t>(best[i])]) << "seed " << seed;
  }
  EXPECT_GE(found, 7) << "the optimum itself in " << found << " of 10 runs";

  // Points the caller has measured are left out: the optimum is not proposed again, one of the
  // next best points is.
  std::mt19937_64 rng(1);
  std::vector<int64_t> rest = anneal(scores, neighbors, [&](int64_t i) { return i == optimum; }, {}, 1, rng);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_NE(rest[0], optimum);
  EXPECT_GE(scores[static_cast<size_t>(rest[0])], oneKnobOff);
}

// The evolutionary search climbs a known space while scoring a small part of it: 3 knobs of 20
// values (8,000 points, one-knob neighbours, crossover as ConfigSpace's), a peaked score like the
// annealing test's. Scoring about 300 points, every seed ends within two unit steps of the
// optimum, and on average well above what as many random points reach (0.83 vs 0.70 when this
// was written). Each point is scored once, at most population × (generations + 1) in all, and
// points the caller skips are never returned.
TEST(Evolve, FindsTheOptimumScoringFewPointsOnce) {
  constexpr int64_t kValues = 20, kKnobs = 3, kSize = kValues * kValues * kValues;
  const int64_t peak[kKnobs] = {13, 4, 17};
  KnobGrid grid{kValues, kKnobs, {}};
  auto knob = [&](int64_t index, int k) { return grid.knob(index, k); };
  auto scoreOf = [&](int64_t i) {
    double q = 0;
    for (int k = 0; k < kKnobs; ++k) q += static_cast<double>((knob(i, k) - peak[k]) * (knob(i, k) - peak[k]));
    return static_cast<float>(std::exp(-q / 8));
  };
  const int64_t optimum = peak[0] + kValues * (peak[1] + kValues * peak[2]);
  std::map<int64_t, int> scoredTimes;
  EvolveSpace space;
  space.score = [&](const std::vector<int64_t>& points) {
    std::vector<float> out;
    for (int64_t p : points) ++scoredTimes[p], out.push_back(scoreOf(p));
    return out;
  };
  space.neighbors = [&](int64_t i) -> const std::vector<int64_t>& { return grid.neighbors(i); };
  space.crossover = [&](int64_t a, int64_t b, std::mt19937_64& rng) -> std::optional<int64_t> {
    int64_t child = 0, stride = 1;
    for (int k = 0; k < kKnobs; ++k, stride *= kValues) child += stride * (rng() % 2 ? knob(a, k) : knob(b, k));
    return child;
  };
  space.random = [&](std::mt19937_64& rng) { return static_cast<int64_t>(rng() % kSize); };
  space.skip = [](int64_t) { return false; };

  EvolveOptions options;
  options.population = 48;
  options.generations = 6;
  double evolved = 0, sampled = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    scoredTimes.clear();
    std::mt19937_64 rng(seed);
    std::vector<int64_t> best = evolve(space, {}, 4, rng, options);
    ASSERT_EQ(best.size(), 4u);
    EXPECT_GE(scoreOf(best[0]), std::exp(-2.0f / 8) - 1e-6f) << "seed " << seed;  // two unit steps
    for (size_t i = 1; i < best.size(); ++i) EXPECT_GE(scoreOf(best[i - 1]), scoreOf(best[i]));
    EXPECT_LE(static_cast<int>(scoredTimes.size()), options.population * (options.generations + 1));
    for (const auto& [point, times] : scoredTimes) ASSERT_EQ(times, 1) << "point " << point << " scored twice";
    evolved += scoreOf(best[0]);
    float random = 0;
    std::mt19937_64 other(seed + 100);
    for (size_t i = 0; i < scoredTimes.size(); ++i) random = std::max(random, scoreOf(static_cast<int64_t>(other() % kSize)));
    sampled += random;
  }
  std::printf("best score, mean of 10 seeds: evolved %.3f, as many random points %.3f\n", evolved / 10, sampled / 10);
  EXPECT_GT(evolved, sampled + 0.5) << "no better than random sampling";

  // Starting from the optimum and skipping it: it breeds, but the result leaves it out.
  std::mt19937_64 rng(1);
  space.skip = [&](int64_t i) { return i == optimum; };
  std::vector<int64_t> rest = evolve(space, {optimum}, 3, rng, options);
  ASSERT_FALSE(rest.empty());
  for (int64_t p : rest) EXPECT_NE(p, optimum);
  EXPECT_GE(scoreOf(rest[0]), std::exp(-1.0f / 8) - 1e-6f);  // a neighbour of the optimum
}

// Loop features of real candidates: a direct convolution's sketch annotations and a Winograd
// one, compiled from the key as the worker compiles them, give full rows; a wider register tile
// has a larger unrolled inner body; every point's row is computed once.
TEST(TuneFeatures, CandidatesDescribeTheirLoopNests) {
  ConfigSpace space = ConfigSpace::forKey(kConv, avx2());
  CandidateFeatures loops(space, FeatureSet::Loops, avx2(), 2);
  CandidateFeatures both(space, FeatureSet::Both, avx2(), 2);
  const auto& names = tir::loopFeatureNames();
  auto at = [&](const std::vector<float>& row, const std::string& name) {
    return row.at(static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin()));
  };
  auto point = [&](const Knobs& k) {
    auto i = space.indexOf(k);
    EXPECT_TRUE(i.has_value()) << lower::knobsText(k);
    return i.value_or(0);
  };
  const int64_t narrow = point({{"oc_vecs", 1}, {"mi", 1}, {"po", 1}}),
                wide = point({{"oc_vecs", 2}, {"mi", 4}, {"po", 1}}),
                winograd = point({{"algo", 2}, {"oc_vecs", 1}, {"mi", 4}, {"po", 1}});
  for (int64_t i : {narrow, wide, winograd}) {
    const std::vector<float>& row = loops.row(i);
    ASSERT_EQ(row.size(), names.size());
    for (float x : row) EXPECT_TRUE(std::isfinite(x)) << space.config(i).size();
    EXPECT_EQ(both.row(i).size(), space.features(i).size() + names.size());
  }
  // A multiply and an add per tap inside the image (25 of 27 row taps, 31 of 33 column taps with
  // padding 1), 8 input channels, 32 outputs: the direct kernel spends none on padding.
  for (int64_t i : {narrow, wide})
    EXPECT_NEAR(at(loops.row(i), "float_ops"), std::log2(1.0 + 2.0 * 25 * 31 * 8 * 32), 0.05) << i;
  EXPECT_GT(at(loops.row(wide), "inner_body_ops"), at(loops.row(narrow), "inner_body_ops"));
  EXPECT_GT(at(loops.row(wide), "unrolled_iterations"), at(loops.row(narrow), "unrolled_iterations"));
  EXPECT_NE(loops.row(winograd), loops.row(narrow));
  double spent = loops.compileSeconds();
  loops.row(wide);
  EXPECT_EQ(loops.compileSeconds(), spent) << "a row computed twice";
  EXPECT_THROW(featureSetNamed("ansor"), Error);
}

// The xgb tuner with loop features (evolutionary search) still proposes each configuration once
// and only valid ones, on a whole dense space, and compiles each point at most once.
TEST(Tuners, LoopFeatureTunerProposesEachConfigurationOnce) {
  ConfigSpace space = ConfigSpace::forKey(kDense, avx2());
  TunerOptions options;
  options.features = FeatureSet::Loops;
  auto tuner = makeTuner("xgb", space, 5, nullptr, options);
  std::set<int64_t> seen;
  while (!tuner->exhausted()) {
    std::vector<int64_t> batch = tuner->propose(8);
    ASSERT_FALSE(batch.empty());
    std::vector<double> costs;
    for (int64_t i : batch) {
      ASSERT_GE(i, 0);
      ASSERT_LT(i, space.size());
      EXPECT_TRUE(seen.insert(i).second) << "proposed " << i << " twice";
      const Knobs& k = space.config(i);
      costs.push_back(1.0 + std::abs(static_cast<double>(k.at("mi") * k.at("nc") - 12)));
    }
    tuner->update(batch, costs);
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), space.size());
}

TEST(TuneTasks, ExtractedWithWeightsFromTheLoweredModule) {
  // Two convolutions with the same shape and one with another: two tasks, weights 2 and 1, first
  // (the layout transforms at the graph's edges are element nests, one operation per output, after them).
  Graph g;
  ValueId x = g.addInput("x", TensorType{DType::Float32, {1, 8, 10, 10}});
  auto conv = [&](ValueId in, int64_t o, const char* name) {
    ValueId w = g.addConstant(std::string(name) + "_w", lower::testing::randomTensor({o, 8, 3, 3}, 1));
    Attrs a;
    a.set("padding", std::vector<int64_t>{1, 1});
    return g.addNode("conv2d", {in, w}, a, {}, name)[0];
  };
  ValueId a = conv(x, 8, "a"), b = conv(a, 8, "b"), c = conv(b, 16, "c");
  g.setOutputs({c});
  passes::PassManager(passes::parsePipeline("alter-layout{lanes=8}")).run(g);
  std::vector<TuneTask> tasks = extractTasks(lower::lowerGraph(g, avx2()));
  ASSERT_EQ(tasks.size(), 4u);
  for (size_t i = 2; i < tasks.size(); ++i) {
    EXPECT_EQ(tasks[i].kind, "nest");
    EXPECT_TRUE(tasks[i].flops == 8 * 10 * 10 || tasks[i].flops == 16 * 10 * 10) << tasks[i].flops;  // x, c
    EXPECT_NE(tasks[i].key.find("layout_transform"), std::string::npos) << tasks[i].key;
  }
  tasks.resize(2);
  int weights = tasks[0].weight + tasks[1].weight;
  EXPECT_EQ(weights, 3);
  for (const TuneTask& t : tasks) {
    EXPECT_EQ(t.kind, "conv2d_nchwc");
    EXPECT_GT(t.flops, 0);
    EXPECT_FALSE(t.defaultKnobs.empty());
  }
  // Largest weight × FLOPs first.
  EXPECT_GE(tasks[0].weight * tasks[0].flops, tasks[1].weight * tasks[1].flops);
}

// A record of the retired builder's knobs (read by alter-layout for its packing, by lowering as
// the annotation it stands for) builds the sketch with its tile, loop order and granularity, and
// the result still matches the untuned kernel.
TEST(TuneSpace, BuilderRecordBuildsTheAnnotationItStandsFor) {
  for (const std::string& key : {kConv, kPointwise}) {
    Graph reference = taskGraph(key);
    runtime::Tensor x = lower::testing::randomTensor(reference.type(reference.inputs()[0]).shape, 4);
    std::vector<runtime::Tensor> expected = evalGraph(reference, {x}, Engine::Jit, avx2());
    auto configs = std::make_shared<lower::ScheduleConfigs>();
    configs->byKey[key] = {{"oc_vecs", 2}, {"ow_block", 3},  {"flatten", 0},    {"oc_outer", 0},
                           {"unroll", 2},  {"vec_lanes", 4}, {"par_chunks", 16}};
    if (key == kConv) configs->byKey[key]["algo"] = 0;
    const lower::LoweredModule module = lowerTask(key, avx2(), configs);
    const tir::PrimFunc& f = taskKernel(module, key);
    // oc_outer=0 is po = 0 in the pointwise nest, po = 1 in the 3×3's regions (see convAnnotationOf).
    EXPECT_EQ(f.attrs.at("schedule"),
              key == kConv ? "mi=3,oc_vecs=2,par_chunks=16,po=1" : "mi=3,oc_vecs=2,par_chunks=16,po=0");
    EXPECT_EQ(f.attrs.at("parallel_chunks"), "16");
    expectResultWith(key, configs, x, expected);
  }
}

}  // namespace
}  // namespace kiln::core::tune
