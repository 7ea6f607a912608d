// Reports over one stored session (profiler/store.h): a self-contained HTML page with inline SVG
// charts (latency and throughput vs batch size per backend, speedups, top-N operators) and a CSV
// of every measurement with fixed columns. Both are views over the same records.
#pragma once

#include <string>
#include <vector>

#include "profiler/store.h"

namespace kiln::profiler {

struct ReportOptions {
  int topN = 15;  // operators in the profile chart and table
};

/// XHTML (parses as XML): summary, context, sweep charts and table (a row per backend), speedups,
/// comparisons, the latest profile's top operators.
std::string sessionReportHtml(const SessionData& session, const ReportOptions& options = {});

/// The CSV header columns, in order.
const std::vector<std::string>& reportCsvColumns();
/// One row per measurement (RFC 4180 quoting).
std::string sessionReportCsv(const SessionData& session);

}  // namespace kiln::profiler
