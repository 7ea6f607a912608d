// Reports over one stored session (profiler/store.h): a self-contained HTML page with inline SVG
// charts (latency and throughput vs batch size per backend with IQR and min–max error bars,
// speedups, top-N operators) and a CSV of every measurement with fixed columns. Both are views over
// the same records, and both show the noise: quartiles, min–max, each worker process's median and
// a flag where those medians disagree (Measurement::processesDisagree).
#pragma once

#include <string>
#include <vector>

#include "profiler/store.h"

namespace kiln::profiler {

struct ReportOptions {
  int topN = 15;  // operators in the profile chart and table
};

/// XHTML (parses as XML): summary, context, sweep charts and table (a row per backend; each cell
/// with its IQR and min–max, "⚠ processes disagree: a / b ms" where they do), speedups,
/// comparisons (median, IQR, min–max, per-process medians, max |diff| with NaN as "NaN", a flagged
/// row `class="backend disagree"`), the latest profile's top operators.
std::string sessionReportHtml(const SessionData& session, const ReportOptions& options = {});

/// The CSV header columns, in order.
const std::vector<std::string>& reportCsvColumns();
/// One row per measurement (RFC 4180 quoting). q1_ms/q3_ms are the quartiles of the samples;
/// processes_disagree is 1 or 0; process_medians_ms lists the workers' medians, ';'-separated.
std::string sessionReportCsv(const SessionData& session);

}  // namespace kiln::profiler
