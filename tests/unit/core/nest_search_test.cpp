// The element and row nests' sketches (core/lower/nest_search.h): each annotation computes what
// the plain nest does (TIR interpreter), its trace replays to the same function, a reshape's
// divisions vanish from the vector loop, and a reduction's accumulators are vectors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "core/ir/parser.h"
#include "core/lower/gemm_search.h"
#include "core/lower/interpreter.h"
#include "core/lower/lower.h"
#include "core/lower/nest_search.h"
#include "core/lower/schedule_config.h"
#include "core/passes/fuse_ops.h"
#include "core/tir/printer.h"
#include "core/tir/schedule.h"
#include "core/tir/simplify.h"
#include "core/tir/trace.h"
#include "runtime/error.h"
#include "tests/unit/core/kernels_test_util.h"

namespace kiln::core::lower {
namespace {

using namespace tir;

/// y[i, j] = x[j, i] for i < 6, j < 20: a transpose, serial and scalar.
PrimFunc plainTranspose() {
  Buffer x = makeBuffer("x", Type::f32(), {20, 6}), y = makeBuffer("y", Type::f32(), {6, 20});
  Expr i = Var::make("i"), j = Var::make("j");
  PrimFunc f;
  f.name = "transpose";
  f.params = {x, y};
  f.numOutputs = 1;
  f.body =
      For::make(i, 0, 6, ForKind::Serial,
                For::make(j, 0, 20, ForKind::Serial, Store::make(y, i * 20 + j, Load::make(x, j * 6 + i))));
  return f;
}

/// z[i, j] = c[j / 64, i, j % 64] for i < 128, j < 256: transpose(c) then a reshape that merges
/// the last two axes, read through the merged index.
PrimFunc plainMerge() {
  Buffer c = makeBuffer("c", Type::f32(), {4, 128, 64}), z = makeBuffer("z", Type::f32(), {128, 256});
  Expr i = Var::make("i"), j = Var::make("j");
  Expr flat = i * 256 + j;
  PrimFunc f;
  f.name = "merge";
  f.params = {c, z};
  f.numOutputs = 1;
  Expr index = (flat / 64) % 4 * 8192 + i * 64 + flat % 64;
  f.body = For::make(i, 0, 128, ForKind::Serial,
                     For::make(j, 0, 256, ForKind::Serial, Store::make(z, flat, Load::make(c, index))));
  return f;
}

std::vector<std::vector<float>> run(const PrimFunc& f) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<std::vector<float>> args;
  std::vector<void*> pointers;
  for (const Buffer& b : f.params) {
    args.emplace_back(static_cast<size_t>(b->numel()));
    for (float& v : args.back()) v = dist(rng);
  }
  for (auto& a : args) pointers.push_back(a.data());
  interpret(f, pointers);
  return args;
}

/// The sketch under `knobs`; checks the values and the trace's replay.
PrimFunc sketched(const PrimFunc& plain, const std::string& block, const Knobs& knobs) {
  Schedule sched(plain);
  applyElementNestSketch(sched, block, knobs);
  PrimFunc out = sched.func();
  EXPECT_EQ(run(out), run(plain)) << knobsText(knobs) << "\n" << print(out);
  // Scalar, not unrolled and serial: no step at all.
  const std::string trace = out.attrs.count("trace") ? out.attrs.at("trace") : "";
  EXPECT_EQ(print(Trace::parse(trace).apply(plain)), print(out)) << knobsText(knobs);
  return out;
}

TEST(ElementNestSketch, EveryAnnotationComputesThePlainNest) {
  for (int64_t vl : {1, 4, 8, 16})
    for (int64_t un : {1, 2, 4})
      for (int64_t par : {0, 1}) sketched(plainTranspose(), "y", {{"vl", vl}, {"un", un}, {"par", par}});
}

TEST(ElementNestSketch, VectorsTailUnrollAndParallel) {
  // 20 columns: two vectors of 8, unrolled, and a tail of 4 as one vector; 6 rows are too few to
  // be the parallel loop and the vectors are unrolled away: nothing runs in parallel.
  PrimFunc f = sketched(plainTranspose(), "y", {{"vl", 8}, {"un", 2}, {"par", 1}});
  EXPECT_EQ(f.attrs.at("trace"), "split(j; 8, 1)\nvectorize(j_i)\nvectorize(j_t)\nunroll(j_o)\n");
  // Vectors of 4: five of them, the loop over them parallel.
  f = sketched(plainTranspose(), "y", {{"vl", 4}, {"un", 1}, {"par", 1}});
  EXPECT_EQ(f.attrs.at("trace"), "split(j; 4, 1)\nvectorize(j_i)\nparallel(j_o)\n");
  std::string text = print(f);
  EXPECT_NE(text.find("x[ramp("), std::string::npos) << text;  // a gather: stride 6
}

TEST(ElementNestSketch, AReshapeBoundarySplitsTheLoopAndItsDivisionsVanish) {
  PrimFunc f = sketched(plainMerge(), "z", {{"vl", 16}, {"un", 1}, {"par", 1}});
  EXPECT_EQ(f.attrs.at("trace"), "split(j; 64, 1)\nsplit(j_i; 16, 1)\nvectorize(j_i_i)\nparallel(i)\n");
  std::string text = print(f);
  EXPECT_EQ(text.find('/'), std::string::npos) << text;
  EXPECT_EQ(text.find('%'), std::string::npos) << text;
  EXPECT_NE(text.find("c[ramp("), std::string::npos) << text;
}

// The lowering of a fused element chain runs the sketch under its default annotation and records
// both on the kernel.
TEST(ElementNestSketch, FusedElementChainsRunTheDefaultSketch) {
  Graph g = parseGraph(R"(graph(%x: f32[1,4,128,64]) {
  %t = transpose(%x) {perm=[0,2,1,3]} : f32[1,128,4,64]
  %r = reshape(%t) {shape=[1,128,256]} : f32[1,128,256]
  %e = relu(%r) : f32[1,128,256]
  return %e
})");
  ASSERT_TRUE(passes::fuseOps(g));
  LowerOptions options;
  options.vectorLanes = 16;
  PrimFunc f = lowerGroup(g, 0, "f", options);
  EXPECT_EQ(f.attrs.at("schedule"), "par=1,un=1,vl=16");
  EXPECT_EQ(f.attrs.at("trace"), "split(i2; 64, 1)\nsplit(i2_i; 16, 1)\nvectorize(i2_i_i)\nparallel(i1)\n");
  std::string text = print(f);
  EXPECT_EQ(text.find('/'), std::string::npos) << text;
  EXPECT_NE(text.find("x[ramp("), std::string::npos) << text;
  EXPECT_EQ(elementNestDefaultKnobs(8, options), (Knobs{{"par", 0}, {"un", 1}, {"vl", 16}}));
}

const char* kNestGraph = R"(graph(%x: f32[2,8,24], %y: f32[24]) {
  %t = transpose(%x) {perm=[1,0,2]} : f32[8,2,24]
  %a = add(%t, %y) : f32[8,2,24]
  %r = reshape(%a) {shape=[8,48]} : f32[8,48]
  %e = sigmoid(%r) : f32[8,48]
  return %e
})";

PrimFunc lowerNest(const Graph& graph, const LowerOptions& options) {
  Graph g = graph;
  EXPECT_TRUE(passes::fuseOps(g));
  EXPECT_EQ(g.groups().size(), 1u);
  return lowerGroup(g, 0, "f", options);
}

// A nest's tuning key is its group's workload, and the graph the key describes lowers to a
// kernel with the same key: a task is rebuilt from the key alone.
TEST(ElementNestKey, TheTaskGraphOfAKeyHasTheKernelOfThatKey) {
  LowerOptions options;
  options.vectorLanes = 8;
  PrimFunc f = lowerNest(parseGraph(kNestGraph), options);
  const std::string key = f.attrs.at("tune_key");
  EXPECT_EQ(key, "nest:" + f.attrs.at("workload_key"));
  EXPECT_EQ(parseTuneKey(key).kind, "nest");
  EXPECT_EQ(elementNestOutputs(key), 8 * 48);
  Graph task = nestTaskGraph(key);
  EXPECT_EQ(task.inputs().size(), 2u);
  LoweredModule module = lowerGraph(task, options);
  int withKey = 0;
  for (const PrimFunc& k : module.funcs)
    withKey += k.attrs.count("tune_key") && k.attrs.at("tune_key") == key;
  EXPECT_EQ(withKey, 1) << key;

  // Nests of other dtypes have keys too, and their task graphs hold their kernels.
  Graph ints = parseGraph(R"(graph(%x: i32[4,6]) {
  %t = transpose(%x) {perm=[1,0]} : i32[6,4]
  %n = neg(%t) : i32[6,4]
  return %n
})");
  const std::string intKey = lowerNest(ints, options).attrs.at("tune_key");
  EXPECT_EQ(intKey, "nest:fused[transpose{perm=[1,0]}($0:i32[4,6])->i32[6,4]; neg(%0)->i32[6,4]]");
  withKey = 0;
  for (const PrimFunc& k : lowerGraph(nestTaskGraph(intKey), options).funcs)
    withKey += k.attrs.count("tune_key") && k.attrs.at("tune_key") == intKey;
  EXPECT_EQ(withKey, 1) << intKey;
}

// An element op outside any group (of any dtype) is a nest of its own, with a key, and a softmax
// along the last axis a row nest with a key.
TEST(ElementNestKey, ElementOpsOutsideGroupsAreNestsOfTheirOwn) {
  Graph g = parseGraph(R"(graph(%x: f32[1,128,256], %m: f32[1,128,1], %i: i32[4,6]) {
  %c = sub(%x, %m) : f32[1,128,256]
  %s = softmax(%c) {axis=2} : f32[1,128,256]
  %t = transpose(%i) {perm=[1,0]} : i32[6,4]
  return %s, %t
})");
  LowerOptions options;
  options.vectorLanes = 16;
  LoweredModule module = lowerGraph(g, options);
  std::map<std::string, const PrimFunc*> byName;
  for (const PrimFunc& f : module.funcs) byName[f.name] = &f;
  ASSERT_TRUE(byName.count("sub_0"));
  const PrimFunc& sub = *byName.at("sub_0");
  EXPECT_EQ(sub.attrs.at("op"), "sub");
  EXPECT_EQ(sub.attrs.at("tune_key"), "nest:fused[sub($0:f32[1,128,256],$1:f32[1,128,1])->f32[1,128,256]]");
  EXPECT_EQ(sub.attrs.at("trace"), "split(i2; 16, 1)\nvectorize(i2_i)\nparallel(i1)\n");
  EXPECT_EQ(nestTaskGraph(sub.attrs.at("tune_key")).nodes().size(), 1u);
  ASSERT_TRUE(byName.count("softmax_0") && byName.count("transpose_0"));
  EXPECT_EQ(byName.at("softmax_0")->attrs.at("tune_key"),
            "reduce:fused[softmax{axis=2}($0:f32[1,128,256])->f32[1,128,256]]");
  EXPECT_EQ(rowNestShapeOfKey(byName.at("softmax_0")->attrs.at("tune_key")).rows, 128);
  EXPECT_EQ(byName.at("transpose_0")->attrs.at("tune_key"),
            "nest:fused[transpose{perm=[1,0]}($0:i32[4,6])->i32[6,4]]");
}

/// Every kernel of `module` is an element nest with a key and a trace (none when scalar and
/// serial: no step), and its key's task graph lowers to one kernel with that key.
void expectNestsRebuiltFromTheirKeys(const LoweredModule& module, const LowerOptions& options) {
  for (const PrimFunc& f : module.funcs) {
    SCOPED_TRACE(f.name);
    ASSERT_TRUE(f.attrs.count("tune_key"));
    const std::string& key = f.attrs.at("tune_key");
    EXPECT_EQ(parseTuneKey(key).kind, "nest");
    EXPECT_EQ(f.attrs.count("trace") == 0, f.attrs.at("schedule") == "par=0,un=1,vl=1");
    int withKey = 0;
    for (const PrimFunc& k : lowerGraph(nestTaskGraph(key), options).funcs)
      withKey += k.attrs.count("tune_key") && k.attrs.at("tune_key") == key;
    EXPECT_EQ(withKey, 1);
  }
}

// Gathers, comparisons, casts, selects and broadcasts are members of element nests, of any
// dtype: fuse-ops groups an embedding lookup with the adds after it and a padding mask's
// comparison with its cast and scale (what bert_encoder does); each kernel has a key whose task
// graph holds it; interpreter and JIT agree with a reference computed here. take wraps negative
// indices and clamps bad ones; a gather along the last axis varies its row across the vector.
TEST(ElementNestKey, GathersComparisonsCastsAndSelectsAreNestMembers) {
  Graph g =
      parseGraph(R"(graph(%ids: i64[2,5], %table: f32[7,6], %pos: f32[2,5,6], %p: f32[2,5,6], %q: f32[6],
      %m: f32[4,9], %j: i32[3]) {
  %e = take(%table, %ids) {axis=0} : f32[2,5,6]
  %a = add(%e, %pos) : f32[2,5,6]
  %zero = constant i64[] [0]
  %z = equal(%ids, %zero) : bool[2,5]
  %f = cast(%z) {dtype="f32"} : f32[2,5]
  %big = constant f32[] [-100]
  %mask = mul(%f, %big) : f32[2,5]
  %b = broadcast_to(%q) {shape=[2,5,6]} : f32[2,5,6]
  %gt = greater(%p, %b) : bool[2,5,6]
  %w = where(%gt, %p, %b) : f32[2,5,6]
  %c = cast(%w) {dtype="i32"} : i32[2,5,6]
  %col = take(%m, %j) {axis=1} : f32[4,3]
  %n = neg(%col) : f32[4,3]
  return %a, %mask, %c, %n
})");
  ASSERT_TRUE(passes::fuseOps(g));
  std::vector<std::string> groups;
  for (const FusedGroup& group : g.groups()) groups.push_back(group.name);
  EXPECT_EQ(groups,
            (std::vector<std::string>{"fused_take_add_0", "fused_equal_cast_mul_0",
                                      "fused_broadcast_to_greater_where_cast_0", "fused_take_neg_0"}));
  std::mt19937 rng(3);
  runtime::Tensor ids = runtime::Tensor::zeros(DType::Int64, {2, 5}),
                  j = runtime::Tensor::zeros(DType::Int32, {3});
  const int64_t rows[] = {0, 3, -1, 6, 9, 0, -7, 2, 5, 1};  // -1 wraps to 6; 9 and -7 clamp
  for (int i = 0; i < 10; ++i) ids.data<int64_t>()[i] = rows[i];
  const int32_t cols[] = {8, 0, 4};
  for (int i = 0; i < 3; ++i) j.data<int32_t>()[i] = cols[i];
  runtime::Tensor pos = testing::randomTensor({2, 5, 6}, 4), p = testing::randomTensor({2, 5, 6}, 5, -3, 3);
  runtime::Tensor q = testing::randomTensor({6}, 6, -3, 3), m = testing::randomTensor({4, 9}, 7);
  runtime::Tensor tableTensor = testing::randomTensor({7, 6}, 8);
  const float* table = tableTensor.data<float>();
  std::vector<float> a, mask, c, n;
  for (int i = 0; i < 10; ++i) {
    const int64_t row = std::clamp<int64_t>(rows[i] < 0 ? rows[i] + 7 : rows[i], 0, 6);
    for (int k = 0; k < 6; ++k) a.push_back(table[row * 6 + k] + pos.data<float>()[i * 6 + k]);
    mask.push_back(rows[i] == 0 ? -100.0f : 0.0f);
    for (int k = 0; k < 6; ++k) {
      const float pv = p.data<float>()[i * 6 + k], qv = q.data<float>()[k];
      c.push_back(static_cast<float>(static_cast<int32_t>(pv > qv ? pv : qv)));
    }
  }
  for (int r = 0; r < 4; ++r)
    for (int col : cols) n.push_back(-m.data<float>()[r * 9 + col]);
  LowerOptions options;
  options.vectorLanes = 8;
  LoweredModule module = lowerGraph(g, options);
  EXPECT_EQ(module.funcs.size(), 4u);
  expectNestsRebuiltFromTheirKeys(module, options);
  for (testing::Engine engine : {testing::Engine::Interpreter, testing::Engine::Jit}) {
    std::vector<runtime::Tensor> out =
        testing::evalModule(module, {ids, tableTensor, pos, p, q, m, j}, engine);
    ASSERT_EQ(out.size(), 4u);
    EXPECT_TRUE(testing::allClose(out[0], a, 1e-6));
    EXPECT_TRUE(testing::allClose(out[1], mask, 0));
    ASSERT_EQ(out[2].dtype(), DType::Int32);
    std::vector<float> got;
    for (int64_t i = 0; i < out[2].numel(); ++i) got.push_back(static_cast<float>(out[2].data<int32_t>()[i]));
    EXPECT_EQ(got, c);
    EXPECT_TRUE(testing::allClose(out[3], n, 0));
  }
}

// The quantized element ops are nest members too: a dequantize, float ops, a quantize and a
// quantized add fuse into one u8 → u8 nest, a packing quantize is a nest of its own, both keyed,
// and each computes bit for bit what the ops' own lowerings compute one by one (interpreted), and
// what the unfused graph computes (compiled).
TEST(ElementNestKey, QuantizedElementOpsAreNestMembers) {
  const char* text = R"(graph(%a: u8[2,3,5,7], %b: u8[2,3,5,7], %x: f32[2,3,5,7]) {
  %d = qnn.dequantize(%a) {scale=0.05, zero_point=3} : f32[2,3,5,7]
  %h = hardswish(%d) : f32[2,3,5,7]
  %q = qnn.quantize(%h) {output_scale=0.04, output_zero_point=7} : u8[2,3,5,7]
  %s = qnn.add(%q, %b) {a_scale=0.04, a_zero_point=7, b_scale=0.03, b_zero_point=128, output_scale=0.06, output_zero_point=9, relu=1} : u8[2,3,5,7]
  %p = qnn.quantize(%x) {output_scale=0.02, output_zero_point=100, out_layout="NCHW16c"} : u8[2,1,5,7,16]
  return %s, %p
})";
  Graph plain = parseGraph(text), g = plain;
  ASSERT_TRUE(passes::fuseOps(g));
  ASSERT_EQ(g.groups().size(), 1u);
  EXPECT_EQ(g.groups()[0].name, "fused_qnn.dequantize_hardswish_qnn.quantize_qnn.add_0");
  std::mt19937 rng(5);
  std::vector<runtime::Tensor> inputs;
  for (ValueId v : plain.inputs()) {
    runtime::Tensor t = runtime::Tensor::zeros(plain.type(v).dtype, plain.type(v).shape);
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (t.dtype() == DType::UInt8)
        t.data<uint8_t>()[i] = static_cast<uint8_t>(rng() % 256);
      else
        t.data<float>()[i] = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 200.0f;
    }
    inputs.push_back(std::move(t));
  }
  // The reference: every node by its own lowering (lowerNode), interpreted.
  std::map<ValueId, runtime::Tensor> values;
  for (size_t i = 0; i < inputs.size(); ++i) values[plain.inputs()[i]] = inputs[i];
  for (NodeId n = 0; n < static_cast<NodeId>(plain.nodes().size()); ++n) {
    const Node& node = plain.node(n);
    std::vector<void*> args;
    for (ValueId v : node.inputs) args.push_back(values.at(v).raw());
    values[node.outputs[0]] =
        runtime::Tensor::zeros(plain.type(node.outputs[0]).dtype, plain.type(node.outputs[0]).shape);
    args.push_back(values[node.outputs[0]].raw());
    interpret(lowerNode(plain, n, "op"), args);
  }
  LowerOptions options;
  options.vectorLanes = 16;
  LoweredModule module = lowerGraph(g, options);
  EXPECT_EQ(module.funcs.size(), 2u);
  expectNestsRebuiltFromTheirKeys(module, options);
  // The packing quantize's vectors would gather (three channels padded to a block of 16): it runs
  // scalar untuned (nest_search.h gathersBytes); the fused chain reads adjacent bytes, in vectors.
  for (const PrimFunc& f : module.funcs)
    EXPECT_EQ(f.attrs.at("schedule"), f.name == "qnn.quantize_0" ? "par=0,un=1,vl=1" : "par=0,un=1,vl=16")
        << f.name;
  // Compiled code may contract a dequantize's x·scale + shift into an FMA (codegen_llvm.cpp), so
  // the JIT's reference is the unfused graph compiled alike.
  const std::vector<runtime::Tensor> unfusedJit =
      testing::evalModule(lowerGraph(plain, options), inputs, testing::Engine::Jit);
  for (testing::Engine engine : {testing::Engine::Interpreter, testing::Engine::Jit}) {
    std::vector<runtime::Tensor> out = testing::evalModule(module, inputs, engine);
    ASSERT_EQ(out.size(), 2u);
    for (int o = 0; o < 2; ++o) {
      const runtime::Tensor& want =
          engine == testing::Engine::Jit ? unfusedJit[o] : values.at(plain.outputs()[o]);
      ASSERT_EQ(out[o].numel(), want.numel());
      int64_t differ = 0, first = -1;
      for (int64_t i = 0; i < want.numel(); ++i)
        if (out[o].data<uint8_t>()[i] != want.data<uint8_t>()[i] && differ++ == 0) first = i;
      EXPECT_EQ(differ, 0) << "output " << o << (engine == testing::Engine::Jit ? " (JIT)" : " (interpreter)")
                           << ", first at " << first;
    }
  }
}

TEST(ElementNestKey, MalformedKeysAreRefusedInOneLine) {
  for (const char* key : {"nest:", "nest:relu($0:f32[4])->f32[4]", "nest:fused[relu($0:f32[4])->f32[4]",
                          "nest:fused[relu($1:f32[4])->f32[4]]", "nest:fused[relu(%3)->f32[4]]",
                          "nest:fused[relu($0:f32[4])]", "nest:fused[nosuchop($0:f32[4])->f32[4]]"}) {
    SCOPED_TRACE(key);
    try {
      nestTaskGraph(key);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  }
}

// A record of the key chooses the annotation; one that is not an annotation builds the default.
TEST(ElementNestKey, RecordsChooseTheAnnotation) {
  LowerOptions options;
  options.vectorLanes = 16;
  Graph g = parseGraph(kNestGraph);
  const std::string key = lowerNest(g, options).attrs.at("tune_key");
  std::vector<Knobs> all = elementNestAnnotations(8 * 48, options);
  EXPECT_EQ(all.size(), 24u);  // vl 16, 8, 4, 1 × un 1, 2, 4 × par 0, 1
  EXPECT_EQ(all.front(), elementNestDefaultKnobs(8 * 48, options));
  auto configs = std::make_shared<ScheduleConfigs>();
  options.schedules = configs;
  // The reshape cuts the 48 columns into 2 × 24: six vectors of 4, unrolled by 2.
  configs->byKey[key] = {{"vl", 4}, {"un", 2}, {"par", 0}};
  PrimFunc tuned = lowerNest(g, options);
  EXPECT_EQ(tuned.attrs.at("schedule"), "par=0,un=2,vl=4");
  EXPECT_NE(tuned.attrs.at("trace").find("unroll("), std::string::npos) << tuned.attrs.at("trace");
  // What the tuner records for the annotation, from the key alone.
  EXPECT_EQ(sketchTrace(key, configs->byKey[key], 16, 32).str(), tuned.attrs.at("trace"));
  configs->byKey[key] = {{"vl", 3}, {"un", 1}, {"par", 0}};
  EXPECT_EQ(lowerNest(g, options).attrs.at("schedule"), knobsText(elementNestDefaultKnobs(8 * 48, options)));
  EXPECT_THROW(sketchTrace(key, configs->byKey[key], 16, 32), Error);
}

// ---- row nests -------------------------------------------------------------------------------------

/// The kernel with a row nest's tuning key of `text` (fused at O2 when `fuse`), under `knobs`
/// when given.
PrimFunc rowKernel(const std::string& text, bool fuse, const Knobs* knobs = nullptr, int lanes = 8) {
  Graph g = parseGraph(text);
  if (fuse) passes::fuseOps(g);  // a lone op stays outside groups
  LowerOptions options;
  options.vectorLanes = lanes;
  LoweredModule plain = lowerGraph(g, options);
  const PrimFunc* found = nullptr;
  for (const PrimFunc& f : plain.funcs)
    if (f.attrs.count("tune_key") && f.attrs.at("tune_key").rfind("reduce:", 0) == 0) found = &f;
  EXPECT_TRUE(found) << text;
  if (!found || !knobs) return found ? *found : PrimFunc();
  auto configs = std::make_shared<ScheduleConfigs>();
  configs->byKey[found->attrs.at("tune_key")] = *knobs;
  options.schedules = configs;
  LoweredModule tuned = lowerGraph(g, options);
  for (const PrimFunc& f : tuned.funcs)
    if (f.name == found->name) return f;
  ADD_FAILURE() << "no kernel " << found->name;
  return PrimFunc();
}

::testing::AssertionResult close(const std::vector<std::vector<float>>& a,
                                 const std::vector<std::vector<float>>& b) {
  for (size_t p = 0; p < a.size(); ++p)
    for (size_t i = 0; i < a[p].size(); ++i)
      if (!(std::fabs(a[p][i] - b[p][i]) <= 1e-5 * (1 + std::fabs(b[p][i]))))
        return ::testing::AssertionFailure()
               << "argument " << p << " element " << i << ": " << a[p][i] << " vs " << b[p][i];
  return ::testing::AssertionSuccess();
}

const char* kRowGraphs[] = {
    // A mean whose row (37) leaves a scalar tail after any vectors.
    R"(graph(%x: f32[3,37]) {
  %m = mean(%x) {axes=[1], keepdims=1} : f32[3,1]
  return %m
})",
    // A max over two trailing axes: rows of 60.
    R"(graph(%x: f32[2,3,20]) {
  %m = max(%x) {axes=[1,2]} : f32[2]
  return %m
})",
    // Layer norm's variance, fused: the row read through a broadcasting prologue.
    R"(graph(%x: f32[4,70], %m: f32[4,1]) {
  %c = sub(%x, %m) : f32[4,70]
  %q = mul(%c, %c) : f32[4,70]
  %v = mean(%q) {axes=[1], keepdims=1} : f32[4,1]
  return %v
})",
    // Softmax along the last axis: four passes over rows of 45.
    R"(graph(%x: f32[6,45]) {
  %s = softmax(%x) {axis=-1} : f32[6,45]
  return %s
})",
};

// Scalar, single accumulator and serial, the sketch applies no step: that kernel is the plain
// nest, and every annotation computes what it does and replays on it (the lowering simplifies the
// result: a loop of one iteration goes).
TEST(RowNestSketch, EveryAnnotationComputesThePlainNest) {
  for (const char* text : kRowGraphs) {
    SCOPED_TRACE(text);
    const Knobs scalar{{"vl", 1}, {"un", 1}, {"par", 0}};
    PrimFunc plain = rowKernel(text, true, &scalar);
    EXPECT_EQ(plain.attrs.count("trace") ? plain.attrs.at("trace") : "", "");
    const std::vector<std::vector<float>> expected = run(plain);
    LowerOptions options;
    options.vectorLanes = 8;
    for (const Knobs& k : rowNestAnnotations(rowNestShapeOfKey(plain.attrs.at("tune_key")), options)) {
      PrimFunc f = rowKernel(text, true, &k);
      EXPECT_EQ(f.attrs.at("schedule"), knobsText(k));
      EXPECT_TRUE(close(run(f), expected)) << knobsText(k) << "\n" << print(f);
      const std::string trace = f.attrs.count("trace") ? f.attrs.at("trace") : "";
      EXPECT_EQ(print(simplify(Trace::parse(trace).apply(plain))), print(f)) << knobsText(k);
    }
  }
}

// The default: 4 accumulators of 8 lanes kept apart by rfactor, then folded as a tree (the upper
// half of the partial results added to the lower half, 32 → 16 → 8 → 4 → 2, the last pair
// scalar); the scalar tail after them.
TEST(RowNestSketch, TheDefaultKeepsVectorAccumulatorsApart) {
  PrimFunc f = rowKernel(kRowGraphs[0], true);
  EXPECT_EQ(f.attrs.at("schedule"), "par=0,un=4,vl=8");
  std::string expected =
      "split(k; 32, 1)\nrfactor(k_i)\nsplit(k_i; 8, 1)\nvectorize(k_i_i)\nunroll(k_i_o)\n"
      "split(k_i_init; 8, 1)\nvectorize(k_i_init_i)\nunroll(k_i_init_o)\n";
  std::string fold = "k_i_fold";
  for (int half : {16, 8, 4, 2}) {
    expected += "split(" + fold + "; " + std::to_string(half) + ", 1)\nrfactor(" + fold + "_i)\nvectorize(" +
                fold + "_i)\nunroll(" + fold + "_o)\nvectorize(" + fold + "_i_init)\n";
    fold += "_i_fold";
  }
  expected += "unroll(" + fold + ")\n";
  EXPECT_EQ(f.attrs.at("trace"), expected);
  const std::string text = print(f);
  EXPECT_NE(text.find("m_rf[ramp((k_i_o * 8), 1, 8)] = (m_rf[ramp((k_i_o * 8), 1, 8)] + x[ramp("),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("for (k_t, 0, 5)"), std::string::npos) << text;
  // The accumulators that leave the fewest elements to the scalar tail, the most of them on a tie:
  // a row of 100 in vectors of 16 takes 2 (4 left), not 4 (36 left); one of 256 takes 4.
  EXPECT_EQ(knob(rowNestDefaultKnobs({128, 100}, 16), "un", 0), 2);
  EXPECT_EQ(knob(rowNestDefaultKnobs({128, 256}, 16), "un", 0), 4);
  EXPECT_EQ(knob(rowNestDefaultKnobs({128, 20}, 16), "un", 0), 1);
  EXPECT_EQ(knob(rowNestDefaultKnobs({128, 8}, 16), "un", 0), 1);  // no whole vector: scalar row
  // Softmax: the max and the sum reduce in vectors, the exponentials and the division are vector
  // maps; rows are parallel when the outputs are many.
  const char* wide = R"(graph(%x: f32[64,100]) {
  %s = softmax(%x) {axis=-1} : f32[64,100]
  return %s
})";
  PrimFunc softmax = rowKernel(wide, false);
  EXPECT_EQ(softmax.attrs.at("schedule"), "par=1,un=4,vl=8");
  EXPECT_EQ(softmax.attrs.at("tune_key"), "reduce:fused[softmax{axis=-1}($0:f32[64,100])->f32[64,100]]");
  const std::string trace = softmax.attrs.at("trace");
  EXPECT_NE(trace.find("rfactor(l_i)"), std::string::npos) << trace;
  EXPECT_NE(trace.find("rfactor(l_2_i)"), std::string::npos) << trace;
  EXPECT_NE(trace.find("vectorize(l_1_i)"), std::string::npos) << trace;
  EXPECT_NE(trace.find("vectorize(l_3_i)"), std::string::npos) << trace;
  EXPECT_NE(trace.find("parallel(o)"), std::string::npos) << trace;
}

// A row nest's key is "reduce:" + its group's workload; the graph the key describes lowers to a
// kernel with that key. Reductions that are not along rows and softmax along another axis have
// none.
TEST(RowNestKey, TheTaskGraphOfAKeyHasTheKernelOfThatKey) {
  for (const char* text : kRowGraphs) {
    SCOPED_TRACE(text);
    PrimFunc f = rowKernel(text, true);
    const std::string key = f.attrs.at("tune_key");
    EXPECT_EQ(key, "reduce:" + f.attrs.at("workload_key"));
    EXPECT_EQ(parseTuneKey(key).kind, "reduce");
    Graph task = nestTaskGraph(key);
    LowerOptions options;
    options.vectorLanes = 8;
    int withKey = 0;
    for (const PrimFunc& k : lowerGraph(task, options).funcs)
      withKey += k.attrs.count("tune_key") && k.attrs.at("tune_key") == key;
    EXPECT_EQ(withKey, 1) << key;
    // A record of the default annotation stores the trace the kernel ran.
    EXPECT_EQ(sketchTrace(key, parseKnobs(f.attrs.at("schedule")), 8, 16).str(), f.attrs.at("trace"));
  }
  EXPECT_EQ(rowNestShapeOfKey("reduce:fused[mean{axes=[1],keepdims=1}($0:f32[3,37])->f32[3,1]]").length, 37);
  RowNestShape softmax = rowNestShapeOfKey("reduce:fused[softmax{axis=-1}($0:f32[6,45])->f32[6,45]]");
  EXPECT_EQ(softmax.rows, 6);
  EXPECT_EQ(softmax.passes, 4);
  Graph g = parseGraph(R"(graph(%x: f32[4,6,5], %i: i32[4,6]) {
  %a = sum(%x) {axes=[1]} : f32[4,5]
  %s = softmax(%x) {axis=1} : f32[4,6,5]
  %n = sum(%i) {axes=[1]} : i32[4]
  return %a, %s, %n
})");
  // Only the integer sum along its last axis is a row nest (keyed like any dtype's).
  for (const PrimFunc& f : lowerGraph(g, {}).funcs)
    EXPECT_EQ(f.attrs.count("tune_key"), f.name == "sum_1" ? 1u : 0u) << f.name;
  for (const char* key : {"reduce:fused[relu($0:f32[4])->f32[4]]",
                          "reduce:fused[softmax{axis=0}($0:f32[6,45])->f32[6,45]]", "reduce:"}) {
    SCOPED_TRACE(key);
    try {
      rowNestShapeOfKey(key);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
    }
  }
}

}  // namespace
}  // namespace kiln::core::lower
