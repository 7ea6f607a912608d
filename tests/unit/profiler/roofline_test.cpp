// The roofline: the bound math on hand-made ceilings, the ceilings measured on this machine
// (structure and plausibility, never speed orderings: the machine is shared), their storage in a
// real SQLite file (round trip, reuse, re-measurement, older stores), and the chart in the report.
#include <gtest/gtest.h>
#include <libxml/parser.h>
#include <libxml/xpath.h>
#include <libxml/xpathInternals.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <thread>

#include "profiler/ceilings.h"
#include "profiler/report.h"
#include "profiler/roofline.h"
#include "profiler/sha256.h"
#include "profiler/store.h"
#include "runtime/error.h"

namespace kiln::profiler {
namespace {

namespace fs = std::filesystem;

/// Peak 100 GFLOP/s; L1 holds 64 KiB at 400 GB/s, L2 2 MiB at 200, L3 32 MiB at 80, DRAM 20.
MachineCeilings handMade() {
  MachineCeilings c;
  c.machineKey = sha256Hex("hand-made");
  c.cpu = "Hand-made CPU";
  c.threads = 2;
  c.vectorBits = 512;
  c.peakGflops = 100;
  c.bandwidth = {{"L1", 64 * 1024, 32 * 1024, 400},
                 {"L2", 2 << 20, 1 << 20, 200},
                 {"L3", 32 << 20, 16 << 20, 80},
                 {"DRAM", 0, 128 << 20, 20}};
  c.method = "by hand";
  c.measuredAt = "2026-01-02T03:04:05Z";
  return c;
}

OpRecord call(int index, double flops, double bytes, double timeUs) {
  OpRecord op;
  op.index = index;
  op.name = "%y" + std::to_string(index) + " = @fused_" + std::to_string(index);
  op.key = "y" + std::to_string(index);
  op.ops = {"conv2d", "relu"};
  op.flops = flops;
  op.bytes = bytes;
  op.timeUs = timeUs;
  op.percent = 25;
  return op;
}

TEST(RooflineMath, AttainableIsTheLowerOfPeakAndBandwidthTimesIntensity) {
  EXPECT_DOUBLE_EQ(attainableGflops(0.5, 100, 20), 10);   // left of the ridge (5 FLOPs/byte)
  EXPECT_DOUBLE_EQ(attainableGflops(5, 100, 20), 100);    // at the ridge
  EXPECT_DOUBLE_EQ(attainableGflops(50, 100, 20), 100);   // right of it: the peak
}

TEST(RooflineMath, TheLevelIsTheSmallestThatHoldsTheWorkingSet) {
  MachineCeilings c = handMade();
  EXPECT_EQ(ceilingFor(1000, c).level, "L1");
  EXPECT_EQ(ceilingFor(64 * 1024, c).level, "L1");
  EXPECT_EQ(ceilingFor(64 * 1024 + 1, c).level, "L2");
  EXPECT_EQ(ceilingFor(3e6, c).level, "L3");
  EXPECT_EQ(ceilingFor(1e8, c).level, "DRAM");
  MachineCeilings empty;
  EXPECT_THROW(ceilingFor(1, empty), Error);
}

TEST(RooflineMath, ComputeBoundCall) {
  // 2 MFLOP over 1 MB (in L2) in 100 µs: AI 2, 20 GFLOP/s; bound min(100, 2 × 200) = 100.
  RooflinePoint p = rooflinePoint(call(3, 2e6, 1e6, 100), handMade());
  EXPECT_EQ(p.call, 3);
  EXPECT_EQ(p.key, "y3");
  EXPECT_DOUBLE_EQ(p.intensity, 2);
  EXPECT_DOUBLE_EQ(p.gflops, 20);
  EXPECT_DOUBLE_EQ(p.gbPerSecond, 10);
  EXPECT_EQ(p.level, "L2");
  EXPECT_DOUBLE_EQ(p.bandwidth, 200);
  EXPECT_DOUBLE_EQ(p.boundGflops, 100);
  EXPECT_DOUBLE_EQ(p.percentOfBound, 20);
  EXPECT_FALSE(p.memoryBound);
  EXPECT_DOUBLE_EQ(p.percentOfTime, 25);
}

TEST(RooflineMath, MemoryBoundCall) {
  // 1 MFLOP over 10 MB (in L3) in 1 ms: AI 0.1, 1 GFLOP/s; bound 0.1 × 80 = 8.
  RooflinePoint p = rooflinePoint(call(0, 1e6, 1e7, 1000), handMade());
  EXPECT_DOUBLE_EQ(p.intensity, 0.1);
  EXPECT_DOUBLE_EQ(p.gflops, 1);
  EXPECT_EQ(p.level, "L3");
  EXPECT_DOUBLE_EQ(p.boundGflops, 8);
  EXPECT_DOUBLE_EQ(p.percentOfBound, 12.5);
  EXPECT_TRUE(p.memoryBound);
  // Memory-bound: the % of the bound is the achieved bandwidth against the level's.
  EXPECT_DOUBLE_EQ(p.percentOfBound, 100 * p.gbPerSecond / p.bandwidth);
}

TEST(RooflineMath, ACallWithoutFlopsIsMeasuredAgainstItsBandwidth) {
  // A layout transform: 400 MB (DRAM) in 10 ms = 40 GB/s against DRAM's 20.
  RooflinePoint p = rooflinePoint(call(1, 0, 4e8, 1e4), handMade());
  EXPECT_EQ(p.level, "DRAM");
  EXPECT_DOUBLE_EQ(p.intensity, 0);
  EXPECT_DOUBLE_EQ(p.boundGflops, 0);
  EXPECT_DOUBLE_EQ(p.percentOfBound, 200);
  EXPECT_TRUE(p.memoryBound);
}

TEST(RooflineMath, OnePointPerCallInExecutionOrder) {
  ProfileRecord profile;
  profile.ops = {call(0, 1e6, 1e7, 1000), call(1, 0, 4e8, 1e4), call(2, 2e6, 1e6, 100)};
  auto points = rooflineOf(profile, handMade());
  ASSERT_EQ(points.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(points[i].call, i);
}

int countXPath(xmlDocPtr doc, const char* expr) {
  xmlXPathContextPtr ctx = xmlXPathNewContext(doc);
  xmlXPathRegisterNs(ctx, BAD_CAST "h", BAD_CAST "http://www.w3.org/1999/xhtml");
  xmlXPathRegisterNs(ctx, BAD_CAST "svg", BAD_CAST "http://www.w3.org/2000/svg");
  xmlXPathObjectPtr r = xmlXPathEvalExpression(BAD_CAST expr, ctx);
  int n = !r ? -1 : r->nodesetval ? r->nodesetval->nodeNr : 0;
  xmlXPathFreeObject(r);
  xmlXPathFreeContext(ctx);
  return n;
}

TEST(RooflineChart, OneDotPerCallWithFlopsAndALinePerCeiling) {
  ProfileRecord profile;
  profile.ops = {call(0, 1e6, 1e7, 1000), call(1, 0, 4e8, 1e4), call(2, 2e6, 1e6, 100), call(3, 5e7, 2e5, 300)};
  MachineCeilings c = handMade();
  std::string svg = rooflineSvg("Roofline <test>", rooflineOf(profile, c), c);
  xmlDocPtr doc = xmlReadMemory(svg.data(), static_cast<int>(svg.size()), "roofline.svg", "UTF-8", XML_PARSE_NONET);
  ASSERT_NE(doc, nullptr) << svg;
  EXPECT_EQ(countXPath(doc, "//svg:circle[@class='call']"), 3);   // the layout transform has no FLOPs
  EXPECT_EQ(countXPath(doc, "//svg:line[@class='ceiling']"), 5);  // 4 bandwidths and the peak
  xmlFreeDoc(doc);
}

TEST(RooflineChart, TwoBuildsDrawGreyDotsAndAnArrowPerCallThatMoved) {
  MachineCeilings c = handMade();
  ProfileRecord a, b;
  a.ops = {call(0, 1e6, 1e7, 1000), call(1, 0, 4e8, 1e4), call(2, 2e6, 1e6, 100), call(3, 5e7, 2e5, 300)};
  b.ops = a.ops;
  b.ops[0].timeUs = 250;  // 4x faster: moves up
  b.ops[3].key = "y3+y4";  // fused differently: no call of A to come from
  std::string svg = rooflineComparisonSvg("A -> B", rooflineOf(a, c), rooflineOf(b, c), c);
  xmlDocPtr doc = xmlReadMemory(svg.data(), static_cast<int>(svg.size()), "moves.svg", "UTF-8", XML_PARSE_NONET);
  ASSERT_NE(doc, nullptr) << svg;
  EXPECT_EQ(countXPath(doc, "//svg:circle[@class='previous']"), 3);
  EXPECT_EQ(countXPath(doc, "//svg:circle[@class='call']"), 3);
  EXPECT_EQ(countXPath(doc, "//svg:line[@class='move']"), 1);  // call 2 stayed put, call 3 is new
  EXPECT_NE(svg.find("1 call moved"), std::string::npos);
  xmlFreeDoc(doc);

  // One build alone: no grey dots, no arrows.
  std::string single = rooflineSvg("B", rooflineOf(b, c), c);
  EXPECT_EQ(single.find("class=\"previous\""), std::string::npos);
  EXPECT_EQ(single.find("class=\"move\""), std::string::npos);
}

TEST(RooflineChart, AxesAreWholeDecadesHoldingEveryPointAndRidge) {
  RooflineAxes none = rooflineAxes({}, 0, {});
  EXPECT_FALSE(none.fitted);
  EXPECT_DOUBLE_EQ(none.xMin(), 0.1);
  EXPECT_DOUBLE_EQ(none.yMax(), 100);

  // Points at intensity 0.05 and 30, 2 and 80 GFLOP/s; ridges of a 100 GFLOP/s peak at 0.25 and 5.
  RooflineAxes axes = rooflineAxes({{0.05, 2}, {30, 80}, {-1, 5}, {INFINITY, 1}}, 100, {400, 20, 0});
  EXPECT_TRUE(axes.fitted);
  for (double v : {axes.x0, axes.x1, axes.y0, axes.y1}) EXPECT_EQ(v, std::floor(v));
  EXPECT_LE(axes.xMin(), 0.05);
  EXPECT_GE(axes.xMax(), 30);
  EXPECT_LE(axes.yMin(), 2);
  EXPECT_GE(axes.yMax(), 100);  // the peak
  EXPECT_EQ(axes.x0, -2);       // the point at 0.05 needs room: not the decade at 0.1 or above
  EXPECT_EQ(axes.x1, 2);        // 30 sits below 100 with room
  // Points without a positive, finite position are left out.
  RooflineAxes bad = rooflineAxes({{-1, 5}, {0, 1}, {NAN, 2}}, 0, {});
  EXPECT_FALSE(bad.fitted);
}

// ---- measured ceilings ---------------------------------------------------------------------------

CeilingOptions quick() {
  CeilingOptions o;
  o.repeats = 2;
  o.targetSeconds = 0.002;
  return o;
}

void expectPlausible(const MachineCeilings& c, int threads) {
  EXPECT_EQ(c.threads, threads);
  EXPECT_EQ(c.machineKey, machineKey());
  EXPECT_EQ(c.machineKey.size(), 64u);
  EXPECT_TRUE(c.vectorBits == 128 || c.vectorBits == 256 || c.vectorBits == 512) << c.vectorBits;
  EXPECT_TRUE(std::isfinite(c.peakGflops));
  EXPECT_GT(c.peakGflops, 0.1);
  EXPECT_LT(c.peakGflops, 1e5);  // a few TFLOP/s at most on a CPU
  std::vector<CacheLevel> caches = hostCaches();
  ASSERT_EQ(c.bandwidth.size(), caches.size() + 1);  // each cache level, then DRAM
  for (size_t i = 0; i < c.bandwidth.size(); ++i) {
    const BandwidthCeiling& b = c.bandwidth[i];
    EXPECT_TRUE(std::isfinite(b.gbPerSecond)) << b.level;
    EXPECT_GT(b.gbPerSecond, 0.01) << b.level;
    EXPECT_LT(b.gbPerSecond, 1e5) << b.level;
    EXPECT_GT(b.workingSetBytes, 0) << b.level;
    if (i + 1 < c.bandwidth.size()) {
      EXPECT_EQ(b.level, "L" + std::to_string(caches[i].level));
      EXPECT_GT(b.capacityBytes, 0);
      EXPECT_LE(b.workingSetBytes, b.capacityBytes) << b.level;  // the triad fits the level
      if (i > 0) EXPECT_GT(b.workingSetBytes, c.bandwidth[i - 1].workingSetBytes);
    }
  }
  const BandwidthCeiling& dram = c.bandwidth.back();
  EXPECT_EQ(dram.level, "DRAM");
  EXPECT_EQ(dram.capacityBytes, 0);
  EXPECT_GE(dram.workingSetBytes, int64_t{60} << 20);
  for (const BandwidthCeiling& b : c.bandwidth)
    if (b.capacityBytes > 0) EXPECT_GT(dram.workingSetBytes, b.capacityBytes);  // beyond every cache
  EXPECT_FALSE(c.method.empty());
  EXPECT_FALSE(c.measuredAt.empty());
}

TEST(Ceilings, CachesComeFromTheCpuInLevelOrder) {
  std::vector<CacheLevel> caches = hostCaches();
  for (size_t i = 0; i < caches.size(); ++i) {
    EXPECT_GT(caches[i].sizeBytes, 0);
    EXPECT_GE(caches[i].sharedBy, 1);
    if (i > 0) EXPECT_GT(caches[i].level, caches[i - 1].level);
  }
}

TEST(Ceilings, MeasuredValuesArePositiveFiniteAndStructured) {
  expectPlausible(measureCeilings(1, quick()), 1);
  if (std::thread::hardware_concurrency() >= 2) expectPlausible(measureCeilings(2, quick()), 2);
  EXPECT_THROW(measureCeilings(0, quick()), Error);
}

// ---- in the store ------------------------------------------------------------------------------

class CeilingsStore : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    m_dir = fs::temp_directory_path() / ("kiln_ceilings_test_" + std::to_string(rd()));
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }
  std::string path(const std::string& name) const { return (m_dir / name).string(); }
  fs::path m_dir;
};

void expectSame(const MachineCeilings& a, const MachineCeilings& b) {
  EXPECT_EQ(a.machineKey, b.machineKey);
  EXPECT_EQ(a.cpu, b.cpu);
  EXPECT_EQ(a.threads, b.threads);
  EXPECT_EQ(a.vectorBits, b.vectorBits);
  EXPECT_DOUBLE_EQ(a.peakGflops, b.peakGflops);
  EXPECT_EQ(a.method, b.method);
  EXPECT_EQ(a.measuredAt, b.measuredAt);
  ASSERT_EQ(a.bandwidth.size(), b.bandwidth.size());
  for (size_t i = 0; i < a.bandwidth.size(); ++i) {
    EXPECT_EQ(a.bandwidth[i].level, b.bandwidth[i].level);
    EXPECT_EQ(a.bandwidth[i].capacityBytes, b.bandwidth[i].capacityBytes);
    EXPECT_EQ(a.bandwidth[i].workingSetBytes, b.bandwidth[i].workingSetBytes);
    EXPECT_DOUBLE_EQ(a.bandwidth[i].gbPerSecond, b.bandwidth[i].gbPerSecond);
  }
}

TEST_F(CeilingsStore, RoundTripThroughARealFile) {
  std::string db = path("kiln.db");
  MachineCeilings c = handMade();
  int64_t id = 0;
  {
    Store store(db);
    id = store.transaction([&] { return store.addCeilings(c); });
    EXPECT_GT(id, 0);
  }
  Store store(db);
  auto back = store.ceilings(id);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->id, id);
  expectSame(*back, c);
  auto latest = store.latestCeilings(c.machineKey, 2);
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->id, id);
  EXPECT_FALSE(store.latestCeilings(c.machineKey, 3).has_value());       // another thread count
  EXPECT_FALSE(store.latestCeilings(sha256Hex("other"), 2).has_value());  // another machine
}

TEST_F(CeilingsStore, MeasuredOnceReusedThenMeasuredAgainOnRequest) {
  Store store(path("kiln.db"));
  int measured = 0;
  MeasureCeilingsFn measure = [&](int threads) {
    ++measured;
    return measureCeilings(threads, quick());
  };
  CeilingsLookup first = ceilingsFor(&store, 1, false, measure);
  EXPECT_FALSE(first.reused);
  EXPECT_EQ(measured, 1);
  EXPECT_GT(first.ceilings.id, 0);
  expectPlausible(first.ceilings, 1);

  CeilingsLookup second = ceilingsFor(&store, 1, false, measure);
  EXPECT_TRUE(second.reused);
  EXPECT_EQ(measured, 1);  // not measured again
  EXPECT_EQ(second.ceilings.id, first.ceilings.id);
  expectSame(second.ceilings, first.ceilings);

  CeilingsLookup again = ceilingsFor(&store, 1, true, measure);
  EXPECT_FALSE(again.reused);
  EXPECT_EQ(measured, 2);
  EXPECT_GT(again.ceilings.id, first.ceilings.id);
  EXPECT_EQ(ceilingsFor(&store, 1, false, measure).ceilings.id, again.ceilings.id);  // the latest wins
  EXPECT_EQ(measured, 2);

  // Without a store: measured every time, never kept.
  CeilingsLookup unstored = ceilingsFor(nullptr, 1, false, measure);
  EXPECT_FALSE(unstored.reused);
  EXPECT_EQ(unstored.ceilings.id, 0);
  EXPECT_EQ(measured, 3);
}

TEST_F(CeilingsStore, AnOlderStoreOpensAndItsRunsGainCeilings) {
  std::string db = path("v4.db");
  int64_t session = 0, oldRun = 0;
  {
    Store v4(db, 4);
    EXPECT_EQ(v4.schemaVersion(), 4);
    int64_t model = v4.addModel(sha256Hex("old"), "old", "/old.pt", 1);
    session = v4.sessionFor(model, 0);
    RunContext c;
    c.cpu = "Test CPU";
    c.threads = 2;
    oldRun = v4.addRun(session, "profile", c);
    EXPECT_THROW(v4.exec("SELECT * FROM machine_ceilings"), Error);  // not there yet
    EXPECT_FALSE(v4.latestCeilings(machineKey(), 2).has_value());
  }
  Store latest(db);
  EXPECT_EQ(latest.schemaVersion(), Store::latestSchemaVersion());
  EXPECT_GE(Store::latestSchemaVersion(), 5);
  auto data = latest.loadSession(session);
  ASSERT_TRUE(data.has_value());
  ASSERT_EQ(data->runs.size(), 1u);
  EXPECT_EQ(data->runs[0].context.ceilingsId, 0);
  EXPECT_TRUE(data->ceilings.empty());
  EXPECT_EQ(data->ceilingsOfRun(oldRun), nullptr);

  int64_t newRun = latest.transaction([&] {
    RunContext c;
    c.cpu = "Test CPU";
    c.threads = 2;
    c.ceilingsId = latest.addCeilings(handMade());
    return latest.addRun(session, "profile", c);
  });
  data = latest.loadSession(session);
  ASSERT_EQ(data->ceilings.size(), 1u);
  ASSERT_NE(data->ceilingsOfRun(newRun), nullptr);
  EXPECT_EQ(data->ceilingsOfRun(newRun)->peakGflops, 100);
  EXPECT_EQ(data->ceilingsOfRun(oldRun), nullptr);
  ASSERT_TRUE(latest.ceilingsOfRun(newRun).has_value());
  EXPECT_FALSE(latest.ceilingsOfRun(oldRun).has_value());
}

TEST_F(CeilingsStore, TheReportDrawsTheRooflineOfAProfileWithCeilings) {
  std::string db = path("kiln.db");
  Store store(db);
  ProfileRecord profile;
  profile.ops = {call(0, 1e6, 1e7, 1000), call(1, 0, 4e8, 1e4), call(2, 2e6, 1e6, 100)};
  profile.endToEnd = timingFromSamples({1.0, 1.1});
  profile.sumMs = 11.1;
  int64_t session = store.transaction([&] {
    int64_t model = store.addModel(sha256Hex("m"), "m", "/m.pt", 1);
    int64_t s = store.sessionFor(model, 0);
    RunContext c;
    c.threads = 2;
    int64_t plain = store.addRun(s, "profile", c);
    store.addProfile(plain, store.addBuild(plain, BuildRecord{}), profile);
    return s;
  });
  auto countIn = [&](const std::string& html, const char* expr) {
    xmlDocPtr doc = xmlReadMemory(html.data(), static_cast<int>(html.size()), "r.html", "UTF-8", XML_PARSE_NONET);
    EXPECT_NE(doc, nullptr);
    int n = doc ? countXPath(doc, expr) : -1;
    xmlFreeDoc(doc);
    return n;
  };
  std::string before = sessionReportHtml(*store.loadSession(session));
  EXPECT_EQ(countIn(before, "//svg:circle[@class='call']"), 0);  // no ceilings: no roofline

  store.transaction([&] {
    RunContext c;
    c.threads = 2;
    c.ceilingsId = store.addCeilings(handMade());
    int64_t run = store.addRun(session, "profile", c);
    store.addProfile(run, store.addBuild(run, BuildRecord{}), profile);
  });
  std::string after = sessionReportHtml(*store.loadSession(session));
  EXPECT_EQ(countIn(after, "//h:div[@class='chart roofline']//svg:circle[@class='call']"), 2);
  EXPECT_EQ(countIn(after, "//h:table[@class='roofline']/h:tr"), 1 + 3);
  // The build before it (profiled without ceilings) is drawn with these ceilings, grey; the same
  // profile, so no call moved.
  EXPECT_EQ(countIn(after, "//h:div[@class='chart roofline moves']//svg:circle[@class='previous']"), 2);
  EXPECT_EQ(countIn(after, "//h:div[@class='chart roofline moves']//svg:line[@class='move']"), 0);

  // A third build where one call got faster: an arrow from the second build's dot.
  ProfileRecord faster = profile;
  faster.ops[2].timeUs = 25;
  store.transaction([&] {
    RunContext c;
    c.threads = 2;
    c.ceilingsId = store.addCeilings(handMade());
    int64_t run = store.addRun(session, "profile", c);
    store.addProfile(run, store.addBuild(run, BuildRecord{}), faster);
  });
  std::string third = sessionReportHtml(*store.loadSession(session));
  EXPECT_EQ(countIn(third, "//h:div[@class='chart roofline moves']//svg:line[@class='move']"), 1);
  EXPECT_EQ(countIn(third, "//h:h2[starts-with(., 'Roofline: build')]"), 1);
}

}  // namespace
}  // namespace kiln::profiler
