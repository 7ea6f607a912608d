// Small self-contained SVG charts for the HTML reports: line charts (a series per backend over
// batch sizes), horizontal bar charts (top operators, speedups) and log-log roofline charts. Output is well-formed XML
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

/// A roofline ceiling: a bandwidth line (GB/s, slope 1 on log-log axes) up to the peak.
struct RooflineCeilingLine {
  std::string name;  // "L1", "DRAM"
  double gbPerSecond = 0;
};

/// One call on a roofline chart.
struct RooflineDot {
  double intensity = 0;  // x: FLOPs per byte (> 0 to be drawn)
  double gflops = 0;     // y: achieved GFLOP/s (> 0 to be drawn)
  double share = 0;      // of the total time, 0..1: the dot's area
  std::string title;     // its tooltip
  std::string key;       // matches a call across two builds (the arrows of a comparison)
  bool memoryBound = true;
};

/// Log-log axes (FLOPs/byte against GFLOP/s) with the peak as a horizontal line, each bandwidth as
/// a line of slope 1 up to its ridge point, and one circle (class "call") per dot with x and y
/// > 0, its area proportional to its share of the time. Axes fit the dots and the ceilings
/// (roofline.h's rooflineAxes). With `previous` (an earlier build of the same model) its dots are
/// drawn grey (class "previous") and an arrow (class "move") leads from each previous dot to the
/// dot with the same key.
std::string rooflineChartSvg(const std::string& title, double peakGflops,
                             const std::vector<RooflineCeilingLine>& bandwidths, const std::vector<RooflineDot>& dots,
                             const std::vector<RooflineDot>& previous = {});

/// Escapes & < > " ' for XML text and attributes.
std::string xmlEscape(const std::string& text);
/// A short number: 3 significant digits, no exponent for ordinary magnitudes.
std::string shortNumber(double v);
/// The i-th color of the fixed palette.
const char* chartColor(size_t i);

}  // namespace kiln::profiler
