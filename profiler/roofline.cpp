#include "profiler/roofline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "profiler/op_profile.h"
#include "profiler/svg_chart.h"
#include "runtime/error.h"

namespace kiln::profiler {

double attainableGflops(double intensity, double peakGflops, double gbPerSecond) {
  return std::min(peakGflops, intensity * gbPerSecond);
}

const BandwidthCeiling& ceilingFor(double workingSetBytes, const MachineCeilings& ceilings) {
  if (ceilings.bandwidth.empty()) throw Error("the machine ceilings hold no bandwidth", ErrorKind::Internal);
  for (const BandwidthCeiling& b : ceilings.bandwidth)
    if (b.capacityBytes > 0 && workingSetBytes <= static_cast<double>(b.capacityBytes)) return b;
  return ceilings.bandwidth.back();
}

RooflinePoint rooflinePoint(const OpRecord& op, const MachineCeilings& ceilings) {
  RooflinePoint p;
  p.call = op.index;
  p.name = op.name;
  p.key = op.key;
  p.ops = op.ops;
  p.flops = op.flops;
  p.bytes = op.bytes;
  p.timeUs = op.timeUs;
  p.percentOfTime = op.percent;
  p.intensity = op.bytes > 0 ? op.flops / op.bytes : 0;
  p.gflops = op.timeUs > 0 ? op.flops / (op.timeUs * 1e3) : 0;
  p.gbPerSecond = op.timeUs > 0 ? op.bytes / (op.timeUs * 1e3) : 0;
  const BandwidthCeiling& level = ceilingFor(op.bytes, ceilings);
  p.level = level.level;
  p.bandwidth = level.gbPerSecond;
  if (op.flops > 0 && op.bytes > 0) {
    p.boundGflops = attainableGflops(p.intensity, ceilings.peakGflops, level.gbPerSecond);
    p.memoryBound = p.intensity * level.gbPerSecond < ceilings.peakGflops;
    p.percentOfBound = p.boundGflops > 0 ? 100.0 * p.gflops / p.boundGflops : 0;
  } else if (op.flops > 0) {
    // FLOPs without bytes (nothing read or written): only the peak bounds it.
    p.boundGflops = ceilings.peakGflops;
    p.memoryBound = false;
    p.percentOfBound = p.boundGflops > 0 ? 100.0 * p.gflops / p.boundGflops : 0;
  } else {
    p.memoryBound = true;
    p.percentOfBound = level.gbPerSecond > 0 ? 100.0 * p.gbPerSecond / level.gbPerSecond : 0;
  }
  return p;
}

std::vector<RooflinePoint> rooflineOf(const ProfileRecord& profile, const MachineCeilings& ceilings) {
  std::vector<RooflinePoint> out;
  out.reserve(profile.ops.size());
  for (const OpRecord& op : profile.ops) out.push_back(rooflinePoint(op, ceilings));
  return out;
}

double RooflineAxes::xMin() const { return std::pow(10.0, x0); }
double RooflineAxes::xMax() const { return std::pow(10.0, x1); }
double RooflineAxes::yMin() const { return std::pow(10.0, y0); }
double RooflineAxes::yMax() const { return std::pow(10.0, y1); }

RooflineAxes rooflineAxes(const std::vector<std::pair<double, double>>& points, double peakGflops,
                          const std::vector<double>& bandwidths) {
  double xLo = INFINITY, xHi = -INFINITY, yLo = INFINITY, yHi = -INFINITY;
  auto include = [&](double x, double y) {
    if (!(x > 0) || !(y > 0) || !std::isfinite(x) || !std::isfinite(y)) return;
    xLo = std::min(xLo, x);
    xHi = std::max(xHi, x);
    yLo = std::min(yLo, y);
    yHi = std::max(yHi, y);
  };
  for (const auto& [x, y] : points) include(x, y);
  for (double b : bandwidths)
    if (b > 0 && peakGflops > 0) include(peakGflops / b, peakGflops);
  RooflineAxes axes;
  if (!std::isfinite(xLo)) return axes;
  axes.fitted = true;
  axes.x0 = std::floor(std::log10(xLo) - 0.3);
  axes.x1 = std::ceil(std::log10(xHi) + 0.3);
  axes.y0 = std::floor(std::log10(yLo) - 0.3);
  axes.y1 = std::ceil(std::log10(yHi) + 0.2);
  return axes;
}

namespace {

std::vector<RooflineDot> dotsOf(const std::vector<RooflinePoint>& points) {
  std::vector<RooflineDot> dots;
  for (const RooflinePoint& p : points) {
    char tip[160];
    std::snprintf(tip, sizeof tip, ": %.3g FLOPs/byte, %.3g GFLOP/s, %.1f%% of the %s bound (%.3g), %.1f%% of time",
                  p.intensity, p.gflops, p.percentOfBound, p.level.c_str(), p.boundGflops, p.percentOfTime);
    RooflineDot d;
    d.intensity = p.intensity;
    d.gflops = p.gflops;
    d.share = p.percentOfTime / 100.0;
    d.title = "#" + std::to_string(p.call) + " " + joinOps(p.ops) + tip;
    d.key = p.key;
    d.memoryBound = p.memoryBound;
    dots.push_back(std::move(d));
  }
  return dots;
}

std::vector<RooflineCeilingLine> linesOf(const MachineCeilings& ceilings) {
  std::vector<RooflineCeilingLine> lines;
  for (const BandwidthCeiling& b : ceilings.bandwidth) lines.push_back({b.level, b.gbPerSecond});
  return lines;
}

}  // namespace

std::string rooflineSvg(const std::string& title, const std::vector<RooflinePoint>& points,
                        const MachineCeilings& ceilings) {
  return rooflineChartSvg(title, ceilings.peakGflops, linesOf(ceilings), dotsOf(points));
}

std::string rooflineComparisonSvg(const std::string& title, const std::vector<RooflinePoint>& before,
                                  const std::vector<RooflinePoint>& after, const MachineCeilings& ceilings) {
  return rooflineChartSvg(title, ceilings.peakGflops, linesOf(ceilings), dotsOf(after), dotsOf(before));
}

}  // namespace kiln::profiler
