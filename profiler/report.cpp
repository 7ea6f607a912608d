#include "profiler/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "profiler/op_profile.h"
#include "profiler/roofline.h"
#include "profiler/svg_chart.h"
#include "profiler/time_evaluator.h"

namespace kiln::profiler {
namespace {

std::string fmt(const char* format, double v) {
  std::string out(static_cast<size_t>(std::snprintf(nullptr, 0, format, v)), '\0');
  std::snprintf(out.data(), out.size() + 1, format, v);
  return out;
}

std::string esc(const std::string& s) { return xmlEscape(s); }

std::string td(const std::string& s, bool numeric = false) {
  return numeric ? "<td class=\"num\">" + esc(s) + "</td>" : "<td>" + esc(s) + "</td>";
}

std::string th(const std::string& s) { return "<th>" + esc(s) + "</th>"; }

const char* kStyle = R"css(
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 1100px; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
td, th { border: 1px solid #ddd; padding: 3px 8px; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f4f4f4; }
.note { color: #666; font-size: 0.9em; }
.bad { color: #b00; }
.warn { color: #b45309; }
tr.disagree td, td.disagree { background: #fff1c7; }
tr.differ td { background: #ffd6d6; }
.spread { color: #666; font-size: 0.9em; }
)css";

/// Times in one format, three significant digits for the largest: "9.40 / 13.1" (ms).
std::string msList(const std::vector<double>& ms, const char* separator = " / ") {
  double top = 0;
  for (double v : ms) top = std::max(top, std::fabs(v));
  const char* format = top >= 100 ? "%.0f" : top >= 10 ? "%.1f" : top >= 1 ? "%.2f" : "%.3g";
  std::string out;
  for (size_t i = 0; i < ms.size(); ++i) out += (i ? separator : "") + fmt(format, ms[i]);
  return out;
}

/// "9.40–13.1" (ms): a spread.
std::string range(double lo, double hi) { return msList({lo, hi}, "–"); }

/// "⚠ processes disagree: 9.40 / 13.1 ms", empty when they agree.
std::string disagreement(const Measurement& m) {
  if (!m.ok() || !m.processesDisagree) return "";
  if (m.processMedianMs.empty()) return "⚠ processes disagree";
  return "⚠ processes disagree: " + msList(m.processMedianMs) + " ms";
}

/// A compare row's note: outputs beyond tolerance of eager's (outputsDiffer), processes that disagree.
std::string compareNote(const Measurement& m) {
  std::string note;
  if (m.ok() && m.outputsDiffer())
    note = fmt("✗ outputs differ from eager's (beyond %.3g): not the same computation", m.outputBound);
  if (std::string d = disagreement(m); !d.empty()) note += (note.empty() ? "" : "; ") + d;
  return note;
}

/// A max |diff| of outputs: NaN (a NaN in an output), ∞ (outputs of another shape), — (not checked).
std::string maxDiffText(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return "∞";
  if (d < 0) return "—";
  return fmt("%.3g", d);
}

/// The measurements of one sweep, by backend then batch.
std::map<std::string, std::map<int64_t, const Measurement*>> sweepGrid(const SessionData& s,
                                                                       int64_t sweepId) {
  std::map<std::string, std::map<int64_t, const Measurement*>> grid;
  for (const auto& m : s.measurements)
    if (m.sweepId == sweepId) grid[m.measurement.backend][m.measurement.batch] = &m.measurement;
  return grid;
}

std::string contextTable(const RunContext& c) {
  std::string h = "<table>\n";
  auto row = [&](const std::string& k, const std::string& v) { h += "<tr>" + th(k) + td(v) + "</tr>\n"; };
  row("CPU", c.cpu);
  row("cores / hardware threads",
      std::to_string(c.physicalCores) + " / " + std::to_string(c.hardwareThreads));
  row("threads used", std::to_string(c.threads));
  row("target", c.target);
  row("opt level", "-O" + std::to_string(c.optLevel));
  row("Kiln", c.kilnVersion);
  row("libtorch", c.torchVersion);
  row("LLVM", c.llvmVersion);
  row("baseline BLAS", c.blas);
  row("tuning records", c.tuningRecords);
  row("compile time", fmt("%.2f s", c.compileSeconds));
  row("date", c.date);
  row("host", c.hostname);
  return h + "</table>\n";
}

std::string sweepSection(const SessionData& s, const StoredSweep& sweep) {
  auto grid = sweepGrid(s, sweep.id);
  std::vector<ChartSeries> latency, throughput;
  for (const auto& backend : sweep.backends) {
    ChartSeries l, t;
    l.name = t.name = backend;
    for (const auto& [batch, m] : grid[backend]) {
      if (!m->ok()) continue;
      double b = static_cast<double>(batch);
      const Spread sp = m->spread();
      l.points.emplace_back(b, sp.medianMs);
      t.points.emplace_back(b, m->throughput());
      l.spread.push_back({sp.q1Ms, sp.q3Ms, sp.minMs, sp.maxMs});
      // Throughput is batch / latency: the slow end of the latency range is its low end.
      auto rate = [&](double ms) { return ms > 0 ? b * 1000.0 / ms : 0.0; };
      t.spread.push_back({rate(sp.q3Ms), rate(sp.q1Ms), rate(sp.maxMs), rate(sp.minMs)});
      std::string flag = m->processesDisagree ? disagreement(*m).substr(std::string("⚠ ").size()) : "";
      l.flags.push_back(flag);
      t.flags.push_back(flag);
    }
    latency.push_back(std::move(l));
    throughput.push_back(std::move(t));
  }
  std::string h = "<h2>Batch sweep (run " + std::to_string(sweep.runId) + ")</h2>\n";
  h += "<div class=\"chart\">" +
       lineChartSvg("Latency vs batch size", "batch size", "median latency (ms)", latency, true) + "</div>\n";
  h += "<div class=\"chart\">" +
       lineChartSvg("Throughput vs batch size", "batch size", "throughput (items/s)", throughput, true) +
       "</div>\n";

  h += "<table class=\"sweep\">\n<tr>" + th("backend");
  for (int64_t b : sweep.batches) h += th("batch " + std::to_string(b));
  h += "</tr>\n";
  for (const auto& backend : sweep.backends) {
    h += "<tr class=\"backend\">" + td(backend);
    for (int64_t b : sweep.batches) {
      auto it = grid[backend].find(b);
      if (it == grid[backend].end()) {
        h += td("—");
        continue;
      }
      const Measurement& m = *it->second;
      if (m.ok()) {
        const Spread sp = m.spread();
        std::string flag = disagreement(m);
        std::string title = m.processMedianMs.size() > 1 ? " title=\"" + esc("per-process medians: " +
                                                                            msList(m.processMedianMs) + " ms") + "\""
                                                        : "";
        h += std::string("<td class=\"num") + (flag.empty() ? "" : " disagree") + "\"" + title + ">" +
             esc(fmt("%.3f ms", sp.medianMs)) + "<br/>" + esc(fmt("%.1f/s", m.throughput())) +
             (m.timing.noisy() ? " <span class=\"bad\">noisy</span>" : "") + "<br/><span class=\"spread\">IQR " +
             esc(range(sp.q1Ms, sp.q3Ms)) + "<br/>min–max " + esc(range(sp.minMs, sp.maxMs)) + "</span>" +
             (flag.empty() ? "" : "<br/><span class=\"warn\">" + esc(flag) + "</span>") + "</td>";
      } else
        h += "<td class=\"bad\" title=\"" + esc(m.reason) + "\">" + esc(statusName(m.status)) + "</td>";
    }
    h += "</tr>\n";
  }
  h += "</table>\n";
  std::string reasons;
  for (const auto& backend : sweep.backends)
    for (const auto& [batch, m] : grid[backend])
      if (!m->ok())
        reasons += "<li>" +
                   esc(backend + " at batch " + std::to_string(batch) + ": " + statusName(m->status) + " — " +
                       m->reason) +
                   "</li>\n";
  if (!reasons.empty()) h += "<ul class=\"note\">\n" + reasons + "</ul>\n";

  // Speedups of Kiln over each baseline, per batch.
  std::vector<ChartBar> bars;
  for (const auto& backend : sweep.backends) {
    if (backend == "kiln") continue;
    for (int64_t b : sweep.batches) {
      auto k = grid["kiln"].find(b);
      auto o = grid[backend].find(b);
      if (k == grid["kiln"].end() || o == grid[backend].end() || !k->second->ok() || !o->second->ok())
        continue;
      bars.push_back({"vs " + backend + " @" + std::to_string(b),
                      o->second->timing.medianMs / k->second->timing.medianMs, ""});
    }
  }
  if (!bars.empty())
    h += "<div class=\"chart\">" + barChartSvg("Kiln speedup (baseline time / Kiln time)", "×", bars, 1.0) +
         "</div>\n";
  return h;
}

std::string compareSection(const SessionData& s) {
  std::string rows;
  for (const auto& run : s.runs) {
    if (run.kind != "compare") continue;
    const Measurement* kiln = nullptr;
    for (const auto& m : s.measurements)
      if (m.runId == run.id && m.measurement.backend == "kiln" && m.measurement.ok()) kiln = &m.measurement;
    for (const auto& sm : s.measurements) {
      if (sm.runId != run.id) continue;
      const Measurement& m = sm.measurement;
      std::string flag = compareNote(m);
      rows += std::string("<tr class=\"backend") + (m.processesDisagree && m.ok() ? " disagree" : "") +
              (m.ok() && m.outputsDiffer() ? " differ" : "") + "\">" +
              td(std::to_string(run.id)) + td(run.createdAt) + td(m.backend) + td(std::to_string(m.batch), true);
      if (m.ok()) {
        const Spread sp = m.spread();
        rows += td(fmt("%.3f", sp.medianMs), true) + td(range(sp.q1Ms, sp.q3Ms), true) +
                td(range(sp.minMs, sp.maxMs), true) + td(fmt("%.1f %%", 100 * m.timing.cv()), true) +
                td(std::to_string(sp.samples), true) + td(msList(sp.processMedianMs), true) +
                td(m.backend == "pytorch-eager" ? "(reference)" : maxDiffText(m.maxAbsDiff), true) +
                td(kiln ? fmt("%.2f×", m.timing.medianMs / kiln->timing.medianMs) : "", true) +
                (flag.empty() ? td("") : "<td class=\"warn\">" + esc(flag) + "</td>");
      } else {
        rows += "<td colspan=\"9\" class=\"bad\">" +
                esc(std::string(statusName(m.status)) + ": " + m.reason) + "</td>";
      }
      rows += "</tr>\n";
    }
  }
  if (rows.empty()) return "";
  return "<h2>Comparisons</h2>\n<table class=\"compare\">\n<tr>" + th("run") + th("date") + th("backend") +
         th("batch") + th("median ms") + th("IQR ms") + th("min–max ms") + th("CV") + th("samples") +
         th("per-process medians ms") + th("max |diff| vs eager") + th("time / Kiln's") + th("note") + "</tr>\n" +
         rows + "</table>\n";
}

/// The profile's calls on the machine's roofline, when its run refers to measured ceilings: the
/// chart (every call with FLOPs) and the top calls' bounds.
std::string rooflineSection(const SessionData& s, const StoredProfile& sp, const std::vector<OpRecord>& top) {
  const MachineCeilings* c = s.ceilingsOfRun(sp.runId);
  if (!c || c->bandwidth.empty()) return "";
  std::vector<RooflinePoint> points = rooflineOf(sp.profile, *c);
  std::string levels;
  for (const auto& b : c->bandwidth) levels += (levels.empty() ? "" : ", ") + b.level + fmt(" %.1f GB/s", b.gbPerSecond);
  std::string h = "<h2>Roofline</h2>\n<p>" + esc(c->cpu) + ", " + std::to_string(c->threads) + " threads: FMA peak " +
                  esc(fmt("%.1f GFLOP/s", c->peakGflops)) + "; " + esc(levels) + " (ceilings measured " +
                  esc(c->measuredAt) + "). A call's bound is min(peak, intensity × the bandwidth of the smallest "
                  "level its bytes fit in); Winograd convolutions count the direct convolution's FLOPs and can exceed "
                  "it.</p>\n";
  h += "<div class=\"chart roofline\">" + rooflineSvg("Roofline: one dot per call, area = share of time", points, *c) +
       "</div>\n";
  h += "<table class=\"roofline\">\n<tr>" + th("#") + th("ops") + th("FLOPs/byte") + th("GFLOP/s") + th("level") +
       th("bound GFLOP/s") + th("% of bound") + th("bound by") + "</tr>\n";
  for (const auto& op : top) {
    RooflinePoint p = rooflinePoint(op, *c);
    h += "<tr>" + td(std::to_string(p.call), true) + td(joinOps(p.ops)) + td(fmt("%.3g", p.intensity), true) +
         td(fmt("%.2f", p.gflops), true) + td(p.level) + td(fmt("%.1f", p.boundGflops), true) +
         td(fmt("%.1f", p.percentOfBound), true) + td(p.memoryBound ? "memory" : "compute") + "</tr>\n";
  }
  return h + "</table>\n";
}

/// Two profiled builds of the session on one roofline: the latest profile against the latest one
/// of another build before it (e.g. untuned then tuned), an arrow per call that moved.
std::string rooflineMovesSection(const SessionData& s, const StoredProfile& after) {
  const StoredProfile* before = nullptr;
  for (auto it = s.profiles.rbegin(); it != s.profiles.rend(); ++it)
    if (it->buildId != after.buildId) {
      before = &*it;
      break;
    }
  if (!before) return "";
  const MachineCeilings* c = s.ceilingsOfRun(after.runId);
  const MachineCeilings* cb = s.ceilingsOfRun(before->runId);
  if (!c || c->bandwidth.empty()) c = cb;
  if (!cb || cb->bandwidth.empty()) cb = c;
  if (!c || c->bandwidth.empty()) return "";
  std::vector<RooflinePoint> a = rooflineOf(before->profile, *cb), b = rooflineOf(after.profile, *c);
  std::string title = "Build " + std::to_string(before->buildId) + " (grey) → build " + std::to_string(after.buildId);
  std::string h = "<h2>Roofline: build " + std::to_string(before->buildId) + " → build " +
                  std::to_string(after.buildId) + "</h2>\n<p>Each call of the earlier build in grey, an arrow to the "
                  "same call (the same output values) in the later one: right means more FLOPs per byte (a fusion "
                  "saved traffic), up means faster.</p>\n";
  return h + "<div class=\"chart roofline moves\">" + rooflineComparisonSvg(title, a, b, *c) + "</div>\n";
}

std::string profileSection(const SessionData& s, const ReportOptions& options) {
  if (s.profiles.empty()) return "";
  const StoredProfile& sp = s.profiles.back();
  const ProfileRecord& p = sp.profile;
  std::vector<OpRecord> ops = p.ops;
  std::stable_sort(ops.begin(), ops.end(),
                   [](const OpRecord& a, const OpRecord& b) { return a.timeUs > b.timeUs; });
  if (static_cast<int>(ops.size()) > options.topN) ops.resize(options.topN);
  std::vector<ChartBar> bars;
  for (const auto& op : ops)
    bars.push_back({op.key + " " + joinOps(op.ops), op.timeUs, fmt("%.1f %%", op.percent)});
  std::string h = "<h2>Per-operator profile (build " + std::to_string(sp.buildId) + ", batch " +
                  std::to_string(p.batch) + ")</h2>\n";
  h += "<p>end-to-end median " + esc(fmt("%.3f ms", p.endToEnd.medianMs)) + " (mean " +
       esc(fmt("%.3f ms", p.endToEnd.meanMs)) + "); " + std::to_string(p.ops.size()) +
       " calls: sum of medians " + esc(fmt("%.3f ms", p.sumMs)) + ", sum of means " +
       esc(fmt("%.3f ms", p.sumMeanMs)) + "; gap of the means " + esc(fmt("%+.1f %%", p.gapPercent())) +
       "</p>\n";
  h += "<div class=\"chart\">" +
       barChartSvg("Top " + std::to_string(ops.size()) + " operators by time", "µs", bars) + "</div>\n";
  h += "<table class=\"ops\">\n<tr>" + th("#") + th("call") + th("ops") + th("time µs") + th("%") +
       th("GFLOP/s") + th("output") + "</tr>\n";
  for (const auto& op : ops)
    h += "<tr>" + td(std::to_string(op.index), true) + td(op.name) + td(joinOps(op.ops)) +
         td(fmt("%.1f", op.timeUs), true) + td(fmt("%.1f", op.percent), true) +
         td(fmt("%.2f", op.gflops()), true) + td(op.outputShape) + "</tr>\n";
  h += "</table>\n";
  return h + rooflineSection(s, sp, ops) + rooflineMovesSection(s, sp);
}

std::string csvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string csvNumber(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

std::string sessionReportHtml(const SessionData& s, const ReportOptions& options) {
  const SessionSummary& sum = s.summary;
  std::string title = "Kiln session " + std::to_string(sum.id) + ": " + sum.model.name;
  std::string h =
      "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n"
      "<meta charset=\"utf-8\"/>\n<title>" +
      esc(title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  h += "<h1>" + esc(title) + "</h1>\n";
  h += "<table class=\"summary\">\n<tr>" + th("model") + td(sum.model.name) + "</tr>\n<tr>" + th("file") +
       td(sum.model.path) + "</tr>\n<tr>" + th("sha256") + td(sum.model.sha256) + "</tr>\n<tr>" +
       th("session") + td(sum.createdAt + " – " + sum.updatedAt) + "</tr>\n<tr>" + th("runs") +
       td(std::to_string(sum.runs) + " (" + std::to_string(sum.builds) + " builds, " +
          std::to_string(sum.measurements) + " measurements, " + std::to_string(sum.profiles) +
          " profiles, " + std::to_string(sum.sweeps) + " sweeps)") +
       "</tr>\n</table>\n";
  if (!s.runs.empty()) h += "<h2>Context (latest run)</h2>\n" + contextTable(s.runs.back().context);
  if (!s.sweeps.empty()) h += sweepSection(s, s.sweeps.back());
  h += compareSection(s);
  h += profileSection(s, options);
  if (!s.builds.empty()) {
    h += "<h2>Builds</h2>\n<table class=\"builds\">\n<tr>" + th("build") + th("target") + th("-O") +
         th("threads") + th("batch") + th("kernels") + th("calls") + th("compile s") + th("tuning") +
         "</tr>\n";
    for (const auto& b : s.builds)
      h += "<tr>" + td(std::to_string(b.id), true) + td(b.build.target) +
           td(std::to_string(b.build.optLevel), true) + td(std::to_string(b.build.threads), true) +
           td(std::to_string(b.build.batch), true) + td(std::to_string(b.build.numKernels), true) +
           td(std::to_string(b.build.numCalls), true) + td(fmt("%.2f", b.build.compileSeconds), true) +
           td(b.build.tuningRecords) + "</tr>\n";
    h += "</table>\n";
  }
  h += "<p class=\"note\">Medians over repeats after warm-up; every backend ran with the same thread count. "
       "IQR: the middle half of the repeats (first to third quartile); min–max: all of them. "
       "<span class=\"warn\">⚠ processes disagree</span>: the medians of the worker processes that measured a "
       "backend differ by more than 10 %, so its time depends on the process (code and memory layout, thread "
       "placement), not only on the code. Generated by Kiln " +
       esc(s.runs.empty() ? "" : s.runs.back().context.kilnVersion) + ".</p>\n";
  return h + "</body>\n</html>\n";
}

const std::vector<std::string>& reportCsvColumns() {
  static const auto* columns = new std::vector<std::string>{"session_id",
                                                            "run_id",
                                                            "run_kind",
                                                            "date",
                                                            "model",
                                                            "sha256",
                                                            "backend",
                                                            "batch",
                                                            "status",
                                                            "reason",
                                                            "median_ms",
                                                            "min_ms",
                                                            "mean_ms",
                                                            "max_ms",
                                                            "q1_ms",
                                                            "q3_ms",
                                                            "stddev_ms",
                                                            "cv",
                                                            "throughput_per_s",
                                                            "samples",
                                                            "number",
                                                            "processes_disagree",
                                                            "process_medians_ms",
                                                            "build_id",
                                                            "threads",
                                                            "target",
                                                            "opt_level",
                                                            "cpu",
                                                            "kiln_version",
                                                            "torch_version",
                                                            "llvm_version",
                                                            "blas"};
  return *columns;
}

std::string sessionReportCsv(const SessionData& s) {
  std::string out;
  const auto& cols = reportCsvColumns();
  for (size_t i = 0; i < cols.size(); ++i) out += (i ? "," : "") + cols[i];
  out += "\n";
  for (const auto& sm : s.measurements) {
    const Measurement& m = sm.measurement;
    const StoredRun* run = s.run(sm.runId);
    RunContext c = run ? run->context : RunContext{};
    std::vector<std::string> f = {std::to_string(s.summary.id),
                                  std::to_string(sm.runId),
                                  run ? run->kind : "",
                                  run ? run->createdAt : "",
                                  s.summary.model.name,
                                  s.summary.model.sha256,
                                  m.backend,
                                  std::to_string(m.batch),
                                  statusName(m.status),
                                  m.reason};
    if (m.ok()) {
      const Spread sp = m.spread();
      const double values[] = {sp.medianMs, sp.minMs,    sp.meanMs,     sp.maxMs,      sp.q1Ms,
                               sp.q3Ms,    sp.stddevMs, m.timing.cv(), m.throughput()};
      for (double v : values) f.push_back(csvNumber(v));
    } else {
      for (int i = 0; i < 9; ++i) f.push_back("");
    }
    f.push_back(std::to_string(m.timing.samplesMs.size()));
    f.push_back(std::to_string(m.timing.number));
    f.push_back(m.ok() ? (m.processesDisagree ? "1" : "0") : "");
    std::string medians;  // ';'-separated: one field, no quoting
    for (double v : m.processMedianMs) medians += (medians.empty() ? "" : ";") + csvNumber(v);
    f.push_back(medians);
    f.push_back(sm.buildId ? std::to_string(sm.buildId) : "");
    f.push_back(std::to_string(c.threads));
    f.push_back(c.target);
    f.push_back(std::to_string(c.optLevel));
    f.push_back(c.cpu);
    f.push_back(c.kilnVersion);
    f.push_back(c.torchVersion);
    f.push_back(c.llvmVersion);
    f.push_back(c.blas);
    for (size_t i = 0; i < f.size(); ++i) out += (i ? "," : "") + csvField(f[i]);
    out += "\n";
  }
  return out;
}

}  // namespace kiln::profiler
