// What the cost model sees of a configuration: a row of numbers, computed once per point.
//
//   knobs  ConfigSpace::features: the knob values and what they imply, written per operator kind;
//          cheap, but each schedule family (a builder's knobs, a sketch's annotation) speaks its
//          own language, so the model cannot compare families well.
//   loops  core/tir/loop_features.h of the candidate's kernel, compiled from the key as the tuning
//          worker compiles it (compileCandidate; the graph passes run once per weight layout, the
//          loop-IR passes not at all): the same description for every family and kind. Costs a
//          lowering per point (0.3–10 ms on ResNet-50's convolutions), so the tuner scores only the
//          points its search visits.
//   both   knobs, then loops.
// A candidate whose lowering fails gets NaN loop features (XGBoost's missing value).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/lower/lower.h"
#include "core/tune/space.h"

namespace kiln::core::tune {

enum class FeatureSet { Knobs, Loops, Both };
/// "knobs", "loops" or "both"; throws kiln::Error (Usage) for another name.
FeatureSet featureSetNamed(const std::string& name);
const char* featureSetName(FeatureSet set);
/// Every feature set's name, the default (knobs) first.
const std::vector<std::string>& featureSetNames();

class CandidateFeatures {
 public:
  /// Features of `space`'s points (the space must outlive this). Loop features compile with
  /// `options` (the space's target) at `optLevel`, for a runtime of `threads` threads.
  CandidateFeatures(const ConfigSpace& space, FeatureSet set, const lower::LowerOptions& options, int threads,
                    int optLevel = 3);
  const std::vector<float>& row(int64_t index);
  FeatureSet set() const { return m_set; }
  /// Loop features are costly: a search should score only the points it visits.
  bool cheap() const { return m_set == FeatureSet::Knobs; }
  /// Seconds spent compiling candidates so far.
  double compileSeconds() const { return m_seconds; }

 private:
  const ConfigSpace& m_space;
  FeatureSet m_set;
  lower::LowerOptions m_options;
  int m_threads, m_optLevel;
  std::map<int64_t, std::vector<float>> m_rows;
  /// The task graph after its graph passes, by the knobs those passes read (a convolution's
  /// alter-layout packs weights by algo and oc_vecs): each point then costs only its lowering.
  std::map<lower::Knobs, Graph> m_graphs;
  double m_seconds = 0;
};

}  // namespace kiln::core::tune
