#include "profiler/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "profiler/roofline.h"

namespace kiln::profiler {
namespace {

constexpr double kWidth = 640, kHeight = 360;
constexpr double kLeft = 70, kRight = 150, kTop = 40, kBottom = 50;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

/// A "nice" upper bound and tick step for [0, max].
std::pair<double, double> niceScale(double max) {
  if (!(max > 0) || !std::isfinite(max)) return {1, 0.25};
  double raw = max / 5;
  double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * mag;
    if (raw <= step) break;
  }
  return {std::ceil(max / step) * step, step};
}

std::string text(double x, double y, const std::string& s, const std::string& extra = "") {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\"" + extra + ">" + xmlEscape(s) + "</text>\n";
}

std::string line(double x1, double y1, double x2, double y2, const std::string& style) {
  return "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" + num(y2) +
         "\" " + style + "/>\n";
}

std::string svgOpen(double w, double h, const std::string& title) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(w) + "\" height=\"" + num(h) +
         "\" viewBox=\"0 0 " + num(w) + " " + num(h) + "\" font-family=\"sans-serif\" font-size=\"11\">\n" +
         "<title>" + xmlEscape(title) + "</title>\n" + "<rect x=\"0\" y=\"0\" width=\"" + num(w) +
         "\" height=\"" + num(h) + "\" fill=\"#ffffff\"/>\n" +
         text(w / 2, 20, title, " text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\"");
}

}  // namespace

const char* chartColor(size_t i) {
  static const char* colors[] = {"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e",
                                 "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
  return colors[i % 8];
}

std::string xmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        // Control characters are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t')
          out += ' ';
        else
          out += c;
    }
  }
  return out;
}

std::string shortNumber(double v) {
  char buf[32];
  // Whole numbers (batch sizes, round ticks) print without a fraction: "16", not "16.0".
  if (std::fabs(v) < 1e6 && v == std::round(v)) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  if (v != 0 && (std::fabs(v) >= 1e6 || std::fabs(v) < 1e-3))
    std::snprintf(buf, sizeof buf, "%.2e", v);
  else if (std::fabs(v) >= 100)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else if (std::fabs(v) >= 10)
    std::snprintf(buf, sizeof buf, "%.1f", v);
  else
    std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string lineChartSvg(const std::string& title, const std::string& xLabel, const std::string& yLabel,
                         const std::vector<ChartSeries>& series, bool logX) {
  std::string svg = svgOpen(kWidth, kHeight, title);
  double xMin = INFINITY, xMax = -INFINITY, yMax = 0;
  for (const auto& s : series) {
    for (auto [x, y] : s.points) {
      double tx = logX ? std::log2(std::max(x, 1e-9)) : x;
      xMin = std::min(xMin, tx);
      xMax = std::max(xMax, tx);
      yMax = std::max(yMax, y);
    }
    // One wild outlier must not squash the chart: the axis fits the outer ranges up to 2.5× their
    // point (longer ones are cut at the top); the tables keep the numbers.
    for (size_t k = 0; k < s.spread.size() && k < s.points.size(); ++k) {
      const auto& e = s.spread[k];
      double y = s.points[k].second;
      if (std::isfinite(e.innerHi)) yMax = std::max(yMax, std::min(e.innerHi, 2.5 * y));
      if (std::isfinite(e.outerHi)) yMax = std::max(yMax, std::min(e.outerHi, 2.5 * y));
    }
  }
  double plotW = kWidth - kLeft - kRight, plotH = kHeight - kTop - kBottom;
  if (!std::isfinite(xMin)) {
    svg += text(kWidth / 2, kHeight / 2, "no data", " text-anchor=\"middle\"");
    return svg + "</svg>\n";
  }
  if (xMax == xMin) {
    xMin -= 1;
    xMax += 1;
  }
  auto [yTop, yStep] = niceScale(yMax);
  auto px = [&](double x) {
    return kLeft + ((logX ? std::log2(std::max(x, 1e-9)) : x) - xMin) / (xMax - xMin) * plotW;
  };
  auto py = [&](double y) { return kTop + plotH - y / yTop * plotH; };

  // Axes, grid and ticks.
  for (double y = 0; y <= yTop + yStep / 2; y += yStep) {
    svg += line(kLeft, py(y), kLeft + plotW, py(y), "stroke=\"#e0e0e0\"");
    svg += text(kLeft - 6, py(y) + 4, shortNumber(y), " text-anchor=\"end\"");
  }
  std::vector<double> xs;
  for (const auto& s : series)
    for (auto [x, y] : s.points) xs.push_back(x);
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  for (double x : xs) {
    svg += line(px(x), kTop + plotH, px(x), kTop + plotH + 4, "stroke=\"#333333\"");
    svg += text(px(x), kTop + plotH + 16, shortNumber(x), " text-anchor=\"middle\"");
  }
  svg += line(kLeft, kTop + plotH, kLeft + plotW, kTop + plotH, "stroke=\"#333333\"");
  svg += line(kLeft, kTop, kLeft, kTop + plotH, "stroke=\"#333333\"");
  svg += text(kLeft + plotW / 2, kHeight - 12, xLabel, " text-anchor=\"middle\"");
  svg += text(16, kTop + plotH / 2, yLabel,
              " text-anchor=\"middle\" transform=\"rotate(-90 16 " + num(kTop + plotH / 2) + ")\"");

  // Series and legend.
  for (size_t i = 0; i < series.size(); ++i) {
    const auto& s = series[i];
    std::string color = chartColor(i);
    // Error bars first, under the line: thin outer range with caps, thick inner range.
    for (size_t k = 0; k < s.spread.size() && k < s.points.size(); ++k) {
      const auto& e = s.spread[k];
      double x = px(s.points[k].first);
      auto cy = [&](double v) { return py(std::clamp(std::isfinite(v) ? v : yTop, 0.0, yTop)); };
      std::string tip = s.name + " at " + shortNumber(s.points[k].first) + ": " + shortNumber(e.innerLo) + "–" +
                        shortNumber(e.innerHi) + " (IQR), " + shortNumber(e.outerLo) + "–" + shortNumber(e.outerHi) +
                        " (min–max)";
      svg += "<g class=\"spread\" stroke=\"" + color + "\" stroke-opacity=\"0.55\"><title>" + xmlEscape(tip) +
             "</title>\n";
      svg += line(x, cy(e.outerLo), x, cy(e.outerHi), "stroke-width=\"1\"");
      svg += line(x - 3, cy(e.outerLo), x + 3, cy(e.outerLo), "stroke-width=\"1\"");
      if (e.outerHi <= yTop) svg += line(x - 3, cy(e.outerHi), x + 3, cy(e.outerHi), "stroke-width=\"1\"");
      svg += line(x, cy(e.innerLo), x, cy(e.innerHi), "stroke-width=\"5\"");
      svg += "</g>\n";
    }
    if (!s.points.empty()) {
      std::string pts;
      for (auto [x, y] : s.points) pts += num(px(x)) + "," + num(py(y)) + " ";
      svg += "<polyline class=\"series\" fill=\"none\" stroke=\"" + color +
             "\" stroke-width=\"2\" points=\"" + pts + "\"/>\n";
      for (auto [x, y] : s.points)
        svg += "<circle cx=\"" + num(px(x)) + "\" cy=\"" + num(py(y)) + "\" r=\"3\" fill=\"" + color +
               "\"><title>" + xmlEscape(s.name + ": " + shortNumber(y) + " at " + shortNumber(x)) +
               "</title></circle>\n";
      for (size_t k = 0; k < s.flags.size() && k < s.points.size(); ++k) {
        if (s.flags[k].empty()) continue;
        auto [x, y] = s.points[k];
        svg += "<circle class=\"flag\" cx=\"" + num(px(x)) + "\" cy=\"" + num(py(y)) +
               "\" r=\"8\" fill=\"none\" stroke=\"#b45309\" stroke-width=\"2\"><title>" +
               xmlEscape("⚠ " + s.name + " at " + shortNumber(x) + ": " + s.flags[k]) + "</title></circle>\n";
      }
    }
    double ly = kTop + 10 + 18 * static_cast<double>(i);
    svg += line(kWidth - kRight + 10, ly, kWidth - kRight + 30, ly,
                "stroke=\"" + color + "\" stroke-width=\"2\"");
    svg += text(kWidth - kRight + 35, ly + 4, s.name);
  }
  // What the error bars and rings mean, under the legend.
  bool anySpread = false;
  const ChartSeries* flagged = nullptr;
  for (const auto& s : series) {
    anySpread = anySpread || !s.spread.empty();
    bool any = std::any_of(s.flags.begin(), s.flags.end(), [](const std::string& f) { return !f.empty(); });
    if (any && !flagged) flagged = &s;
  }
  double ny = kTop + 10 + 18 * static_cast<double>(series.size()) + 8;
  if (anySpread) {
    svg += text(kWidth - kRight + 10, ny, "error bars: IQR (thick),", " fill=\"#666666\" font-size=\"10\"");
    svg += text(kWidth - kRight + 10, ny + 13, "min–max (thin)", " fill=\"#666666\" font-size=\"10\"");
    ny += 32;
  }
  if (flagged) {
    svg += "<circle cx=\"" + num(kWidth - kRight + 18) + "\" cy=\"" + num(ny - 4) +
           "\" r=\"6\" fill=\"none\" stroke=\"#b45309\" stroke-width=\"2\"/>\n";
    svg += text(kWidth - kRight + 30, ny, "⚠ " + flagged->flagLegend, " fill=\"#b45309\" font-size=\"10\"");
  }
  return svg + "</svg>\n";
}

std::string barChartSvg(const std::string& title, const std::string& unit, const std::vector<ChartBar>& bars,
                        double reference) {
  const double rowH = 20, left = 230, right = 110, top = 36;
  double height = top + rowH * static_cast<double>(std::max<size_t>(bars.size(), 1)) + 30;
  std::string svg = svgOpen(kWidth + 120, height, title);
  double max = reference;
  for (const auto& b : bars) max = std::max(max, b.value);
  auto [xTop, step] = niceScale(max);
  double plotW = kWidth + 120 - left - right;
  auto px = [&](double v) { return left + v / xTop * plotW; };
  for (size_t i = 0; i < bars.size(); ++i) {
    const auto& b = bars[i];
    double y = top + rowH * static_cast<double>(i);
    std::string label = b.label.size() > 36 ? b.label.substr(0, 35) + "…" : b.label;
    svg += text(left - 6, y + 14, label, " text-anchor=\"end\"");
    svg += "<rect class=\"bar\" x=\"" + num(left) + "\" y=\"" + num(y + 3) + "\" width=\"" +
           num(std::max(0.5, px(b.value) - left)) + "\" height=\"" + num(rowH - 6) + "\" fill=\"" +
           chartColor(1) + "\"><title>" + xmlEscape(b.label + ": " + shortNumber(b.value) + " " + unit) +
           "</title></rect>\n";
    svg += text(px(b.value) + 4, y + 14,
                shortNumber(b.value) + " " + unit + (b.note.empty() ? "" : "  " + b.note));
  }
  double axisY = top + rowH * static_cast<double>(std::max<size_t>(bars.size(), 1));
  svg += line(left, axisY, left + plotW, axisY, "stroke=\"#333333\"");
  for (double v = 0; v <= xTop + step / 2; v += step)
    svg += text(px(v), axisY + 14, shortNumber(v), " text-anchor=\"middle\"");
  if (reference > 0)
    svg += line(px(reference), top, px(reference), axisY, "stroke=\"#555555\" stroke-dasharray=\"4 3\"");
  return svg + "</svg>\n";
}


std::string rooflineChartSvg(const std::string& title, double peakGflops,
                             const std::vector<RooflineCeilingLine>& bandwidths, const std::vector<RooflineDot>& dots,
                             const std::vector<RooflineDot>& previous) {
  const double width = kWidth + 110, height = kHeight + 60, right = 150;
  // Ceiling colours apart from the dots' (teal memory-bound, orange compute-bound) and the peak's red.
  static const char* lineColors[] = {"#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#7f7f7f"};
  auto lineColor = [](size_t i) { return std::string(lineColors[i % 5]); };
  std::string svg = svgOpen(width, height, title);
  double plotW = width - kLeft - right, plotH = height - kTop - kBottom;
  std::vector<std::pair<double, double>> xy;
  for (const auto* set : {&dots, &previous})
    for (const auto& d : *set) xy.emplace_back(d.intensity, d.gflops);
  std::vector<double> gbs;
  for (const auto& b : bandwidths) gbs.push_back(b.gbPerSecond);
  RooflineAxes axes = rooflineAxes(xy, peakGflops, gbs);
  if (!axes.fitted) {
    svg += text(width / 2, height / 2, "no calls with FLOPs to place", " text-anchor=\"middle\"");
    return svg + "</svg>\n";
  }
  double x0 = axes.x0, x1 = axes.x1, y0 = axes.y0, y1 = axes.y1;
  auto px = [&](double x) { return kLeft + (std::log10(x) - x0) / (x1 - x0) * plotW; };
  auto py = [&](double y) { return kTop + plotH - (std::log10(y) - y0) / (y1 - y0) * plotH; };

  for (double e = x0; e <= x1 + 1e-9; e += 1) {
    double x = std::pow(10, e);
    svg += line(px(x), kTop, px(x), kTop + plotH, "stroke=\"#e0e0e0\"");
    svg += text(px(x), kTop + plotH + 16, shortNumber(x), " text-anchor=\"middle\"");
  }
  for (double e = y0; e <= y1 + 1e-9; e += 1) {
    double y = std::pow(10, e);
    svg += line(kLeft, py(y), kLeft + plotW, py(y), "stroke=\"#e0e0e0\"");
    svg += text(kLeft - 6, py(y) + 4, shortNumber(y), " text-anchor=\"end\"");
  }
  svg += line(kLeft, kTop + plotH, kLeft + plotW, kTop + plotH, "stroke=\"#333333\"");
  svg += line(kLeft, kTop, kLeft, kTop + plotH, "stroke=\"#333333\"");
  svg += text(kLeft + plotW / 2, height - 12, "arithmetic intensity (FLOPs / byte moved)", " text-anchor=\"middle\"");
  svg += text(16, kTop + plotH / 2, "GFLOP/s",
              " text-anchor=\"middle\" transform=\"rotate(-90 16 " + num(kTop + plotH / 2) + ")\"");

  // Ceilings, clipped to the plot: each bandwidth rises with slope 1 until it meets the peak.
  svg += "<clipPath id=\"roofline-plot\"><rect x=\"" + num(kLeft) + "\" y=\"" + num(kTop) + "\" width=\"" +
         num(plotW) + "\" height=\"" + num(plotH) + "\"/></clipPath>\n<g clip-path=\"url(#roofline-plot)\">\n";
  double xMin = std::pow(10, x0), xMax = std::pow(10, x1);
  for (size_t i = 0; i < bandwidths.size(); ++i) {
    const auto& b = bandwidths[i];
    if (!(b.gbPerSecond > 0)) continue;
    double ridge = peakGflops > 0 ? peakGflops / b.gbPerSecond : xMax;
    svg += "<line class=\"ceiling\" x1=\"" + num(px(xMin)) + "\" y1=\"" + num(py(xMin * b.gbPerSecond)) + "\" x2=\"" +
           num(px(std::min(ridge, xMax))) + "\" y2=\"" + num(py(std::min(ridge, xMax) * b.gbPerSecond)) +
           "\" stroke=\"" + lineColor(i) + "\" stroke-width=\"2\"><title>" +
           xmlEscape(b.name + ": " + shortNumber(b.gbPerSecond) + " GB/s") + "</title></line>\n";
  }
  if (peakGflops > 0)
    svg += "<line class=\"ceiling\" x1=\"" + num(kLeft) + "\" y1=\"" + num(py(peakGflops)) + "\" x2=\"" +
           num(kLeft + plotW) + "\" y2=\"" + num(py(peakGflops)) + "\" stroke=\"#d62728\" stroke-width=\"2\"><title>" +
           xmlEscape("FMA peak: " + shortNumber(peakGflops) + " GFLOP/s") + "</title></line>\n";
  svg += "</g>\n";

  auto placeable = [](const RooflineDot& d) {
    return d.intensity > 0 && d.gflops > 0 && std::isfinite(d.intensity) && std::isfinite(d.gflops);
  };
  auto radius = [](const RooflineDot& d) { return 3 + 17 * std::sqrt(std::clamp(d.share, 0.0, 1.0)); };
  // The earlier build: grey dots, and an arrow from each to the same call's new dot.
  int arrows = 0;
  if (!previous.empty()) {
    svg += "<defs><marker id=\"roofline-arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" "
           "markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#555555\"/>"
           "</marker></defs>\n";
    std::map<std::string, const RooflineDot*> now;
    for (const auto& d : dots)
      if (placeable(d) && !d.key.empty()) now.emplace(d.key, &d);
    for (const auto& d : previous) {
      if (!placeable(d)) continue;
      svg += "<circle class=\"previous\" cx=\"" + num(px(d.intensity)) + "\" cy=\"" + num(py(d.gflops)) + "\" r=\"" +
             num(radius(d)) + "\" fill=\"#bbbbbb\" fill-opacity=\"0.5\" stroke=\"#888888\" stroke-width=\"0.5\"><title>" +
             xmlEscape("before: " + d.title) + "</title></circle>\n";
      auto to = now.find(d.key);
      if (to == now.end()) continue;
      double ax = px(d.intensity), ay = py(d.gflops), bx = px(to->second->intensity), by = py(to->second->gflops);
      double length = std::hypot(bx - ax, by - ay);
      if (length < 4) continue;  // the call did not move
      ++arrows;
      svg += "<line class=\"move\" x1=\"" + num(ax) + "\" y1=\"" + num(ay) + "\" x2=\"" + num(bx) + "\" y2=\"" + num(by) +
             "\" stroke=\"#555555\" stroke-width=\"1\" marker-end=\"url(#roofline-arrow)\"/>\n";
    }
  }
  // Calls, largest first so that small ones stay visible on top.
  std::vector<const RooflineDot*> order;
  for (const auto& d : dots)
    if (placeable(d)) order.push_back(&d);
  std::stable_sort(order.begin(), order.end(), [](const RooflineDot* a, const RooflineDot* b) { return a->share > b->share; });
  for (const RooflineDot* d : order) {
    svg += "<circle class=\"call\" cx=\"" + num(px(d->intensity)) + "\" cy=\"" + num(py(d->gflops)) + "\" r=\"" +
           num(radius(*d)) + "\" fill=\"" + (d->memoryBound ? "#17becf" : "#ff7f0e") +
           "\" fill-opacity=\"0.55\" stroke=\"#333333\" stroke-width=\"0.5\"><title>" + xmlEscape(d->title) +
           "</title></circle>\n";
  }

  // Legend: the ceilings, then what the dots mean.
  double lx = width - right + 10, ly = kTop + 10;
  if (peakGflops > 0) {
    svg += line(lx, ly, lx + 20, ly, "stroke=\"#d62728\" stroke-width=\"2\"");
    svg += text(lx + 25, ly + 4, "peak " + shortNumber(peakGflops));
    ly += 18;
  }
  for (size_t i = 0; i < bandwidths.size(); ++i) {
    svg += line(lx, ly, lx + 20, ly, "stroke=\"" + lineColor(i) + "\" stroke-width=\"2\"");
    svg += text(lx + 25, ly + 4, bandwidths[i].name + " " + shortNumber(bandwidths[i].gbPerSecond) + " GB/s");
    ly += 18;
  }
  ly += 6;
  svg += "<circle cx=\"" + num(lx + 8) + "\" cy=\"" + num(ly) + "\" r=\"5\" fill=\"#17becf\" fill-opacity=\"0.55\"/>\n";
  svg += text(lx + 18, ly + 4, "memory-bound", " font-size=\"10\"");
  ly += 16;
  svg += "<circle cx=\"" + num(lx + 8) + "\" cy=\"" + num(ly) + "\" r=\"5\" fill=\"#ff7f0e\" fill-opacity=\"0.55\"/>\n";
  svg += text(lx + 18, ly + 4, "compute-bound", " font-size=\"10\"");
  ly += 16;
  svg += text(lx, ly + 4, "area: share of time", " fill=\"#666666\" font-size=\"10\"");
  if (!previous.empty()) {
    ly += 18;
    svg += "<circle cx=\"" + num(lx + 8) + "\" cy=\"" + num(ly) + "\" r=\"5\" fill=\"#bbbbbb\" fill-opacity=\"0.5\"/>\n";
    svg += text(lx + 18, ly + 4, "before", " font-size=\"10\"");
    ly += 16;
    svg += text(lx, ly + 4, std::to_string(arrows) + (arrows == 1 ? " call moved" : " calls moved"),
                " fill=\"#666666\" font-size=\"10\"");
  }
  return svg + "</svg>\n";
}

}  // namespace kiln::profiler
