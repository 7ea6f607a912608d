// The element and row nests' sketches (core/lower/nest_search.h): each annotation computes what
// the plain nest does (TIR interpreter), its trace replays to the same function, a reshape's
// divisions vanish from the vector loop, and a reduction's accumulators are vectors.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "core/ir/parser.h"
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

  // Only f32 nests have keys (a task graph fills its inputs with random floats).
  Graph ints = parseGraph(R"(graph(%x: i32[4,6]) {
  %t = transpose(%x) {perm=[1,0]} : i32[6,4]
  %n = neg(%t) : i32[6,4]
  return %n
})");
  EXPECT_EQ(lowerNest(ints, options).attrs.count("tune_key"), 0u);
}

// An element op outside any group is a nest of its own, with a key, and a softmax along the last
// axis a row nest with a key; other ops and non-f32 ones keep their own lowerings.
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
  EXPECT_EQ(byName.at("transpose_0")->attrs.count("tune_key"), 0u);
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
  configs->byKey[key] = {{"vl", 3}, {"un", 1}, {"par", 0}};
  EXPECT_EQ(lowerNest(g, options).attrs.at("schedule"), knobsText(elementNestDefaultKnobs(8 * 48, options)));
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
// kernel with that key. Reductions that are not along rows, softmax along another axis and
// integer reductions have none.
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
  for (const PrimFunc& f : lowerGraph(g, {}).funcs) EXPECT_EQ(f.attrs.count("tune_key"), 0u) << f.name;
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
