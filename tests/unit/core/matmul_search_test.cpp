// Template-free GEMM schedules (core/lower/gemm_search.h), matmul and dense_packed: tuning keys, the plain nest, the
// sketch's traces (replay to the identical function, pass the verifier, compute what the plain
// nest and a double-precision reference compute on random shapes with broadcast batch axes and
// extents the tiles do not divide), the lowering of tuned matmuls (knobs or a record's trace, in
// the interpreter and as JIT code), a trace that does not replay refused with one line, and the
// dependence check's one-execution shortcut (exact on nests too large to replay whole, and not
// taken where executions differ).
#include "core/lower/gemm_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/ir/parser.h"
#include "core/lower/interpreter.h"
#include "core/lower/lower.h"
#include "core/lower/schedule.h"
#include "core/tir/functor.h"
#include "core/tir/printer.h"
#include "core/tir/schedule_analysis.h"
#include "core/tir/trace.h"
#include "core/tir/verify.h"
#include "runtime/error.h"
#include "tests/unit/core/kernels_test_util.h"
#include "tests/unit/core/lower_test_util.h"

namespace kiln::core::lower {
namespace {

using namespace testing;
using tir::PrimFunc;
using tir::Schedule;
using tir::Trace;

/// Whether an index of a load of parameter `name` in `f` divides or takes a remainder.
bool loadIndexDivides(const PrimFunc& f, const std::string& name) {
  struct Scan : tir::IRVisitor {
    std::string name;
    int depth = 0;  // inside the index of a load of `name`
    bool divides = false;
    using tir::IRVisitor::visit;
    void visit(const tir::Load* op) override {
      bool ours = op->buffer->name == name;
      depth += ours;
      tir::IRVisitor::visit(op);
      depth -= ours;
    }
    void visit(const tir::Div* op) override {
      divides = divides || depth > 0;
      tir::IRVisitor::visit(op);
    }
    void visit(const tir::Mod* op) override {
      divides = divides || depth > 0;
      tir::IRVisitor::visit(op);
    }
  } scan;
  scan.name = name;
  scan.visitStmt(f.body);
  return scan.divides;
}

/// y = a · b (numpy broadcasting over the batch axes) in double precision.
std::vector<float> reference(const MatmulShape& s, const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> y(static_cast<size_t>(s.batches * s.m * s.n));
  for (int64_t bi = 0; bi < s.batches; ++bi) {
    // Batch offsets of each operand (0 along its broadcast axes).
    auto offset = [&](const Shape& op) {
      int64_t off = 0, stride = op[op.size() - 2] * op.back(), rest = bi;
      size_t opBatch = op.size() - 2, lead = s.batch.size() - opBatch;
      std::vector<int64_t> idx(s.batch.size());
      for (size_t d = s.batch.size(); d-- > 0;) idx[d] = rest % s.batch[d], rest /= s.batch[d];
      for (size_t d = opBatch; d-- > 0;) {
        if (op[d] != 1) off += idx[lead + d] * stride;
        stride *= op[d];
      }
      return off;
    };
    int64_t ao = offset(s.a), bo = offset(s.b);
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < s.k; ++q)
          acc += double(a[static_cast<size_t>(ao + i * s.k + q)]) * b[static_cast<size_t>(bo + q * s.n + j)];
        y[static_cast<size_t>((bi * s.m + i) * s.n + j)] = static_cast<float>(acc);
      }
  }
  return y;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

/// Runs a standalone matmul function (params a, b, y) in the interpreter.
std::vector<float> run(const PrimFunc& f, const MatmulShape& s, std::vector<float> a, std::vector<float> b) {
  std::vector<float> y(static_cast<size_t>(s.batches * s.m * s.n), std::nanf(""));
  interpret(f, {a.data(), b.data(), y.data()});
  return y;
}

/// A random matmul: 0-2 batch axes on each operand, some broadcast (size 1 or missing).
MatmulShape randomShape(std::mt19937& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  Shape batch;
  for (int64_t d = pick(0, 2); d > 0; --d) batch.push_back(pick(1, 3));
  int64_t m = pick(1, 13), k = pick(1, 20), n = pick(2, 37);
  auto operand = [&](int64_t rows, int64_t cols) {
    Shape s;
    size_t keep = static_cast<size_t>(pick(0, static_cast<int64_t>(batch.size())));
    for (size_t d = batch.size() - keep; d < batch.size(); ++d) s.push_back(pick(0, 2) == 0 ? 1 : batch[d]);
    s.push_back(rows);
    s.push_back(cols);
    return s;
  };
  Shape a = operand(m, k), b = operand(k, n);
  std::optional<MatmulShape> s = matmulShape(a, b);
  EXPECT_TRUE(s.has_value());
  return *s;
}

std::string keyOf(const MatmulShape& s) { return matmulTuneKey(s, DType::Float32); }

TEST(MatmulSearch, KeysDescribeBothOperands) {
  std::optional<MatmulShape> s = matmulShape({2, 1, 5, 7}, {3, 7, 9});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->batch, (Shape{2, 3}));
  EXPECT_EQ(s->batches, 6);
  std::string key = keyOf(*s);
  EXPECT_EQ(key, "matmul:ra=4,a0=2,a1=1,a2=5,a3=7,rb=3,b0=3,b1=7,b2=9:f32");
  MatmulShape back = matmulShapeOfKey(parseTuneKey(key).params, key);
  EXPECT_EQ(back.a, s->a);
  EXPECT_EQ(back.b, s->b);
  EXPECT_EQ(back.m * back.n * back.k, 5 * 9 * 7);
  EXPECT_FALSE(matmulShape({5}, {5, 3}).has_value());         // a vector operand keeps the hand lowering
  EXPECT_FALSE(matmulShape({2, 4, 5}, {3, 5, 6}).has_value());  // batch axes that do not broadcast
  EXPECT_THROW(matmulPlainFunc("matmul:ra=2,a0=4,a1=5,rb=2,b0=6,b1=3:f32"), Error);  // 5 ≠ 6
  EXPECT_THROW(matmulPlainFunc("matmul:ra=2,a0=4:f32"), Error);
  // The lowering names its kernel's key.
  Graph g = parseGraph(
      "graph(%a: f32[3,5,7], %b: f32[7,9]) {\n  %y = matmul(%a, %b) : f32[3,5,9]\n  return %y\n}\n");
  PrimFunc f = lowerNode(g, 0, "f");
  EXPECT_EQ(f.attrs.at("tune_key"), "matmul:ra=3,a0=3,a1=5,a2=7,rb=2,b0=7,b1=9:f32");
  // No record: the sketch with the default annotation.
  LowerOptions options;  // 8 lanes
  Knobs first = matmulDefaultKnobs(*matmulShape({3, 5, 7}, {7, 9}), 8, accumulatorBudget(options));
  EXPECT_EQ(f.attrs.at("schedule"), knobsText(first));
  EXPECT_EQ(f.attrs.at("trace"), matmulTrace(f.attrs.at("tune_key"), first, 8).str());
  // A vector operand is keyed as the matrix it is lowered as: b [7] as one column [7, 1].
  Graph v = parseGraph("graph(%a: f32[3,5,7], %b: f32[7]) {\n  %y = matmul(%a, %b) : f32[3,5]\n  return %y\n}\n");
  PrimFunc column = lowerNode(v, 0, "f");
  EXPECT_EQ(column.attrs.at("tune_key"), "matmul:ra=3,a0=3,a1=5,a2=7,rb=2,b0=7,b1=1:f32");
  EXPECT_EQ(
      column.attrs.at("trace"),
      matmulTrace(column.attrs.at("tune_key"), matmulDefaultKnobs(*matmulShape({3, 5, 7}, {7, 1}), 8, 12), 8)
          .str());
}

// Products of one output column (b a vector, or a matrix of one column) take the dot-product
// tile, a vector first operand of several columns the sketch as one row; all agree with the
// reference, broadcast batch axes included.
TEST(MatmulSearch, VectorOperandsAndOneColumn) {
  struct Case {
    Shape a, b, y;
  };
  for (const Case& c : {Case{{3, 5, 7}, {7, 1}, {3, 5, 1}}, Case{{2, 1, 5, 7}, {3, 7, 1}, {2, 3, 5, 1}},
                        Case{{3, 5, 7}, {7}, {3, 5}}, Case{{7}, {2, 7, 9}, {2, 9}}, Case{{7}, {7}, {}}}) {
    auto text = [](const Shape& s) {
      std::string t;
      for (size_t d = 0; d < s.size(); ++d) t += (d ? "," : "") + std::to_string(s[d]);
      return "f32[" + t + "]";
    };
    std::string src = "graph(%a: " + text(c.a) + ", %b: " + text(c.b) +
                      ") {\n  %y = matmul(%a, %b) : " + text(c.y) + "\n  return %y\n}\n";
    SCOPED_TRACE(src);
    Graph g = parseGraph(src);
    // The reference as matrices: a vector a is one row, a vector b one column.
    Shape am = c.a.size() == 1 ? Shape{1, c.a[0]} : c.a, bm = c.b.size() == 1 ? Shape{c.b[0], 1} : c.b;
    MatmulShape s = *matmulShape(am, bm);
    runtime::Tensor at = randomTensor(c.a, 1), bt = randomTensor(c.b, 2);
    std::vector<float> want = reference(s, toVector(at), toVector(bt));
    for (Engine e : {Engine::Interpreter, Engine::Jit})
      EXPECT_TRUE(allClose(evalGraph(g, {at, bt}, e)[0], want)) << (e == Engine::Jit ? "jit" : "interp");
  }
}

// The one-column form (N = 1) is dense's dot-product tile on the matmul's plain nest: every
// annotation the space offers (row tiles with and without a tail, each parallel loop) replays to
// the identical function, verifies and computes the product, broadcast batches included; the
// untuned kernel is the default annotation, and a fused relu on a scalar output (two vectors)
// is applied at its store.
TEST(MatmulSearch, OneColumnIsTheDotProductSketch) {
  for (auto [a, b] : {std::pair<Shape, Shape>{{9, 16}, {16, 1}},
                      {{3, 5, 37}, {37, 1}},
                      {{2, 1, 11, 20}, {3, 20, 1}},
                      {{4, 3}, {3, 1}}}) {
    MatmulShape s = *matmulShape(a, b);
    const std::string key = keyOf(s);
    PrimFunc plain = matmulPlainFunc(key);
    std::vector<float> av = randomData(numel(s.a), 3), bv = randomData(numel(s.b), 4);
    std::vector<float> want = reference(s, av, bv);
    std::vector<Knobs> all = matmulAnnotations(s, 8);
    ASSERT_FALSE(all.empty()) << key;
    EXPECT_NE(std::find(all.begin(), all.end(), matmulDefaultKnobs(s, 8, 12)), all.end()) << key;
    for (const Knobs& knobs : all) {
      SCOPED_TRACE(key + " " + knobsText(knobs));
      EXPECT_FALSE(knobs.count("nv"));
      Schedule sched(plain);
      applyMatmulSketch(sched, s, knobs, 8);
      ASSERT_EQ(tir::verifyPrimFunc(sched.func()), std::vector<std::string>{});
      EXPECT_EQ(sched.trace(), matmulTrace(key, knobs, 8));
      EXPECT_EQ(tir::print(Trace::parse(sched.trace().str()).apply(plain)), tir::print(sched.func()));
      if (s.k >= 8) {
        EXPECT_NE(sched.trace().str().find("rfactor(k_i)"), std::string::npos);
      }
      ASSERT_TRUE(close(run(sched.func(), s, av, bv), want)) << tir::print(sched.func());
    }
  }
  EXPECT_FALSE(matmulAnnotationFits(*matmulShape({9, 16}, {16, 1}), {{"mi", 4}, {"nv", 1}, {"par", 0}}, 8));
  EXPECT_FALSE(
      matmulAnnotationFits(*matmulShape({9, 16}, {16, 1}), {{"mi", 4}, {"par", 3}}, 8));  // one batch
  Graph g = parseGraph(
      "graph(%a: f32[20], %b: f32[20]) {\n"
      "  %y = matmul(%a, %b) : f32[]\n"
      "  %z = relu(%y) : f32[]\n"
      "  return %z\n"
      "}\n");
  g.addGroup("g", 0, 2);
  runtime::Tensor at = randomTensor({20}, 5), bt = randomTensor({20}, 6);
  std::vector<float> want = reference(*matmulShape({1, 20}, {20, 1}), toVector(at), toVector(bt));
  want[0] = std::max(0.0f, want[0]);
  LoweredModule m = lowerGraph(g, LowerOptions{});
  ASSERT_EQ(m.funcs.size(), 1u);
  EXPECT_EQ(m.funcs[0].attrs.at("schedule"), "mi=1,par=0");
  for (Engine e : {Engine::Interpreter, Engine::Jit})
    EXPECT_TRUE(allClose(evalModule(m, {at, bt}, e)[0], want)) << (e == Engine::Jit ? "jit" : "interp");
}

TEST(MatmulSearch, PlainNestComputesTheProduct) {
  std::mt19937 rng(11);
  for (int t = 0; t < 12; ++t) {
    MatmulShape s = randomShape(rng);
    SCOPED_TRACE(keyOf(s));
    PrimFunc f = matmulPlainFunc(keyOf(s));
    EXPECT_TRUE(tir::verifyPrimFunc(f).empty());
    std::vector<float> a = randomData(numel(s.a), 1 + t), b = randomData(numel(s.b), 100 + t);
    EXPECT_TRUE(close(run(f, s, a, b), reference(s, a, b)));
  }
}

// Random annotations of the sketch on random shapes: each trace replays to the identical
// function, which verifies and computes the product.
TEST(MatmulSearch, SketchTracesReplayVerifyAndAgree) {
  std::mt19937 rng(5);
  int checked = 0;
  for (int t = 0; t < 30; ++t) {
    MatmulShape s = randomShape(rng);
    int lanes = std::vector<int>{4, 8}[t % 2];
    std::vector<Knobs> annotations = matmulAnnotations(s, lanes);
    if (annotations.empty()) continue;
    Knobs knobs = annotations[std::uniform_int_distribution<size_t>(0, annotations.size() - 1)(rng)];
    std::string key = keyOf(s);
    SCOPED_TRACE(key + " lanes=" + std::to_string(lanes) + " " + knobsText(knobs));
    PrimFunc plain = matmulPlainFunc(key);
    Schedule sched(plain);
    applyMatmulSketch(sched, s, knobs, lanes);
    const PrimFunc& scheduled = sched.func();
    EXPECT_EQ(tir::verifyPrimFunc(scheduled), std::vector<std::string>{});
    Trace trace = Trace::parse(sched.trace().str());
    EXPECT_EQ(trace, matmulTrace(key, knobs, lanes));
    EXPECT_EQ(tir::print(trace.apply(plain)), tir::print(scheduled));
    std::string text = tir::print(scheduled);
    // The static dependence proofs decide as the replay does.
    tir::schedule_detail::setStaticProofs(false);
    Schedule replayed(plain);
    EXPECT_NO_THROW(applyMatmulSketch(replayed, s, knobs, lanes));
    tir::schedule_detail::setStaticProofs(true);
    EXPECT_EQ(tir::print(replayed.func()), text);
    EXPECT_NE(text.find("ramp("), std::string::npos) << text;  // vector code
    EXPECT_EQ(text.find("parallel") != std::string::npos, knob(knobs, "par", 0) != 0) << text;
    std::vector<float> a = randomData(numel(s.a), 7 + t), b = randomData(numel(s.b), 70 + t);
    EXPECT_TRUE(close(run(scheduled, s, a, b), reference(s, a, b)));
    ++checked;
  }
  EXPECT_GE(checked, 15);
  // Every annotation of one shape with tails in both directions and a broadcast batch.
  MatmulShape s = *matmulShape({3, 1, 7, 32}, {2, 32, 21});
  std::vector<float> a = randomData(numel(s.a), 3), b = randomData(numel(s.b), 4);
  std::vector<float> want = reference(s, a, b);
  for (const Knobs& knobs : matmulAnnotations(s, 4)) {
    SCOPED_TRACE(knobsText(knobs));
    PrimFunc f = Trace::parse(matmulTrace(keyOf(s), knobs, 4).str()).apply(matmulPlainFunc(keyOf(s)));
    EXPECT_TRUE(close(run(f, s, a, b), want));
  }
}

// A tuned matmul lowers through the sketch (knobs) or a record's trace, alone and with a fused
// epilogue, and runs as JIT code; a trace that does not replay is refused with one line.
TEST(MatmulSearch, TunedLoweringRunsAndRefusesBadTraces) {
  Graph g = parseGraph(
      "graph(%a: f32[2,3,9,20], %b: f32[3,20,19]) {\n"
      "  %y = matmul(%a, %b) : f32[2,3,9,19]\n"
      "  return %y\n"
      "}\n");
  MatmulShape s = *matmulShape({2, 3, 9, 20}, {3, 20, 19});
  std::string key = keyOf(s);
  runtime::Tensor at = randomTensor(s.a, 1), bt = randomTensor(s.b, 2);
  std::vector<float> want = reference(s, toVector(at), toVector(bt));
  LowerOptions options;  // 8 lanes
  for (const Knobs& knobs : {Knobs{{"mi", 3}, {"nv", 2}, {"kt", 0}, {"par", 3}},
                             Knobs{{"mi", 2}, {"nv", 1}, {"kt", 0}, {"par", 1}},
                             Knobs{{"mi", 5}, {"nv", 1}, {"kt", 0}, {"par", 2}}}) {
    SCOPED_TRACE(knobsText(knobs));
    auto configs = std::make_shared<ScheduleConfigs>();
    configs->byKey[key] = knobs;
    options.schedules = configs;
    PrimFunc f = lowerNode(g, 0, "f", options);
    EXPECT_EQ(f.attrs.at("schedule"), knobsText(knobs));
    EXPECT_EQ(f.attrs.at("trace"), matmulTrace(key, knobs, 8).str());
    for (Engine e : {Engine::Interpreter, Engine::Jit})
      EXPECT_TRUE(allClose(evalGraph(g, {at, bt}, e, options)[0], want)) << (e == Engine::Jit ? "jit" : "interp");
    // The record's trace gives the identical kernel.
    configs->traces[key] = f.attrs.at("trace");
    EXPECT_EQ(tir::print(lowerNode(g, 0, "f", options)), tir::print(f));
  }
  // A fused epilogue (residual add, relu) is applied where the tiles are written back (no pass
  // reads the output again), with tail loops in the rows, the columns or both; with a cache block
  // of the reduction (kt) the tile is read back between blocks, and the epilogue runs after it.
  Graph fused = parseGraph(
      "graph(%a: f32[2,3,9,20], %b: f32[3,20,19], %r: f32[19]) {\n"
      "  %y = matmul(%a, %b) : f32[2,3,9,19]\n"
      "  %z = add(%y, %r) : f32[2,3,9,19]\n"
      "  %w = relu(%z) : f32[2,3,9,19]\n"
      "  return %w\n"
      "}\n");
  runtime::Tensor rt = randomTensor({19}, 3);
  std::vector<float> fusedWant = want;
  for (size_t i = 0; i < fusedWant.size(); ++i) fusedWant[i] = std::max(0.0f, fusedWant[i] + rt.data<float>()[i % 19]);
  Graph grouped = fused;
  grouped.addGroup("g", 0, 3);
  for (const Knobs& knobs : {Knobs{{"mi", 3}, {"nv", 2}, {"kt", 0}, {"par", 3}},
                             Knobs{{"mi", 4}, {"nv", 1}, {"kt", 0}, {"par", 1}},
                             Knobs{{"mi", 2}, {"nv", 2}, {"kt", 0}, {"par", 2}}}) {
    SCOPED_TRACE(knobsText(knobs));
    expectSketchKernel(grouped, options, key, knobs, "k", {at, bt, rt}, fusedWant);
    // The residual's column index is taken from the loops' ranges, not by / and %.
    auto tuned = std::make_shared<ScheduleConfigs>();
    tuned->byKey[key] = knobs;
    LowerOptions withKnobs = options;
    withKnobs.schedules = tuned;
    PrimFunc k = lowerGraph(grouped, withKnobs).funcs[0];
    EXPECT_GT(loadsOf(k, k.params[2]), 0) << tir::print(k);
    EXPECT_FALSE(loadIndexDivides(k, k.params[2]->name)) << tir::print(k);
  }
  auto configs = std::make_shared<ScheduleConfigs>();
  configs->byKey[key] = Knobs{{"mi", 3}, {"nv", 2}, {"kt", 5}, {"par", 3}};
  options.schedules = configs;
  LoweredModule module = lowerGraph(grouped, options);
  ASSERT_EQ(module.funcs.size(), 1u);
  EXPECT_NE(module.funcs[0].attrs.at("trace").find("cache_write(k_i)"), std::string::npos);
  for (Engine e : {Engine::Interpreter, Engine::Jit})
    EXPECT_TRUE(allClose(evalModule(module, {at, bt, rt}, e)[0], fusedWant)) << (e == Engine::Jit ? "jit" : "interp");
  // Knobs that do not fit fall back to the default annotation, with or without a trace (a record
  // made for another form of the kernel); a trace of fitting knobs that does not replay stops the
  // build with one line naming the key.
  const std::string fallback =
      matmulTrace(key, matmulDefaultKnobs(s, 8, accumulatorBudget(options)), 8).str();
  configs->byKey[key] = Knobs{{"mi", 40}, {"nv", 1}, {"kt", 0}, {"par", 0}};
  EXPECT_EQ(lowerNode(g, 0, "f", options).attrs.at("trace"), fallback);
  configs->traces[key] = "split(nope; 4, 1)\n";
  EXPECT_EQ(lowerNode(g, 0, "f", options).attrs.at("trace"), fallback);
  configs->byKey[key] = Knobs{{"mi", 3}, {"nv", 2}, {"kt", 0}, {"par", 3}};
  try {
    lowerNode(g, 0, "f", options);
    ADD_FAILURE() << "a trace that does not replay was accepted";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(key), std::string::npos) << what;
    EXPECT_NE(what.find("does not replay"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

// Records made before the plain nest started its reduction from 0: a trace that names the old
// zero-fill loops (zb, zi, zj) is rebuilt from its record's annotation, and the hand-written
// schedule's knobs (rows, cols) are read as the annotation mi = rows, nv = cols.
TEST(MatmulSearch, OlderRecordsAreReadAsAnnotations) {
  Graph g = parseGraph(
      "graph(%a: f32[2,12,16], %b: f32[2,16,40]) {\n  %y = matmul(%a, %b) : f32[2,12,40]\n  return %y\n}\n");
  MatmulShape s = *matmulShape({2, 12, 16}, {2, 16, 40});
  std::string key = keyOf(s);
  LowerOptions options;  // 8 lanes
  auto configs = std::make_shared<ScheduleConfigs>();
  options.schedules = configs;
  const Knobs knobs{{"mi", 3}, {"nv", 2}, {"kt", 0}, {"par", 2}};
  configs->byKey[key] = knobs;
  configs->traces[key] = "parallel(zb)\nsplit(zj; 8, 1)\nvectorize(zj_i)\nsplit(i; 3, 1)\n";
  PrimFunc rebuilt = lowerNode(g, 0, "f", options);
  EXPECT_EQ(rebuilt.attrs.at("schedule"), knobsText(knobs));
  EXPECT_EQ(rebuilt.attrs.at("trace"), matmulTrace(key, knobs, 8).str());
  EXPECT_TRUE(matmulTraceIsStale(Trace::parse(configs->traces[key])));
  EXPECT_FALSE(matmulTraceIsStale(matmulTrace(key, knobs, 8)));
  // The hand-written schedule's record: its tile, with the default's parallel loop.
  configs->traces.clear();
  configs->byKey[key] = Knobs{{"rows", 3}, {"cols", 2}};
  Knobs read = *matmulAnnotationOf(s, configs->byKey[key], 8, accumulatorBudget(options));
  EXPECT_EQ(read.at("mi"), 3);
  EXPECT_EQ(read.at("nv"), 2);
  EXPECT_EQ(read.at("par"), matmulDefaultKnobs(s, 8, accumulatorBudget(options)).at("par"));
  PrimFunc hand = lowerNode(g, 0, "f", options);
  EXPECT_EQ(hand.attrs.at("schedule"), knobsText(read));
  EXPECT_EQ(hand.attrs.at("trace"), matmulTrace(key, read, 8).str());
  // Rows beyond M: the default annotation.
  configs->byKey[key] = Knobs{{"rows", 13}, {"cols", 1}};
  EXPECT_FALSE(matmulAnnotationOf(s, configs->byKey[key], 8, accumulatorBudget(options)).has_value());
  EXPECT_EQ(lowerNode(g, 0, "f", options).attrs.at("schedule"),
            knobsText(matmulDefaultKnobs(s, 8, accumulatorBudget(options))));
  runtime::Tensor at = randomTensor(s.a, 1), bt = randomTensor(s.b, 2);
  EXPECT_TRUE(
      allClose(evalGraph(g, {at, bt}, Engine::Jit, options)[0], reference(s, toVector(at), toVector(bt))));
}

// Real attention sizes: the dependence checks of reorder and parallel trace one execution of
// their scope (every execution touches the same pattern, shifted), so a 4 × 128 × 128 × 64 nest
// (replayed whole, reorder's check would take 2.6 times its budget) is scheduled; the result
// still agrees.
TEST(MatmulSearch, LargeNestsScheduleWithinTheCheckBudget) {
  MatmulShape s = *matmulShape({4, 128, 64}, {4, 64, 128});
  Knobs knobs{{"mi", 4}, {"nv", 2}, {"kt", 0}, {"par", 1}};
  ASSERT_TRUE(matmulAnnotationFits(s, knobs, 8));
  PrimFunc plain = matmulPlainFunc(keyOf(s));
  Schedule sched(plain);
  applyMatmulSketch(sched, s, knobs, 8);
  std::vector<float> a = randomData(numel(s.a), 1), b = randomData(numel(s.b), 2);
  EXPECT_TRUE(close(run(sched.func(), s, a, b), run(plain, s, a, b)));
}

// Tail rows and columns do not stop the proofs: ViT's 197 tokens over 12 × 8 heads (a divided
// batch index) with 4-row tiles and 64-column tiles, the batch loop distributed (fission) and
// the row tiles of all batches fused into one parallel loop, the tail rows of all batches in
// another — 3.8 · 10⁸ multiply-adds, far beyond what the replay could step through — is
// scheduled without replaying (tail loops included), and each primitive of its trace applies.
TEST(MatmulSearch, TailsAndAFissionedBatchNeedNoReplay) {
  MatmulShape s = *matmulShape({8, 12, 197, 64}, {8, 12, 64, 197});
  Knobs knobs{{"mi", 4}, {"nv", 4}, {"kt", 0}, {"par", 3}};
  ASSERT_TRUE(matmulAnnotationFits(s, knobs, 16));
  Trace trace = matmulTrace(keyOf(s), knobs, 16);
  std::string text = trace.str();
  EXPECT_NE(text.find("fission(b)"), std::string::npos) << text;
  EXPECT_NE(text.find("parallel(b_f)"), std::string::npos) << text;
  EXPECT_NE(text.find("parallel(b_i_o_fused)"), std::string::npos) << text;
  // A small shape of the same form agrees with the reference, and its replay-checked schedule
  // (no proofs) is the same function.
  MatmulShape small = *matmulShape({2, 3, 9, 8}, {2, 3, 8, 21});
  Knobs k{{"mi", 4}, {"nv", 2}, {"kt", 0}, {"par", 3}};
  ASSERT_TRUE(matmulAnnotationFits(small, k, 8));
  Schedule proven(matmulPlainFunc(keyOf(small)));
  applyMatmulSketch(proven, small, k, 8);
  tir::schedule_detail::setStaticProofs(false);
  Schedule replayed(matmulPlainFunc(keyOf(small)));
  EXPECT_NO_THROW(applyMatmulSketch(replayed, small, k, 8));
  tir::schedule_detail::setStaticProofs(true);
  EXPECT_EQ(tir::print(replayed.func()), tir::print(proven.func()));
  std::vector<float> a = randomData(numel(small.a), 5), b = randomData(numel(small.b), 6);
  EXPECT_TRUE(close(run(proven.func(), small, a, b), reference(small, a, b)));
}

// The shortcut is not taken where executions of the scope differ: for o: for i: for j:
// y[8i + j] = y[8i + j + o] + 1 is free of dependences for o = 0 only, so swapping i and j
// must be refused (the full replay sees o = 1).
TEST(MatmulSearch, OneExecutionShortcutNeedsShiftInvariance) {
  using namespace tir;
  Buffer y = makeBuffer("y", Type::f32(), {64});
  Expr o = Var::make("o"), i = Var::make("i"), j = Var::make("j");
  Stmt body = Store::make(y, i * 8 + j, Load::make(y, i * 8 + j + o) + f32(1));
  auto loop = [](Expr v, int64_t n, Stmt s) { return For::make(v, i64(0), i64(n), ForKind::Serial, s); };
  PrimFunc f;
  f.name = "f";
  f.params = {y};
  f.body = loop(o, 2, loop(i, 4, loop(j, 4, body)));
  Schedule sched(f);
  EXPECT_THROW(sched.reorder({"j", "i"}), Error);
  // The same nest without the shift through o reorders.
  PrimFunc g = f;
  g.body = loop(o, 2, loop(i, 4, loop(j, 4, Store::make(y, i * 8 + j + o * 32, Load::make(y, i * 8 + j + o * 32) + f32(1)))));
  Schedule ok(g);
  EXPECT_NO_THROW(ok.reorder({"j", "i"}));
}

// parallel() proves iterations disjoint from affine indices without replaying them: the batch
// loop of a 4 × 128 × 128 × 64 product (2.5 times the replay budget) is parallel at once, while
// overlapping footprints (y[2o + i], i < 4) still go to the exact replay, which refuses them.
TEST(MatmulSearch, DisjointIterationsNeedNoReplay) {
  MatmulShape s = *matmulShape({4, 128, 64}, {4, 64, 128});
  Schedule sched(matmulPlainFunc(keyOf(s)));
  EXPECT_NO_THROW(sched.parallel("b"));
  using namespace tir;
  Buffer y = makeBuffer("y", Type::f32(), {64});
  Expr o = Var::make("o"), i = Var::make("i");
  PrimFunc f;
  f.name = "f";
  f.params = {y};
  f.body = For::make(o, i64(0), i64(8), ForKind::Serial,
                     For::make(i, i64(0), i64(4), ForKind::Serial, Store::make(y, o * 2 + i, Load::make(y, o * 2 + i) + f32(1))));
  Schedule overlapping(f);
  EXPECT_THROW(overlapping.parallel("o"), Error);
  f.body = For::make(o, i64(0), i64(8), ForKind::Serial,
                     For::make(i, i64(0), i64(4), ForKind::Serial, Store::make(y, o * 4 + i, Load::make(y, o * 4 + i) + f32(1))));
  Schedule disjoint(f);
  EXPECT_NO_THROW(disjoint.parallel("o"));
  // A constant offset of more than the step, y[4o + i + 100], proves as before (the low part's view).
  Buffer z = makeBuffer("z", Type::f32(), {200});
  f.params = {z};
  f.body = For::make(o, i64(0), i64(8), ForKind::Serial,
                     For::make(i, i64(0), i64(4), ForKind::Serial,
                               Store::make(z, o * 4 + i + 100, Load::make(z, o * 4 + i + 100) + f32(1))));
  Schedule offset(f);
  EXPECT_NO_THROW(offset.parallel("o"));
}

// A panel loop p holding row tiles and a tail loop (rows 12000 and 12001 of 12002):
//   for p < 256: for r < 3000, q < 4, j < 4: y[(4r + q)·1024 + 4p + j] += 1
//                for t < 2, j < 4:          y[(12000 + t)·1024 + 4p + j] += 1
// The tail's constant 12000·1024 lies far past the low part's span, so it counts as a high
// coefficient. The nest is 3 times the replay budget: only that view proves the loop parallel.
TEST(MatmulSearch, TailRowsOfAPanelLoopNeedNoReplay) {
  using namespace tir;
  const int64_t tiles = 3000, rows = 4 * tiles + 2, n = 1024;
  Buffer y = makeBuffer("y", Type::f32(), {rows * n});
  Expr p = Var::make("p"), r = Var::make("r"), q = Var::make("q"), j = Var::make("j"), t = Var::make("t");
  auto loop = [](Expr v, int64_t e, Stmt s) { return For::make(v, i64(0), i64(e), ForKind::Serial, s); };
  auto bump = [&](Expr index) { return Store::make(y, index, Load::make(y, index) + f32(1)); };
  Stmt main = loop(r, tiles, loop(q, 4, loop(j, 4, bump((r * 4 + q) * n + p * 4 + j))));
  Stmt tail = loop(t, 2, loop(j, 4, bump((t + 4 * tiles) * n + p * 4 + j)));
  PrimFunc f;
  f.name = "f";
  f.params = {y};
  f.body = loop(p, n / 4, Seq::make({main, tail}));
  Schedule sched(f);
  EXPECT_NO_THROW(sched.parallel("p"));
  // A tail that writes the next panel's columns (iteration p + 1 writes them too) is refused.
  f.body = loop(p, n / 4, Seq::make({main, loop(t, 2, loop(j, 4, bump((t + 4 * tiles) * n + p * 4 + j + 4)))}));
  Schedule overlapping(f);
  EXPECT_THROW(overlapping.parallel("p"), Error);
}

// Every annotation the space offers for BERT's attention matmuls (batch [1, heads]) applies on
// AVX-512's 16 lanes: a sketch refused after the space offered it would be a wasted candidate
// (and lowering refuses it with one line rather than time the hand schedule under its name).
TEST(MatmulSearch, EveryOfferedAnnotationAppliesOnAttentionShapes) {
  std::string key = "matmul:ra=4,a0=1,a1=4,a2=128,a3=128,rb=4,b0=1,b1=4,b2=128,b3=64:f32";
  MatmulShape s = matmulShapeOfKey(parseTuneKey(key).params, key);
  std::vector<Knobs> all = matmulAnnotations(s, 16);
  ASSERT_GT(all.size(), 50u);
  int batchParallel = 0, fused = 0;
  for (const Knobs& knobs : all) {
    SCOPED_TRACE(knobsText(knobs));
    EXPECT_NO_THROW(matmulTrace(key, knobs, 16));
    batchParallel += knob(knobs, "par", 0) == 2;
    fused += knob(knobs, "par", 0) == 3;
  }
  EXPECT_GT(batchParallel, 0);
  EXPECT_GT(fused, 0);
  // Two long batch axes divide the batch index: the batch loop and the fused one are proven
  // disjoint without a replay of the 6 × 128 × 64 × 128 product, with a column tail too (nv = 3
  // of 4 vectors); with a cache block of the reduction (kt) they would replay it, beyond the
  // budget, and are not offered.
  const std::string twoKey = "matmul:ra=4,a0=2,a1=3,a2=128,a3=128,rb=4,b0=2,b1=3,b2=128,b3=64:f32";
  MatmulShape two = matmulShapeOfKey(parseTuneKey(twoKey).params, twoKey);
  int divided = 0, tails = 0;
  for (const Knobs& knobs : matmulAnnotations(two, 16)) {
    if (knob(knobs, "par", 0) < 2 || knob(knobs, "mi", 0) % 2 != 0) continue;
    SCOPED_TRACE(knobsText(knobs));
    EXPECT_NO_THROW(matmulTrace(twoKey, knobs, 16));
    EXPECT_EQ(knob(knobs, "kt", 0), 0);
    tails += knob(knobs, "nv", 0) == 3;
    ++divided;
  }
  EXPECT_GT(divided, 0);
  EXPECT_GT(tails, 0);
}

// ---- dense_packed ---------------------------------------------------------------------------------

/// y[i, n] = Σ_k x[i, k] · w[n / P, k, n mod P] (+ b[n]) in double precision.
std::vector<float> densePackedReference(const DensePackedShape& s, const std::vector<float>& x, const std::vector<float>& w,
                                        const std::vector<float>* b) {
  std::vector<float> y(static_cast<size_t>(s.m * s.n));
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t n = 0; n < s.n; ++n) {
      double acc = b ? (*b)[static_cast<size_t>(n)] : 0.0;
      for (int64_t q = 0; q < s.k; ++q)
        acc += double(x[static_cast<size_t>(i * s.k + q)]) *
               w[static_cast<size_t>(((n / s.panel) * s.k + q) * s.panel + n % s.panel)];
      y[static_cast<size_t>(i * s.n + n)] = static_cast<float>(acc);
    }
  return y;
}

std::vector<float> runDensePacked(const PrimFunc& f, const DensePackedShape& s, std::vector<float> x, std::vector<float> w,
                                  std::vector<float> b) {
  std::vector<float> y(static_cast<size_t>(s.m * s.n), std::nanf(""));
  if (s.bias) interpret(f, {x.data(), w.data(), b.data(), y.data()});
  else interpret(f, {x.data(), w.data(), y.data()});
  return y;
}

TEST(DensePackedSearch, KeysAndThePlainNest) {
  Graph g = parseGraph(
      "graph(%x: f32[2,3,20], %w: f32[3,20,8], %b: f32[24]) {\n"
      "  %y = dense_packed(%x, %w, %b) : f32[2,3,24]\n"
      "  return %y\n"
      "}\n");
  PrimFunc f = lowerNode(g, 0, "f");
  EXPECT_EQ(f.attrs.at("tune_key"), "dense_packed:m=6,k=20,n=24,p=8,b=1:f32");
  // Untuned: the sketch with its default annotation (3 rows divide 6, the panel's one vector).
  EXPECT_EQ(f.attrs.at("schedule"), "mi=3,nv=1,po=1");
  ASSERT_EQ(f.attrs.count("trace"), 1u);
  EXPECT_EQ(f.attrs.at("trace"), sketchTrace(f.attrs.at("tune_key"), {{"mi", 3}, {"nv", 1}, {"po", 1}}, 8, 16).str());
  std::string key = f.attrs.at("tune_key");
  DensePackedShape s = densePackedShapeOfKey(parseTuneKey(key).params, key);
  EXPECT_EQ(densePackedTuneKey(s, DType::Float32), key);
  EXPECT_DOUBLE_EQ(s.flops(), 2.0 * 6 * 20 * 24);
  EXPECT_THROW(densePackedPlainFunc("dense_packed:m=6,k=20,n=20,p=8,b=1:f32"), Error);  // 8 does not divide 20
  EXPECT_THROW(densePackedPlainFunc("dense_packed:m=6,k=20,n=24:f32"), Error);           // no panel width
  EXPECT_THROW(densePackedPlainFunc("matmul:ra=2,a0=4,a1=5,rb=2,b0=5,b1=3:f32"), Error);
  for (bool bias : {true, false}) {
    DensePackedShape t{5, 7, 12, 4, bias};
    PrimFunc plain = densePackedPlainFunc(densePackedTuneKey(t, DType::Float32));
    EXPECT_TRUE(tir::verifyPrimFunc(plain).empty());
    std::vector<float> x = randomData(5 * 7, 1), w = randomData(3 * 7 * 4, 2), b = randomData(12, 3);
    EXPECT_TRUE(close(runDensePacked(plain, t, x, w, b), densePackedReference(t, x, w, bias ? &b : nullptr)));
  }
}

// The default rows: the largest of 4, 3, 2, 1 that divides M, except that an M of 8 or more that
// neither 4 nor 3 divides takes 4 rows and a tail (37 tokens ran one row at a time before: 2×
// slower in the MLP of 37 tokens).
TEST(DensePackedSearch, DefaultRowsDivideMOrTakeFourWithATail) {
  auto rows = [](int64_t m) {
    DensePackedShape s{m, 64, 48, 48, true};
    Knobs k = densePackedDefaultKnobs(s, 16, 32);
    // Row tiles outermost with a tail (the panel order is the tuner's to try).
    EXPECT_EQ(knob(k, "po", -1), m % knob(k, "mi", 0) == 0 ? 1 : 0) << m;
    return knob(k, "mi", 0);
  };
  EXPECT_EQ(rows(128), 4);
  EXPECT_EQ(rows(6), 3);
  EXPECT_EQ(rows(9), 3);
  EXPECT_EQ(rows(2), 2);
  EXPECT_EQ(rows(5), 1);   // too few rows for a tail to pay
  EXPECT_EQ(rows(37), 4);  // prime: 9 tiles of 4 and one tail row
  EXPECT_EQ(rows(22), 4);  // 2 × 11: 5 tiles of 4 and two tail rows, not 11 tiles of 2
  // ViT's 197 tokens in a layer large enough for threads: the default schedule builds.
  Graph g = parseGraph(
      "graph(%x: f32[1,197,192], %w: f32[48,192,16]) {\n"
      "  %y = dense_packed(%x, %w) : f32[1,197,768]\n"
      "  return %y\n"
      "}\n");
  LowerOptions options;
  options.vectorLanes = 16;
  PrimFunc f = lowerNode(g, 0, "f", options);
  EXPECT_EQ(f.attrs.at("schedule"), "mi=4,nv=1,po=0");
}

// Every annotation the space offers for ViT's 197 tokens (a tail row after 49 tiles of 4) and
// BERT's FFN of 37 tokens applies on AVX-512's 16 lanes, in panel order too: the panel loop
// holding the tail rows is proven parallel without replaying the product.
TEST(DensePackedSearch, EveryOfferedAnnotationAppliesWithTailRows) {
  for (DensePackedShape s : {DensePackedShape{197, 192, 768, 16, true}, DensePackedShape{37, 768, 3072, 64, true}}) {
    std::string key = densePackedTuneKey(s, DType::Float32);
    std::vector<Knobs> all = densePackedAnnotations(s, 16, 32);
    int panelOrderWithTail = 0;
    for (const Knobs& knobs : all) {
      SCOPED_TRACE(key + " " + knobsText(knobs));
      Trace trace;
      ASSERT_NO_THROW(trace = sketchTrace(key, knobs, 16, 32));
      EXPECT_NE(trace.str().find("parallel"), std::string::npos);
      panelOrderWithTail += knob(knobs, "po", 0) == 1 && s.m % knob(knobs, "mi", 1) != 0;
    }
    EXPECT_GT(panelOrderWithTail, 0) << key;
  }
}

// Every annotation on random shapes (row tails, one or several panels, with and without a
// bias): the trace replays to the identical function, which verifies, stages its register tile
// (cache_write) and computes the product.
TEST(DensePackedSearch, SketchTracesReplayVerifyAndAgree) {
  std::mt19937 rng(17);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int checked = 0;
  for (int t = 0; t < 12; ++t) {
    int lanes = t % 2 ? 8 : 4;
    DensePackedShape s;
    s.m = pick(1, 19), s.k = pick(1, 23), s.panel = lanes * pick(1, 3), s.n = s.panel * pick(1, 3), s.bias = pick(0, 1);
    std::string key = densePackedTuneKey(s, DType::Float32);
    PrimFunc plain = densePackedPlainFunc(key);
    std::vector<float> x = randomData(s.m * s.k, 10 + t), w = randomData(s.n * s.k, 20 + t), b = randomData(s.n, 30 + t);
    std::vector<float> want = densePackedReference(s, x, w, s.bias ? &b : nullptr);
    std::vector<Knobs> all = densePackedAnnotations(s, lanes, 16);
    ASSERT_FALSE(all.empty()) << key;
    for (const Knobs& knobs : all) {
      SCOPED_TRACE(key + " lanes=" + std::to_string(lanes) + " " + knobsText(knobs));
      EXPECT_LE(knob(knobs, "mi", 0) * knob(knobs, "nv", 0) + knob(knobs, "nv", 0) + 1, 16);
      Schedule sched(plain);
      applyDensePackedSketch(sched, s, knobs, lanes, 16);
      const PrimFunc& scheduled = sched.func();
      ASSERT_EQ(tir::verifyPrimFunc(scheduled), std::vector<std::string>{});
      Trace trace = Trace::parse(sched.trace().str());
      EXPECT_EQ(trace, sketchTrace(key, knobs, lanes, 16));
      EXPECT_EQ(tir::print(trace.apply(plain)), tir::print(scheduled));
      std::string text = tir::print(scheduled);
      EXPECT_NE(text.find("y_local"), std::string::npos) << text;
      ASSERT_TRUE(close(runDensePacked(scheduled, s, x, w, b), want)) << text;
      ++checked;
    }
  }
  EXPECT_GE(checked, 100);
  // Annotations that do not fit: a tile over the register budget, vectors that do not divide the
  // panel, no panel order.
  DensePackedShape s{32, 16, 48, 48, true};
  EXPECT_FALSE(densePackedAnnotationFits(s, {{"mi", 8}, {"nv", 2}, {"po", 1}}, 8, 16));  // 8·2 + 2 + 1 > 16
  EXPECT_TRUE(densePackedAnnotationFits(s, {{"mi", 8}, {"nv", 2}, {"po", 1}}, 8, 32));
  EXPECT_FALSE(densePackedAnnotationFits(s, {{"mi", 2}, {"nv", 4}, {"po", 1}}, 8, 32));  // 32 does not divide 48
  EXPECT_FALSE(densePackedAnnotationFits(s, {{"mi", 2}, {"nv", 2}}, 8, 32));
  EXPECT_THROW(sketchTrace("dense:m=1,k=2,n=3:f32", {{"mi", 1}}, 8, 16), Error);
}

// Every dense_packed kernel is the sketch: untuned ones take the default annotation, whatever
// their panels (whole vectors, narrower ones packed by pack-dense{lanes=4}, scalar ones by
// pack-dense{lanes=1}), rows (tails or not) and bias, in the interpreter and as JIT code.
TEST(DensePackedSearch, DefaultScheduleOnEveryPanelWidth) {
  LowerOptions options;  // 8 lanes, 16 registers
  struct Case {
    int64_t m, k, n, panel;
    bool bias;
    const char* schedule;
  };
  for (const Case& c : {Case{8, 20, 32, 16, true, "mi=4,nv=2,po=1"}, Case{6, 9, 24, 12, false, "mi=3,nv=3,po=1"},
                        Case{5, 7, 9, 3, true, "mi=1,nv=3,po=1"}, Case{64, 33, 48, 24, true, "mi=4,nv=3,po=1"},
                        Case{128, 40, 64, 16, true, "mi=4,nv=2,po=1"}}) {
    DensePackedShape s{c.m, c.k, c.n, c.panel, c.bias};
    std::string key = densePackedTuneKey(s, DType::Float32);
    SCOPED_TRACE(key);
    std::string text = "graph(%x: f32[" + std::to_string(c.m) + "," + std::to_string(c.k) + "], %w: f32[" +
                       std::to_string(c.n / c.panel) + "," + std::to_string(c.k) + "," + std::to_string(c.panel) + "]" +
                       (c.bias ? ", %b: f32[" + std::to_string(c.n) + "]" : std::string()) + ") {\n  %y = dense_packed(%x, %w" +
                       (c.bias ? ", %b" : "") + ") : f32[" + std::to_string(c.m) + "," + std::to_string(c.n) +
                       "]\n  return %y\n}\n";
    Graph g = parseGraph(text);
    LoweredModule module = lowerGraph(g, options);
    ASSERT_EQ(module.funcs.size(), 1u);
    const PrimFunc& f = module.funcs[0];
    EXPECT_EQ(f.attrs.at("tune_key"), key);
    EXPECT_EQ(f.attrs.at("schedule"), c.schedule);
    ASSERT_EQ(f.attrs.count("trace"), 1u);
    // Threads only where the product is worth them (8192 outputs here), as every kernel.
    EXPECT_EQ(f.attrs.at("trace").find("parallel") != std::string::npos, c.m * c.n >= 4096) << f.attrs.at("trace");
    EXPECT_EQ(tir::verifyPrimFunc(f), std::vector<std::string>{});
    runtime::Tensor xt = randomTensor({c.m, c.k}, 1), wt = randomTensor({c.n / c.panel, c.k, c.panel}, 2),
                    bt = randomTensor({c.n}, 3);
    std::vector<float> b = toVector(bt);
    std::vector<float> want = densePackedReference(s, toVector(xt), toVector(wt), c.bias ? &b : nullptr);
    std::vector<runtime::Tensor> inputs = {xt, wt};
    if (c.bias) inputs.push_back(bt);
    for (Engine e : {Engine::Interpreter, Engine::Jit})
      EXPECT_TRUE(allClose(evalModule(module, inputs, e)[0], want)) << (e == Engine::Jit ? "jit" : "interp");
  }
}

// A dense_packed over f64 (a hand-written graph; pack-dense makes only f32 ones) has no tuning key:
// it takes the default annotation on vectors of half the lanes.
TEST(DensePackedSearch, DefaultScheduleWithoutAKey) {
  Graph g = parseGraph(
      "graph(%x: f64[6,5], %w: f64[2,5,8], %b: f64[16]) {\n"
      "  %y = dense_packed(%x, %w, %b) : f64[6,16]\n"
      "  return %y\n"
      "}\n");
  LoweredModule module = lowerGraph(g, LowerOptions{});  // 8 f32 lanes: 4 f64 lanes
  ASSERT_EQ(module.funcs.size(), 1u);
  const PrimFunc& f = module.funcs[0];
  EXPECT_EQ(f.attrs.count("tune_key"), 0u);
  EXPECT_EQ(f.attrs.at("schedule"), "mi=3,nv=2,po=1");
  EXPECT_EQ(tir::verifyPrimFunc(f), std::vector<std::string>{});
  runtime::Tensor x = runtime::Tensor::zeros(DType::Float64, {6, 5}), w = runtime::Tensor::zeros(DType::Float64, {2, 5, 8}),
                  b = runtime::Tensor::zeros(DType::Float64, {16});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<double>()[i] = 0.1 * static_cast<double>(i % 7) - 0.3;
  for (int64_t i = 0; i < w.numel(); ++i) w.data<double>()[i] = 0.05 * static_cast<double>(i % 11) - 0.2;
  for (int64_t i = 0; i < b.numel(); ++i) b.data<double>()[i] = 0.01 * static_cast<double>(i);
  for (Engine e : {Engine::Interpreter, Engine::Jit}) {
    runtime::Tensor y = evalModule(module, {x, w, b}, e)[0];
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t n = 0; n < 16; ++n) {
        double want = b.data<double>()[n];
        for (int64_t k = 0; k < 5; ++k) want += x.data<double>()[i * 5 + k] * w.data<double>()[((n / 8) * 5 + k) * 8 + n % 8];
        EXPECT_NEAR(y.data<double>()[i * 16 + n], want, 1e-12) << (e == Engine::Jit ? "jit " : "interp ") << i << "," << n;
      }
  }
}

// A tuned dense_packed lowers through the sketch (knobs) or a record's trace, with a fused
// epilogue applied at the tile's write-back, in the interpreter and as JIT code; knobs that do
// not fit build the default annotation.
TEST(DensePackedSearch, TunedLoweringRunsWithAnEpilogue) {
  Graph fused = parseGraph(
      "graph(%x: f32[3,7,20], %w: f32[2,20,16], %b: f32[32]) {\n"
      "  %y = dense_packed(%x, %w, %b) : f32[3,7,32]\n"
      "  %z = relu(%y) : f32[3,7,32]\n"
      "  return %z\n"
      "}\n");
  fused.addGroup("g", 0, 2);
  DensePackedShape s{21, 20, 32, 16, true};
  std::string key = densePackedTuneKey(s, DType::Float32);
  runtime::Tensor xt = randomTensor({3, 7, 20}, 1), wt = randomTensor({2, 20, 16}, 2), bt = randomTensor({32}, 3);
  std::vector<float> b = toVector(bt);
  std::vector<float> want = densePackedReference(s, toVector(xt), toVector(wt), &b);
  for (float& v : want) v = std::max(0.0f, v);
  LowerOptions options;  // 8 lanes, 16 registers
  for (const Knobs& knobs : {Knobs{{"mi", 4}, {"nv", 2}, {"po", 1}}, Knobs{{"mi", 5}, {"nv", 1}, {"po", 0}}}) {
    SCOPED_TRACE(knobsText(knobs));
    // The relu is applied where the tile is written back: no pass reads the output again.
    expectSketchKernel(fused, options, key, knobs, "k", {xt, wt, bt}, want);
  }
  auto configs = std::make_shared<ScheduleConfigs>();
  configs->byKey[key] = Knobs{{"mi", 4}, {"nv", 3}, {"po", 1}};  // 24 lanes do not divide the panel
  options.schedules = configs;
  PrimFunc fallback = lowerGraph(fused, options).funcs[0];
  EXPECT_EQ(fallback.attrs.at("schedule"), "mi=3,nv=2,po=1");
  EXPECT_EQ(fallback.attrs.at("trace"), sketchTrace(key, {{"mi", 3}, {"nv", 2}, {"po", 1}}, 8, 16).str());
  // A record of the former hand-written kernel (rows/cols) builds the default annotation, its tile.
  configs->byKey[key] = Knobs{{"rows", 3}, {"cols", 2}};
  EXPECT_EQ(tir::print(lowerGraph(fused, options).funcs[0]), tir::print(fallback));
}

// ---- dense ----------------------------------------------------------------------------------------

std::vector<float> denseReference(const DenseShape& s, const std::vector<float>& x,
                                  const std::vector<float>& w, const std::vector<float>* b) {
  std::vector<float> y(static_cast<size_t>(s.m * s.n));
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t n = 0; n < s.n; ++n) {
      double acc = b ? (*b)[static_cast<size_t>(n)] : 0.0;
      for (int64_t q = 0; q < s.k; ++q)
        acc += double(x[static_cast<size_t>(i * s.k + q)]) * w[static_cast<size_t>(n * s.k + q)];
      y[static_cast<size_t>(i * s.n + n)] = static_cast<float>(acc);
    }
  return y;
}

// The default is the hand-written tile the sketch replaced: the most accumulators within the
// registers (a row of x at batch 1 takes 8 rows of w), rows of x dividing M, rows of w dividing N
// when a little over half of the most do, and threads only where the product is worth them.
TEST(DenseSearch, DefaultIsTheFormerTile) {
  auto knobs = [](int64_t m, int64_t k, int64_t n) {
    return knobsText(denseDefaultKnobs({m, k, n, true}, 32));
  };
  EXPECT_EQ(knobs(1, 768, 768), "mi=1,nc=8,par=1");
  EXPECT_EQ(knobs(1, 512, 1000), "mi=1,nc=8,par=1");
  EXPECT_EQ(knobs(1, 1280, 1001), "mi=1,nc=7,par=1");  // 7 divides 1001
  EXPECT_EQ(knobs(4, 512, 1000), "mi=4,nc=5,par=1");   // (30 - 5) / 4 = 6 columns at most; 5 divides 1000
  EXPECT_EQ(knobs(3, 64, 10), "mi=3,nc=5,par=0");      // 3 × 8 fit; 5 divides 10
  EXPECT_EQ(knobs(1, 16, 3), "mi=1,nc=3,par=0");       // never more rows of w than N
  EXPECT_EQ(knobsText(denseDefaultKnobs({1, 768, 768, true}, 16)), "mi=1,nc=8,par=1");
  EXPECT_EQ(knobsText(denseDefaultKnobs({4, 768, 768, true}, 16)), "mi=2,nc=4,par=1");
  EXPECT_EQ(denseLanes({1, 10, 4, true}, 16), 8);
  EXPECT_EQ(denseLanes({1, 1, 4, true}, 16), 1);
}

// Every annotation on random shapes (K shorter than a vector or not a multiple of it, column
// tails, rows dividing M): the trace replays to the identical function, which verifies, keeps
// the tile's sums in registers (cache_write) and its vectors of partial sums apart (rfactor), and
// computes the product.
TEST(DenseSearch, SketchTracesReplayVerifyAndAgree) {
  std::mt19937 rng(23);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int checked = 0, factored = 0;
  for (int t = 0; t < 10; ++t) {
    const int lanes = t % 2 ? 8 : 4, registers = 16;
    DenseShape s{pick(1, 6), pick(1, 41), pick(1, 19), true};
    std::string key = denseTuneKey(s.m, s.k, s.n, DType::Float32);
    PrimFunc plain = densePlainFunc(key);
    std::vector<float> x = randomData(s.m * s.k, 40 + t), w = randomData(s.n * s.k, 50 + t),
                       b = randomData(s.n, 60 + t);
    std::vector<float> want = denseReference(s, x, w, &b);
    std::vector<Knobs> all = denseAnnotations(s, registers);
    ASSERT_FALSE(all.empty()) << key;
    EXPECT_NE(std::find(all.begin(), all.end(), denseDefaultKnobs(s, registers)), all.end()) << key;
    for (size_t a = 0; a < all.size(); a += 1 + all.size() / 12) {
      const Knobs& knobs = all[a];
      SCOPED_TRACE(key + " lanes=" + std::to_string(lanes) + " " + knobsText(knobs));
      Schedule sched(plain);
      const int l = denseLanes(s, lanes);
      applyDenseSketch(sched, s, knobs, l, registers);
      const PrimFunc& scheduled = sched.func();
      ASSERT_EQ(tir::verifyPrimFunc(scheduled), std::vector<std::string>{});
      EXPECT_EQ(sched.trace(), sketchTrace(key, knobs, lanes, registers));
      EXPECT_EQ(tir::print(Trace::parse(sched.trace().str()).apply(plain)), tir::print(scheduled));
      std::string text = tir::print(scheduled);
      EXPECT_NE(text.find("y_local"), std::string::npos) << text;
      factored += text.find("y_local_rf") != std::string::npos;
      std::vector<float> y(static_cast<size_t>(s.m * s.n), std::nanf(""));
      interpret(scheduled, {x.data(), w.data(), b.data(), y.data()});
      ASSERT_TRUE(close(y, want)) << text;
      ++checked;
    }
  }
  EXPECT_GE(checked, 60);
  EXPECT_GT(factored, 0);
  // Annotations that do not fit: rows of x that do not divide M, a tile over the registers, more
  // rows of w than N, no parallel choice.
  DenseShape s{4, 64, 10, true};
  EXPECT_FALSE(denseAnnotationFits(s, {{"mi", 3}, {"nc", 2}, {"par", 1}}, 32));
  EXPECT_FALSE(denseAnnotationFits(s, {{"mi", 4}, {"nc", 4}, {"par", 1}}, 16));  // 16 + 4 + 1 > 16
  EXPECT_TRUE(denseAnnotationFits(s, {{"mi", 4}, {"nc", 2}, {"par", 1}}, 16));
  EXPECT_FALSE(denseAnnotationFits(s, {{"mi", 1}, {"nc", 11}, {"par", 0}}, 32));
  EXPECT_FALSE(denseAnnotationFits(s, {{"mi", 1}, {"nc", 2}}, 32));
}

// dense lowers through its sketch untuned (the default), with a record's annotation or trace, and
// with a record of the former tile's knobs (rows, cols read as mi, nc); a fused relu is applied
// where the tile is written back. Interpreter and JIT agree with the reference.
TEST(DenseSearch, LoweringRunsWithAnEpilogueAndOlderRecords) {
  Graph fused = parseGraph(
      "graph(%x: f32[2,3,37], %w: f32[21,37], %b: f32[21]) {\n"
      "  %y = dense(%x, %w, %b) : f32[2,3,21]\n"
      "  %z = relu(%y) : f32[2,3,21]\n"
      "  return %z\n"
      "}\n");
  fused.addGroup("g", 0, 2);
  DenseShape s{6, 37, 21, true};
  std::string key = denseTuneKey(s.m, s.k, s.n, DType::Float32);
  runtime::Tensor xt = randomTensor({2, 3, 37}, 4), wt = randomTensor({21, 37}, 5),
                  bt = randomTensor({21}, 6);
  std::vector<float> b = toVector(bt);
  std::vector<float> want = denseReference(s, toVector(xt), toVector(wt), &b);
  for (float& v : want) v = std::max(0.0f, v);
  LowerOptions options;  // 8 lanes, 16 registers
  PrimFunc untuned = lowerGraph(fused, options).funcs[0];
  EXPECT_EQ(untuned.attrs.at("tune_key"), key);
  EXPECT_EQ(untuned.attrs.at("schedule"), knobsText(denseDefaultKnobs(s, 16)));
  EXPECT_EQ(untuned.attrs.at("trace"), sketchTrace(key, denseDefaultKnobs(s, 16), 8, 16).str());
  for (const Knobs& knobs : {Knobs{{"mi", 2}, {"nc", 4}, {"par", 1}}, Knobs{{"mi", 3}, {"nc", 1}, {"par", 0}},
                             Knobs{{"mi", 6}, {"nc", 1}, {"par", 1}}}) {
    SCOPED_TRACE(knobsText(knobs));
    expectSketchKernel(fused, options, key, knobs, "k", {xt, wt, bt}, want);
  }
  auto configs = std::make_shared<ScheduleConfigs>();
  configs->byKey[key] = Knobs{{"rows", 3}, {"cols", 2}};
  options.schedules = configs;
  PrimFunc old = lowerGraph(fused, options).funcs[0];
  EXPECT_EQ(old.attrs.at("schedule"), "mi=3,nc=2,par=" + std::to_string(denseDefaultKnobs(s, 16).at("par")));
  // One that does not fit (4 rows do not divide 6) builds the default.
  configs->byKey[key] = Knobs{{"rows", 4}, {"cols", 2}};
  EXPECT_EQ(tir::print(lowerGraph(fused, options).funcs[0]), tir::print(untuned));
}

}  // namespace
}  // namespace kiln::core::lower
