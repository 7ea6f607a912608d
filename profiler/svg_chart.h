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
  /// Optional, one per point: the spread drawn as an error bar (a thick inner range, e.g. the
  /// IQR, inside a thin outer one, e.g. min–max). Empty: no error bars.
  struct Spread {
    double innerLo = 0, innerHi = 0, outerLo = 0, outerHi = 0;
  };
  std::vector<Spread> spread;
  /// Optional, one per point: a non-empty text rings the point as doubtful, the text its title.
  std::vector<std::string> flags;
  std::string flagLegend = "processes disagree";  // what a ring means, under the legend
};

struct ChartBar {
  std::string label;
  double value = 0;
  std::string note;  // printed after the value
};

/// x on a log2 axis when logX (batch sizes); y from 0. Error bars (class "spread") and rings
/// around flagged points (class "flag") when the series carry them; the y axis fits the error bars.
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
