// The measurement façade end to end on real models: per-operator profiles (sum of calls vs end
// to end, Chrome trace), batch sweeps (stopping a backend cleanly), the session store and reports.
// ResNet-18's profile is labelled slow in ctest.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/facade.h"
#include "profiler/python_worker.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string modelPath(const std::string& rel) { return std::string(KILN_MODELS_DIR) + "/" + rel; }

/// The first of the interpreters the façade tries by default (python3 on PATH, then
/// /usr/bin/python3) that imports a torch >= 2.0, asked here directly; "" when none does.
/// The python with torch >= 2 the façade uses for its Python backends ("" when there is none).
std::string currentTorchPython() {
  profiler::TorchPython p = profiler::findTorchPython("");
  return p.usable ? p.python : "";
}

class MeasureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    m_dir = fs::temp_directory_path() / ("kiln_measure_test_" + std::to_string(rd()));
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }
  app::StoreOptions store() const {
    app::StoreOptions s;
    s.dbPath = (m_dir / "kiln.db").string();
    return s;
  }
  fs::path m_dir;
};

TEST_F(MeasureTest, ProfileOfAFusedModelWithTraceStoreAndDiff) {
  app::ProfileOptions o;
  o.repeat = 5;
  o.minRepeatMs = 1;
  o.store = store();
  o.build.threads = 2;
  o.build.optLevel = 0;
  auto plain = app::profile(modelPath("ops/conv_bn_relu.pt"), o);
  ASSERT_TRUE(plain) << plain.error().message;
  o.build.optLevel = 2;
  auto fused = app::profile(modelPath("ops/conv_bn_relu.pt"), o);
  ASSERT_TRUE(fused) << fused.error().message;

  const auto& r = fused.value();
  EXPECT_EQ(static_cast<int>(r.profile.ops.size()), r.build.numCalls);
  EXPECT_LT(r.profile.ops.size(), plain.value().profile.ops.size());  // fusion removed calls
  double percent = 0, flops = 0;
  for (const auto& op : r.profile.ops) {
    EXPECT_FALSE(op.ops.empty());
    EXPECT_FALSE(op.outputShape.empty());
    EXPECT_GT(op.bytes, 0);
    percent += op.percent;
    flops += op.flops;
  }
  EXPECT_NEAR(percent, 100, 1e-6);
  EXPECT_GT(flops, 2.0 * 16 * 16 * 16 * 8 * 9);  // the convolution at least
  EXPECT_GT(r.profile.endToEnd.medianMs, 0);
  EXPECT_EQ(r.profile.endToEnd.samplesMs.size(), 5u);
  EXPECT_FALSE(r.context.cpu.empty());
  EXPECT_FALSE(r.context.llvmVersion.empty());
  EXPECT_EQ(r.context.tuningRecords, "none");

  nlohmann::json trace = nlohmann::json::parse(app::profileTraceJson(r));
  size_t complete = 0;
  for (const auto& e : trace["traceEvents"]) complete += e["ph"] == "X";
  EXPECT_EQ(complete, r.profile.ops.size());
  nlohmann::json j = nlohmann::json::parse(app::profileResultJson(r));
  EXPECT_EQ(j["calls"].size(), r.profile.ops.size());
  EXPECT_TRUE(j["context"].contains("torch_version"));

  // Both went to the same session (same model file); the diff names the fusion.
  EXPECT_EQ(plain.value().stored.sessionId, r.stored.sessionId);
  auto session = app::loadSession(o.store.dbPath, r.stored.sessionId);
  ASSERT_TRUE(session) << session.error().message;
  EXPECT_EQ(session.value().profiles.size(), 2u);
  EXPECT_EQ(session.value().builds.size(), 2u);
  auto diff = app::diffBuilds(o.store.dbPath, plain.value().stored.buildId, r.stored.buildId);
  ASSERT_TRUE(diff) << diff.error().message;
  bool fusedDifferently = false;
  for (const auto& row : diff.value().rows) fusedDifferently |= row.change == "fused differently";
  EXPECT_TRUE(fusedDifferently);
  auto missing = app::diffBuilds(o.store.dbPath, r.stored.buildId, 999);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("no build 999"), std::string::npos);
}

TEST_F(MeasureTest, SweepRecordsEveryPointAndTheReportShowsIt) {
  app::SweepOptions o;
  o.batches = {2, 1};
  o.backends = {"kiln", "pytorch-eager", "torchscript-optimized", "torch-compile"};
  o.repeat = 3;
  o.minRepeatMs = 1;
  o.build.threads = 2;
  o.store = store();
  std::vector<std::string> steps;
  auto result = app::sweep(modelPath("ops/conv_bn_relu.pt"), o, [&](const std::string& s) {
    steps.push_back(s);
    return true;
  });
  ASSERT_TRUE(result) << result.error().message;
  const auto& r = result.value();
  EXPECT_EQ(r.batches, (std::vector<int64_t>{1, 2}));
  ASSERT_EQ(r.points.size(), 8u);
  // One step per batch size: its backends are timed side by side, each in its own process.
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0], "batch 1: kiln pytorch-eager torchscript-optimized torch-compile");
  const std::string torch2 = currentTorchPython();
  for (const auto& m : r.points) {
    if (m.backend == "torch-compile") {
      // An op module has no Python architecture to compile (it is TorchScript): unavailable with
      // the reason (with Debian's torch 1.13 alone, that it needs torch >= 2.0), never a number.
      EXPECT_STREQ(profiler::statusName(m.status), "unavailable") << m.reason;
      EXPECT_FALSE(m.reason.empty());
      if (torch2.empty()) EXPECT_NE(m.reason.find("torch >= 2.0"), std::string::npos) << m.reason;
      else EXPECT_NE(m.reason.find("Python module"), std::string::npos) << m.reason;
      EXPECT_TRUE(m.timing.samplesMs.empty());
      EXPECT_EQ(m.timing.medianMs, 0);
      continue;
    }
    ASSERT_TRUE(m.ok()) << m.backend << ": " << m.reason;
    EXPECT_NEAR(m.throughput(), m.batch * 1000.0 / m.timing.medianMs, 1e-9);
  }
  nlohmann::json j = nlohmann::json::parse(app::sweepJson(r));
  EXPECT_EQ(j["points"].size(), 8u);
  // The host's placement of the CPUs, probed in each batch's measurement (two CPUs here).
  if (sysconf(_SC_NPROCESSORS_ONLN) >= 2) {
    ASSERT_EQ(r.coreRoundTripNs.size(), 2u);
    for (int64_t batch : {1, 2}) EXPECT_GE(j["core_round_trip_ns"][std::to_string(batch)].size(), 2u);
    EXPECT_EQ(j["placement_changed"], r.placementChanged);
  }

  auto html = app::sessionReport(o.store.dbPath, r.stored.sessionId, app::ReportFormat::Html);
  ASSERT_TRUE(html) << html.error().message;
  EXPECT_NE(html.value().find("<svg"), std::string::npos);
  EXPECT_NE(html.value().find("Latency vs batch size"), std::string::npos);
  size_t rows = 0;
  for (size_t at = 0; (at = html.value().find("<tr class=\"backend\">", at)) != std::string::npos; ++at)
    ++rows;
  EXPECT_EQ(rows, 4u);
  auto csv = app::sessionReport(o.store.dbPath, r.stored.sessionId, app::ReportFormat::Csv);
  ASSERT_TRUE(csv);
  EXPECT_EQ(csv.value().rfind("session_id,run_id,run_kind,", 0), 0u);
  EXPECT_EQ(std::count(csv.value().begin(), csv.value().end(), '\n'), 1 + 8);

  // torch.compile on a torchvision network: measured like any backend once a python with torch
  // >= 2.0 is installed, else unavailable with the reason.
  app::SweepOptions tc;
  tc.batches = {1};
  tc.backends = {"torch-compile"};
  tc.repeat = 3;
  tc.minRepeatMs = 1;
  tc.build.threads = 2;
  tc.python = torch2;  // "": the façade's own search, which finds no torch >= 2.0 either
  tc.store.enabled = false;
  auto compiled = app::sweep(modelPath("mobilenet_v3_small.pt"), tc);
  ASSERT_TRUE(compiled) << compiled.error().message;
  ASSERT_EQ(compiled.value().points.size(), 1u);
  const profiler::Measurement& point = compiled.value().points[0];
  EXPECT_EQ(point.backend, "torch-compile");
  if (!torch2.empty()) {
    EXPECT_TRUE(point.ok()) << torch2 << ": " << profiler::statusName(point.status) << ": " << point.reason;
    EXPECT_GT(point.timing.medianMs, 0);
    EXPECT_EQ(point.timing.samplesMs.size(), 3u);
    EXPECT_NEAR(point.throughput(), 1000.0 / point.timing.medianMs, 1e-9);
  } else {
    EXPECT_STREQ(profiler::statusName(point.status), "unavailable") << point.reason;
    EXPECT_NE(point.reason.find("torch >= 2.0"), std::string::npos) << point.reason;
    EXPECT_TRUE(point.timing.samplesMs.empty());
    EXPECT_EQ(point.timing.medianMs, 0);
  }
}

TEST_F(MeasureTest, SweepStopsABackendOverItsTimeBudget) {
  app::SweepOptions o;
  o.batches = {1, 2, 4};
  o.backends = {"kiln", "pytorch-eager"};
  o.budgetSeconds = 1e-7;  // no run fits
  o.build.threads = 2;
  o.store.enabled = false;
  auto result = app::sweep(modelPath("ops/conv_bn_relu.pt"), o);
  ASSERT_TRUE(result) << result.error().message;
  for (const auto& m : result.value().points) {
    if (m.batch == 1) {
      EXPECT_EQ(m.status, profiler::Status::Timeout) << m.backend;
    } else {
      EXPECT_EQ(m.status, profiler::Status::Skipped) << m.backend;
      EXPECT_NE(m.reason.find("stopped after timeout at batch 1"), std::string::npos) << m.reason;
    }
  }
  EXPECT_EQ(result.value().stored.sessionId, 0);
}

TEST_F(MeasureTest, BadStoreFailsBeforeMeasuring) {
  std::string notDb = (m_dir / "notes.txt").string();
  { std::ofstream(notDb) << std::string(100, 'x'); }
  app::ProfileOptions o;
  o.store.dbPath = notDb;
  auto r = app::profile(modelPath("ops/conv_bn_relu.pt"), o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::Store);
  EXPECT_NE(r.error().message.find("not a SQLite database"), std::string::npos) << r.error().message;
  app::SweepOptions tvm;
  tvm.backends = {"tvm"};
  auto unknown = app::sweep(modelPath("ops/conv_bn_relu.pt"), tvm);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().kind, ErrorKind::Usage);
}

// ResNet-18 at the default -O: the per-call sum must agree with end-to-end within 15 %, and both
// with the same build timed here on its own.
TEST_F(MeasureTest, SlowResnet18CallSumMatchesEndToEnd) {
  app::ProfileOptions o;
  o.repeat = 7;
  o.warmup = 1;
  o.build.threads = 2;
  o.store = store();
  // Independent end-to-end times: the same build run in this process and timed with a plain
  // clock, before and after the profile (a load that comes and goes is seen on both sides).
  auto model = app::openModel(modelPath("resnet18.pt"));
  ASSERT_TRUE(model) << model.error().message;
  auto compiled = app::build(model.value(), o.build);
  ASSERT_TRUE(compiled) << compiled.error().message;
  const std::vector<runtime::Tensor> inputs = app::randomInputs(*model.value(), 1);
  ASSERT_TRUE(app::run(*compiled.value(), inputs));  // warm-up
  auto timeHere = [&](std::vector<double>& ownMs) {
    for (int i = 0; i < o.repeat; ++i) {
      auto start = std::chrono::steady_clock::now();
      ASSERT_TRUE(app::run(*compiled.value(), inputs));
      ownMs.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
  };
  // Both sides of the gap against the independent times, by their fastest runs (a load on the
  // shared machine only ever slows a run down, so the fastest run of each is the steadiest
  // figure): the profile's fastest end-to-end run and its sum of per-call minimums lie within
  // 25 % of the fastest run timed here. A profile that timed another build (threads, batch, -O),
  // or counted calls twice or not at all, lands outside however small its own gap, in every
  // attempt; a machine whose speed shifts during one attempt (seen in CI: 16.7 ms before a
  // profile, 10.2 ms after it) gets up to three.
  std::string failures;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    std::vector<double> ownMs;
    timeHere(ownMs);
    auto r = app::profile(modelPath("resnet18.pt"), o);
    timeHere(ownMs);
    ASSERT_TRUE(r) << r.error().message;
    const auto& p = r.value().profile;
    EXPECT_GT(p.ops.size(), 10u);
    double sumUs = 0, sumMeanUs = 0, sumMinMs = 0, gflop = 0;
    for (const auto& op : p.ops) {
      sumUs += op.timeUs;
      sumMeanUs += op.meanUs;
      sumMinMs += op.minUs / 1000;
      gflop += op.flops / 1e9;
    }
    EXPECT_NEAR(sumUs / 1000, p.sumMs, 1e-9);
    EXPECT_NEAR(sumMeanUs / 1000, p.sumMeanMs, 1e-9);
    EXPECT_NEAR(gflop, 3.6, 0.2);  // ResNet-18 at 224×224: ~1.8 GMAC
    const double fastest = *std::min_element(ownMs.begin(), ownMs.end());
    std::ostringstream line;
    line << "attempt " << attempt << ": profile end to end " << p.endToEnd.medianMs << " ms (fastest "
         << p.endToEnd.minMs << "), calls " << p.sumMs << " ms (sum of fastest " << sumMinMs << "), gap "
         << p.gapPercent() << " %; fastest here " << fastest << " ms; timed here (ms):";
    for (double ms : ownMs) line << " " << ms;
    std::printf("%s\n", line.str().c_str());
    const bool gapOk = std::abs(p.gapPercent()) < 15.0;
    const bool endToEndOk = p.endToEnd.minMs > 0.8 * fastest && p.endToEnd.minMs < 1.25 * fastest;
    // The calls' sum by their minimums, or by their medians: on a machine slowed throughout (seen
    // in CI: every end-to-end run near 20 ms where a quiet one takes 10), each call's minimum
    // catches its own quiet moment and their sum falls far below any whole run, while the medians
    // still add up to one. Counting calls twice or missing some fails both.
    auto within = [&](double ms) { return ms > 0.8 * fastest && ms < 1.25 * fastest; };
    const bool callsOk = within(sumMinMs) || within(p.sumMs);
    if (gapOk && endToEndOk && callsOk) return;
    failures += line.str() + "\n";
  }
  ADD_FAILURE() << "the profile disagrees with independent timings in every attempt (gap under 15 %, "
                   "fastest runs within 0.8-1.25x of the fastest run timed here):\n"
                << failures;
}

}  // namespace
}  // namespace kiln
