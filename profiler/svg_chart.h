// Small self-contained SVG charts for the HTML reports: line charts (a series per backend over
// batch sizes) and horizontal bar charts (top operators, speedups). Output is well-formed XML
// with inline styling only, so a report is one file that opens anywhere.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kiln::profiler {

struct ChartSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), x ascending
};

struct ChartBar {
  std::string label;
  double value = 0;
  std::string note;  // printed after the value
};

/// x on a log2 axis when logX (batch sizes); y from 0.
std::string lineChartSvg(const std::string& title, const std::string& xLabel, const std::string& yLabel,
                         const std::vector<ChartSeries>& series, bool logX);
/// One horizontal bar per entry, in the given order. `reference` > 0 draws a vertical line there
/// (1.0 on a speedup chart).
std::string barChartSvg(const std::string& title, const std::string& unit, const std::vector<ChartBar>& bars,
                        double reference = 0);

/// Escapes & < > " ' for XML text and attributes.
std::string xmlEscape(const std::string& text);
/// A short number: 3 significant digits, no exponent for ordinary magnitudes.
std::string shortNumber(double v);
/// The i-th color of the fixed palette.
const char* chartColor(size_t i);

}  // namespace kiln::profiler
