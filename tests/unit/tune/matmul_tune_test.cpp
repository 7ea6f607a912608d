// Tuning matmul and dense_packed (core/lower/gemm_search.h through core/tune): the task's key, FLOPs, graph
// and space (the default annotation first, what an untuned build runs; then the sketch's other annotations),
// records carrying a trace (round trip, old knob-only records still read, a trace that does not parse refused
// with one line), and the tuning loop over an in-process measurer that JIT-compiles and times each candidate
// for real, whose records' traces build kernels that compute the product.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "../core/kernels_test_util.h"
#include "core/lower/gemm_search.h"
#include "core/lower/schedule.h"
#include "core/lower/schedule_config.h"
#include "core/tir/printer.h"
#include "core/tune/records.h"
#include "core/tune/space.h"
#include "core/tune/task.h"
#include "core/tune/tune_loop.h"
#include "runtime/error.h"
#include "tests/unit/tune/tune_test_util.h"

namespace kiln::core::tune {
namespace {

namespace fs = std::filesystem;
using lower::Knobs;
using lower::testing::Engine;

lower::LowerOptions avx2() { return lower::lowerOptionsFor("haswell", ""); }

// Attention's QKᵀ with a broadcast batch axis and extents the tiles do not divide.
const std::string kMatmul = "matmul:ra=4,a0=2,a1=3,a2=9,a3=20,rb=4,b0=1,b1=3,b2=20,b3=19:f32";

const tir::PrimFunc& keyedKernel(const lower::LoweredModule& m, const std::string& key) {
  for (const auto& f : m.funcs)
    if (f.attrs.count("tune_key") && f.attrs.at("tune_key") == key) return f;
  throw InternalError("no kernel with key " + key);
}

/// The key's task graph builds a kernel with that key; extraction finds it as one task of `kind`
/// whose default knobs are the kernel's schedule, which is point 0 of the key's space (the tuner's
/// baseline, the untuned schedule); every point's features have one length.
ConfigSpace checkTaskAndSpace(const std::string& key, const std::string& kind, double flops) {
  EXPECT_DOUBLE_EQ(taskFlops(key), flops);
  Graph g = taskGraph(key);
  lower::LoweredModule m = lower::lowerGraph(g, avx2());
  const tir::PrimFunc& f = keyedKernel(m, key);
  std::vector<TuneTask> tasks = extractTasks(m);
  EXPECT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks.at(0).kind, kind);
  EXPECT_EQ(tasks.at(0).defaultKnobs, f.attrs.at("schedule"));
  ConfigSpace space = ConfigSpace::forKey(key, avx2());
  EXPECT_EQ(space.indexOf(lower::parseKnobs(tasks.at(0).defaultKnobs)), 0);
  for (int64_t i = 1; i < space.size(); ++i) EXPECT_EQ(space.features(i).size(), space.features(0).size());
  return space;
}

TEST(MatmulTune, TaskGraphSpaceAndExtraction) {
  ConfigSpace space = checkTaskAndSpace(kMatmul, "matmul", 2.0 * 6 * 9 * 19 * 20);
  ASSERT_GT(space.size(), 20);
  lower::MatmulShape s = lower::matmulShapeOfKey(lower::parseTuneKey(kMatmul).params, kMatmul);
  for (int64_t i = 0; i < space.size(); ++i) {
    EXPECT_TRUE(space.config(i).count("mi"));
    EXPECT_TRUE(lower::matmulAnnotationFits(s, space.config(i), 8));
  }
}

TuneRecord record(const std::string& key, Knobs knobs, std::string trace, double ms) {
  TuneRecord r;
  r.key = key, r.target = "llvm -mcpu=haswell", r.knobs = std::move(knobs), r.trace = std::move(trace);
  r.costMs = ms, r.costsMs = {ms};
  r.tuner = "random", r.timestamp = "2026-11-27T00:00:00Z", r.version = "test";
  return r;
}

TEST(MatmulTune, RecordsCarryTracesAndRefuseBadOnes) {
  Knobs knobs{{"mi", 3}, {"nv", 2}, {"kt", 0}, {"par", 3}};
  std::string trace = lower::matmulTrace(kMatmul, knobs, 8).str();
  ASSERT_FALSE(trace.empty());
  TuneRecord r = record(kMatmul, knobs, trace, 0.5);
  std::string line = recordJson(r);
  EXPECT_EQ(line.find('\n'), std::string::npos);  // one JSON line, the trace's newlines escaped
  TuneRecord back;
  ASSERT_TRUE(parseRecord(line, back));
  EXPECT_EQ(back.trace, trace);
  EXPECT_EQ(back.knobs, knobs);
  // An old knob-only record reads with no trace.
  TuneRecord old;
  ASSERT_TRUE(parseRecord(R"({"key":"dense:m=2,k=37,n=21:f32","target":"llvm","knobs":"cols=4,rows=2","cost_ms":1.5})", old));
  EXPECT_EQ(old.trace, "");
  EXPECT_EQ(recordJson(old).find("trace"), std::string::npos);

  fs::path dir = fs::temp_directory_path() / ("kiln_mm_records_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::string path = (dir / "r.jsonl").string();
  TuneRecord bad = record(kMatmul, {{"mi", 2}, {"nv", 1}, {"kt", 0}, {"par", 0}}, "split(i; 4\n", 0.1);
  appendRecords(path, {r, bad, old});
  RecordFile file = readRecords(path);
  ASSERT_EQ(file.records.size(), 2u);
  EXPECT_EQ(file.badLines, 1);
  EXPECT_NE(file.firstProblem.find("line 2: the trace of '" + kMatmul + "' does not parse"), std::string::npos)
      << file.firstProblem;
  EXPECT_EQ(file.firstProblem.find('\n'), std::string::npos);
  lower::ScheduleConfigs best = bestConfigs(file.records, "");
  EXPECT_EQ(best.byKey.at(kMatmul), knobs);
  EXPECT_EQ(*best.findTrace(kMatmul), trace);
  EXPECT_EQ(best.findTrace("dense:m=2,k=37,n=21:f32"), nullptr);
  fs::remove_all(dir);
}

/// Measures candidates in this process: the task graph lowered with the candidate's knobs,
/// JIT-compiled, checked against the heuristic's output and timed (median of 3 runs).
class InProcessMeasurer : public Measurer {
 public:
  void measure(const std::string& key, const std::vector<std::string>& knobs,
               const std::function<void(size_t, const Measurement&)>& done) override {
    for (size_t i = 0; i < knobs.size(); ++i) done(i, one(key, knobs[i]));
  }
  std::vector<Measurement> measureSideBySide(const std::string& key, const std::vector<std::string>& knobs) override {
    std::vector<Measurement> out;
    for (const std::string& k : knobs) out.push_back(one(key, k));
    return out;
  }
  int measured = 0;

 private:
  Measurement one(const std::string& key, const std::string& knobs) {
    ++measured;
    Graph g = taskGraph(key);
    std::vector<runtime::Tensor> inputs;
    for (ValueId v : g.inputs()) inputs.push_back(lower::testing::randomTensor(g.type(v).shape, static_cast<uint32_t>(9 + inputs.size())));
    lower::LowerOptions options;  // 8 lanes, as the loop's records are traced for (TuneLoopOptions::lower)
    runtime::Tensor want = lower::testing::evalGraph(g, inputs, Engine::Jit, options)[0];
    auto configs = std::make_shared<lower::ScheduleConfigs>();
    if (!knobs.empty()) configs->byKey[key] = lower::parseKnobs(knobs);
    options.schedules = configs;
    Measurement m;
    std::vector<double> samples;
    runtime::Tensor got;
    for (int r = 0; r < 3; ++r) {
      auto start = std::chrono::steady_clock::now();
      got = lower::testing::evalGraph(g, inputs, Engine::Jit, options)[0];
      samples.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    if (!lower::testing::allClose(got, lower::testing::toVector(want))) {
      m.error = "wrong result";
      return m;
    }
    std::sort(samples.begin(), samples.end());
    m.samplesMs = samples;
    m.medianMs = samples[1];
    return m;
  }
};

/// Tunes `key` with the random tuner over 6 candidates measured in process; every sketch record
/// carries a trace that alone builds a kernel computing what the interpreter computes.
void tuneLoopRecordsTracesThatBuild(const std::string& key) {
  SCOPED_TRACE(key);
  Graph g = taskGraph(key);
  std::vector<TuneTask> tasks = extractTasks(lower::lowerGraph(g, lower::LowerOptions{}));
  ASSERT_EQ(tasks.size(), 1u);
  InProcessMeasurer measurer;
  TuneLoopOptions options = testing::smallLoopOptions("2026-11-27T12:00:00Z");
  std::vector<TuneRecord> records;
  TuneLoopResult result = runTuneLoop(tasks, {6}, {}, measurer, options, [&](const TuneRecord& r) { records.push_back(r); });
  EXPECT_EQ(result.totalErrors, 0);
  EXPECT_EQ(result.totalMeasured, 6);
  std::vector<runtime::Tensor> inputs;
  for (ValueId v : g.inputs()) inputs.push_back(lower::testing::randomTensor(g.type(v).shape, static_cast<uint32_t>(1 + inputs.size())));
  runtime::Tensor want = lower::testing::evalGraph(g, inputs, Engine::Interpreter)[0];
  int traced = 0;
  for (const TuneRecord& r : records) {
    EXPECT_EQ(r.key, key);
    EXPECT_EQ(r.trace.empty(), !r.knobs.count("mi")) << lower::knobsText(r.knobs);
    if (r.trace.empty()) continue;
    ++traced;
    // The recorded trace builds the kernel on its own (no knobs) and it computes the product.
    auto configs = std::make_shared<lower::ScheduleConfigs>();
    configs->traces[key] = r.trace;
    lower::LowerOptions lo;
    lo.schedules = configs;
    lower::LoweredModule m = lower::lowerGraph(g, lo);
    EXPECT_EQ(keyedKernel(m, key).attrs.at("trace"), r.trace);
    EXPECT_TRUE(lower::testing::allClose(lower::testing::evalModule(m, inputs, Engine::Jit)[0],
                                         lower::testing::toVector(want)));
  }
  EXPECT_GE(traced, 4);
}

TEST(MatmulTune, TuneLoopRecordsTracesThatBuild) { tuneLoopRecordsTracesThatBuild(kMatmul); }

// dense_packed: rows the register tile does not divide, two panels of two 8-lane vectors.
const std::string kDensePacked = "dense_packed:m=21,k=20,n=32,p=16,b=1:f32";

TEST(DensePackedTune, TaskGraphSpaceAndExtraction) {
  ConfigSpace space = checkTaskAndSpace(kDensePacked, "dense_packed", 2.0 * 21 * 20 * 32);
  ASSERT_GT(space.size(), 10);
  lower::DensePackedShape s = lower::densePackedShapeOfKey(lower::parseTuneKey(kDensePacked).params, kDensePacked);
  for (int64_t i = 1; i < space.size(); ++i)
    EXPECT_TRUE(lower::densePackedAnnotationFits(s, space.config(i), 8, 16)) << lower::knobsText(space.config(i));
  EXPECT_THROW(taskGraph("dense_packed:m=2,k=3,n=10,p=4,b=0:f32"), Error);  // 4 does not divide 10
}

TEST(DensePackedTune, TuneLoopRecordsTracesThatBuild) { tuneLoopRecordsTracesThatBuild(kDensePacked); }

}  // namespace
}  // namespace kiln::core::tune
