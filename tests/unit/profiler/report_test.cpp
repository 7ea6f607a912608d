// Golden structure of the exports: Chrome trace JSON (one "X" event per call), the session
// report as XHTML (parses as XML; SVG charts; a row per backend) and CSV (fixed header).
#include <gtest/gtest.h>
#include <libxml/parser.h>
#include <libxml/xpath.h>
#include <libxml/xpathInternals.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "profiler/op_profile.h"
#include "profiler/report.h"
#include "profiler/sha256.h"
#include "profiler/store.h"

namespace kiln::profiler {
namespace {

namespace fs = std::filesystem;

ProfileRecord syntheticProfile(int calls) {
  ProfileRecord p;
  p.repeat = 5;
  p.endToEnd = timingFromSamples({10, 10.5, 11});
  double start = 0;
  for (int i = 0; i < calls; ++i) {
    OpRecord op;
    op.index = i;
    op.name = "%v" + std::to_string(i) + " = @fused_conv2d_relu_" + std::to_string(i) + " <&>";
    op.key = "v" + std::to_string(i);
    op.kernel = "fused_conv2d_relu_" + std::to_string(i);
    op.ops = {"conv2d", "relu"};
    op.timeUs = 100.0 + 10 * i;
    op.startUs = start;
    op.durationUs = op.timeUs;
    op.flops = 2e6;
    start += op.timeUs + 1;
    p.sumMs += op.timeUs / 1000;
    p.ops.push_back(op);
  }
  for (auto& op : p.ops) op.percent = 100 * op.timeUs / (p.sumMs * 1000);
  return p;
}

TEST(ChromeTrace, OneCompleteEventPerCall) {
  ProfileRecord p = syntheticProfile(7);
  nlohmann::json trace = nlohmann::json::parse(chromeTraceJson(p, "kiln resnet18"));
  ASSERT_TRUE(trace.contains("traceEvents"));
  int complete = 0;
  double lastTs = -1;
  for (const auto& e : trace["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph"));
    if (e["ph"] != "X") continue;
    ++complete;
    EXPECT_TRUE(e["name"].is_string());
    EXPECT_GE(e["ts"].get<double>(), lastTs);  // in execution order
    lastTs = e["ts"].get<double>();
    EXPECT_GT(e["dur"].get<double>(), 0);
    EXPECT_EQ(e["pid"], 1);
    EXPECT_EQ(e["args"]["ops"], "conv2d+relu");
  }
  EXPECT_EQ(complete, 7);
}

TEST(ProfileJson, GroupsByOperator) {
  ProfileRecord p = syntheticProfile(3);
  p.ops[1].ops = {"dense"};
  auto groups = groupByOperator(p.ops);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].name, "conv2d");
  EXPECT_EQ(groups[0].calls, 2);
  EXPECT_DOUBLE_EQ(groups[0].timeUs, 100 + 120);
  nlohmann::json j = nlohmann::json::parse(profileJson(p));
  EXPECT_EQ(j["calls"].size(), 3u);
  EXPECT_NEAR(j["gap_percent"].get<double>(), p.gapPercent(), 1e-9);
}

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    m_dir = fs::temp_directory_path() / ("kiln_report_test_" + std::to_string(rd()));
    fs::create_directories(m_dir);
    Store store((m_dir / "kiln.db").string());
    m_session = store.transaction([&] {
      int64_t model = store.addModel(sha256Hex("x"), "resnet18 & co", "/models/resnet18.pt", 1);
      int64_t session = store.sessionFor(model, 0);
      RunContext c;
      c.cpu = "Test CPU";
      c.threads = 2;
      c.target = "llvm";
      int64_t run = store.addRun(session, "sweep", c);
      std::vector<int64_t> batches{1, 4, 16};
      std::vector<std::string> backends{"kiln", "pytorch-eager", "torchscript-optimized", "torch-compile"};
      int64_t sweep = store.addSweep(run, batches, backends, 60);
      for (const auto& backend : backends) {
        for (int64_t b : batches) {
          Measurement m;
          m.backend = backend;
          m.batch = b;
          if (backend == "torch-compile") {
            m.status = Status::Unavailable;
            m.reason = "torch.compile needs torch >= 2.0, found 1.13.1 at /usr/bin/python3";
          } else if (backend == "pytorch-eager" && b == 16) {
            m.status = Status::OutOfMemory;
            m.reason = "out of memory";
          } else {
            double ms = (backend == "kiln" ? 1.0 : 1.5) * static_cast<double>(b);
            m.timing = timingFromSamples({ms, ms * 1.01, ms * 0.99});
          }
          if (backend == "kiln" && b == 4) {  // its two worker processes disagree
            m.processMedianMs = {9.4, 13.1};
            m.processesDisagree = true;
          }
          store.addMeasurement(run, 0, sweep, m);
        }
      }
      int64_t prun = store.addRun(session, "profile", c);
      BuildRecord br;
      br.target = "llvm";
      int64_t build = store.addBuild(prun, br);
      store.addProfile(prun, build, syntheticProfile(20));
      return session;
    });
  }
  void TearDown() override { fs::remove_all(m_dir); }
  SessionData load() {
    Store store((m_dir / "kiln.db").string());
    return *store.loadSession(m_session);
  }
  fs::path m_dir;
  int64_t m_session = 0;
};

int countXPath(xmlDocPtr doc, const char* expr) {
  xmlXPathContextPtr ctx = xmlXPathNewContext(doc);
  xmlXPathRegisterNs(ctx, BAD_CAST "h", BAD_CAST "http://www.w3.org/1999/xhtml");
  xmlXPathRegisterNs(ctx, BAD_CAST "svg", BAD_CAST "http://www.w3.org/2000/svg");
  xmlXPathObjectPtr r = xmlXPathEvalExpression(BAD_CAST expr, ctx);
  int n = r && r->nodesetval ? r->nodesetval->nodeNr : -1;
  xmlXPathFreeObject(r);
  xmlXPathFreeContext(ctx);
  return n;
}

TEST_F(ReportTest, HtmlParsesAsXmlWithChartsAndARowPerBackend) {
  std::string html = sessionReportHtml(load(), ReportOptions{10});
  xmlDocPtr doc = xmlReadMemory(html.data(), static_cast<int>(html.size()), "report.html", "UTF-8",
                                XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
  ASSERT_NE(doc, nullptr) << "the report is not well-formed XML";
  EXPECT_GE(countXPath(doc, "//svg:svg"), 4);  // latency, throughput, speedups, top operators
  EXPECT_EQ(countXPath(doc, "//h:table[@class='sweep']/h:tr[@class='backend']"), 4);
  // latency and throughput: one polyline per backend with numbers (torch-compile has none)
  EXPECT_EQ(countXPath(doc, "//svg:polyline[@class='series']"), 2 * 3);
  EXPECT_EQ(countXPath(doc, "//svg:rect[@class='bar']"), 10 + 2 * 3 - 1);  // top-10 ops + speedups
  EXPECT_EQ(countXPath(doc, "//h:table[@class='ops']/h:tr"), 1 + 10);
  xmlFreeDoc(doc);
  EXPECT_NE(html.find("out-of-memory"), std::string::npos);
  EXPECT_NE(html.find("found 1.13.1"), std::string::npos);
  EXPECT_NE(html.find("resnet18 &amp; co"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);  // self-contained, static
}

// The spread and the processes' disagreement reach the sweep's charts and table.
TEST_F(ReportTest, SweepShowsTheSpreadAndFlagsDisagreeingProcesses) {
  std::string html = sessionReportHtml(load());
  xmlDocPtr doc = xmlReadMemory(html.data(), static_cast<int>(html.size()), "report.html", "UTF-8",
                                XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
  ASSERT_NE(doc, nullptr) << "the report is not well-formed XML";
  // an error bar per point with numbers, in the latency and the throughput chart
  EXPECT_EQ(countXPath(doc, "//svg:g[@class='spread']"), 2 * (3 + 2 + 3));
  EXPECT_EQ(countXPath(doc, "//svg:circle[@class='flag']"), 2);  // kiln at batch 4, both charts
  EXPECT_EQ(countXPath(doc, "//h:table[@class='sweep']//h:td[contains(@class, 'disagree')]"), 1);
  EXPECT_EQ(countXPath(doc, "//h:table[@class='sweep']//h:span[@class='warn']"), 1);
  xmlFreeDoc(doc);
  EXPECT_NE(html.find("⚠ processes disagree: 9.4 / 13.1 ms"), std::string::npos);
  EXPECT_NE(html.find("per-process medians: 9.4 / 13.1 ms"), std::string::npos);
  EXPECT_NE(html.find("IQR 3.98–4.02"), std::string::npos);  // kiln at batch 4: 3.96, 4, 4.04
  EXPECT_NE(html.find("min–max 3.96–4.04"), std::string::npos);
}

// A comparison: spread columns, the processes' medians, a flagged row, a NaN difference shown as
// NaN (not 0) and a timed-out backend with its reason.
TEST_F(ReportTest, CompareShowsSpreadFlagsNaNAndFailures) {
  {
    Store store((m_dir / "kiln.db").string());
    store.transaction([&] {
      RunContext c;
      c.threads = 2;
      int64_t run = store.addRun(m_session, "compare", c);
      auto add = [&](const std::string& backend, std::vector<double> samples, double diff) {
        Measurement m;
        m.backend = backend;
        m.batch = 1;
        m.timing = timingFromSamples(std::move(samples));
        m.maxAbsDiff = diff;
        return m;
      };
      Measurement eager = add("pytorch-eager", {10, 11, 12, 13, 30}, 0);
      eager.processMedianMs = {11, 12};
      store.addMeasurement(run, 0, 0, eager);
      Measurement kiln = add("kiln", {5, 6, 7, 8, 9}, NAN);
      kiln.processMedianMs = {5.5, 8.5};
      kiln.processesDisagree = true;
      store.addMeasurement(run, 0, 0, kiln);
      Measurement ort = add("onnxruntime", {4, 4, 4, 4, 4}, 0.5);
      ort.outputBound = 1e-3;
      store.addMeasurement(run, 0, 0, ort);
      Measurement compiled;
      compiled.backend = "torch-compile";
      compiled.status = Status::Timeout;
      compiled.reason = "timed out after 30 s";
      store.addMeasurement(run, 0, 0, compiled);
      return run;
    });
  }
  SessionData session = load();
  std::string html = sessionReportHtml(session);
  xmlDocPtr doc = xmlReadMemory(html.data(), static_cast<int>(html.size()), "report.html", "UTF-8",
                                XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
  ASSERT_NE(doc, nullptr) << "the report is not well-formed XML";
  EXPECT_EQ(countXPath(doc, "//h:table[@class='compare']/h:tr[contains(@class, 'backend')]"), 4);
  EXPECT_EQ(countXPath(doc, "//h:table[@class='compare']/h:tr[@class='backend disagree']"), 1);
  EXPECT_EQ(countXPath(doc, "//h:table[@class='compare']/h:tr/h:td[@class='warn']"), 2);
  EXPECT_EQ(countXPath(doc, "//h:table[@class='compare']//h:th[.='IQR ms']"), 1);
  xmlFreeDoc(doc);
  EXPECT_NE(html.find("⚠ processes disagree: 5.50 / 8.50 ms"), std::string::npos);
  // Outputs beyond their bound: the note, whole (it outgrew a fixed buffer once).
  EXPECT_NE(html.find("✗ outputs differ from eager&#39;s (beyond 0.001): not the same computation"), std::string::npos)
      << html;
  EXPECT_NE(html.find("<td class=\"num\">NaN</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">11.0 / 12.0</td>"), std::string::npos);  // eager's processes
  EXPECT_NE(html.find("<td class=\"num\">11.0–13.0</td>"), std::string::npos);    // eager's IQR
  EXPECT_NE(html.find("<td class=\"num\">10.0–30.0</td>"), std::string::npos);    // and min–max
  EXPECT_NE(html.find("timeout: timed out after 30 s"), std::string::npos);

  std::string csv = sessionReportCsv(session);
  std::istringstream in(csv);
  std::string header, line;
  std::getline(in, header);
  std::map<std::string, size_t> column;
  {
    std::istringstream h(header);
    std::string name;
    for (size_t i = 0; std::getline(h, name, ','); ++i) column[name] = i;
  }
  for (const char* c : {"q1_ms", "q3_ms", "processes_disagree", "process_medians_ms"})
    ASSERT_TRUE(column.count(c)) << c;
  int flagged = 0, checked = 0;
  while (std::getline(in, line)) {
    if (line.find('"') != std::string::npos) continue;  // a quoted reason (a comma in it): not these rows
    std::vector<std::string> f;
    std::istringstream l(line);
    for (std::string v; std::getline(l, v, ',');) f.push_back(v);
    if (line.back() == ',') f.push_back("");
    ASSERT_EQ(f.size(), reportCsvColumns().size()) << line;
    if (f[column["run_kind"]] != "compare" || f[column["backend"]] != "kiln") continue;
    ++checked;
    EXPECT_EQ(f[column["q1_ms"]], "6");
    EXPECT_EQ(f[column["q3_ms"]], "8");
    EXPECT_EQ(f[column["process_medians_ms"]], "5.5;8.5");
    flagged += f[column["processes_disagree"]] == "1";
  }
  EXPECT_EQ(checked, 1);
  EXPECT_EQ(flagged, 1);
}

TEST_F(ReportTest, CsvHasTheFixedColumnsAndARowPerMeasurement) {
  std::string csv = sessionReportCsv(load());
  std::istringstream in(csv);
  std::string header;
  std::getline(in, header);
  std::string expected;
  for (const auto& c : reportCsvColumns()) expected += (expected.empty() ? "" : ",") + c;
  EXPECT_EQ(header, expected);
  for (const char* col : {"backend", "batch", "status", "median_ms", "q1_ms", "q3_ms", "throughput_per_s",
                          "processes_disagree", "process_medians_ms", "threads", "target"})
    EXPECT_NE(header.find(col), std::string::npos) << col;
  int rows = 0;
  std::string line;
  while (std::getline(in, line)) ++rows;
  EXPECT_EQ(rows, 4 * 3);
  EXPECT_NE(csv.find(",resnet18 & co,"), std::string::npos);  // no quoting needed for '&'
}

}  // namespace
}  // namespace kiln::profiler
