// The roofline of a per-operator profile: where each call stands against the machine's ceilings
// (ceilings.h). For a call with F FLOPs moving B bytes (op_cost.h: every input and output once,
// the least traffic it can have) in t seconds:
//   arithmetic intensity   AI = F / B                         (FLOPs per byte)
//   achieved               F / t                              (GFLOP/s)
//   level                  the first of L1, L2, L3 whose capacity for the thread count holds B,
//                          else DRAM: a guess that the call's data stays in the smallest cache
//                          it fits (the calls run back to back, each reading what the previous
//                          one wrote)
//   attainable bound       min(peak, AI × bandwidth of that level)
//   % of bound             achieved / bound; memory-bound when AI × bandwidth < peak, i.e. AI
//                          left of the ridge point peak / bandwidth, else compute-bound.
// A call without FLOPs (a layout transform, a copy) is memory-bound by definition: its % of bound
// is its achieved bandwidth (B / t) against the level's, which is what the memory-bound formula
// gives for any AI > 0 as well.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "profiler/ceilings.h"
#include "profiler/records.h"

namespace kiln::profiler {

struct RooflinePoint {
  int call = 0;             // OpRecord::index
  std::string name;         // the call's label
  std::string key;          // output value names (matches the call across builds)
  std::vector<std::string> ops;
  double flops = 0, bytes = 0, timeUs = 0;
  double percentOfTime = 0;  // the call's share of Σ per-call medians
  double intensity = 0;      // FLOPs / byte
  double gflops = 0;         // achieved
  double gbPerSecond = 0;    // achieved, bytes / time
  std::string level;         // the bandwidth ceiling that applies
  double bandwidth = 0;      // its GB/s
  double boundGflops = 0;    // min(peak, AI × bandwidth); 0 without FLOPs
  double percentOfBound = 0;
  bool memoryBound = true;
};

/// min(peak, intensity × bandwidth).
double attainableGflops(double intensity, double peakGflops, double gbPerSecond);
/// The bandwidth ceiling whose capacity holds `workingSetBytes` (the last, DRAM, when none does).
/// The ceilings must hold at least one bandwidth (throws kiln::Error otherwise).
const BandwidthCeiling& ceilingFor(double workingSetBytes, const MachineCeilings& ceilings);
RooflinePoint rooflinePoint(const OpRecord& op, const MachineCeilings& ceilings);
/// One point per call, in execution order.
std::vector<RooflinePoint> rooflineOf(const ProfileRecord& profile, const MachineCeilings& ceilings);

/// The axes of a log-log roofline chart, in whole decades: [10^x0, 10^x1] × [10^y0, 10^y1] holding
/// every point with x, y > 0 and every ridge point (peak / bandwidth, peak), with room around
/// them. `fitted` is false when there was nothing to hold (then 0.1–100 on both axes).
struct RooflineAxes {
  double x0 = -1, x1 = 2, y0 = -1, y1 = 2;  // decades (log10)
  bool fitted = false;
  double xMin() const;
  double xMax() const;
  double yMin() const;
  double yMax() const;
};
/// `points` are (FLOPs/byte, GFLOP/s); `bandwidths` in GB/s.
RooflineAxes rooflineAxes(const std::vector<std::pair<double, double>>& points, double peakGflops,
                          const std::vector<double>& bandwidths);

/// The chart of a roofline as SVG (svg_chart.h's rooflineChartSvg): the ceilings as lines, one
/// dot per call with FLOPs, its area proportional to its share of the time.
std::string rooflineSvg(const std::string& title, const std::vector<RooflinePoint>& points,
                        const MachineCeilings& ceilings);
/// Two builds of one model on one chart: `before`'s dots grey, `after`'s coloured, an arrow from
/// each call's old point to its new one (calls matched by their key, the output value names).
std::string rooflineComparisonSvg(const std::string& title, const std::vector<RooflinePoint>& before,
                                  const std::vector<RooflinePoint>& after, const MachineCeilings& ceilings);

}  // namespace kiln::profiler
