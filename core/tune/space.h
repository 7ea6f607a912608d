// Search spaces: the valid schedule configurations of a tuning task, with the features the cost
// model learns from.
//
// A space is enumerated up front: the annotations of Kiln's sketches (core/lower/conv_search.h,
// winograd_search.h, gemm_search.h, nest_search.h) give a few hundred valid points per task at
// most, so validity is decided once, here, by the same rules the lowerings check (a tile must fit
// the vector registers and at most the row, ...), and a search strategy only ever sees valid
// configurations. Configurations are canonical: a knob at its default value where it is optional
// (a convolution's par_chunks at the runtime's launch granularity) is left out of the
// configuration, so it reads exactly like the schedule the lowering records for it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/lower/lower.h"
#include "core/lower/schedule_config.h"

namespace kiln::core::tune {

class ConfigSpace {
 public:
  /// The space of a tuning key on a target; throws kiln::Error (InvalidInput) for a key that
  /// names no tunable operator.
  static ConfigSpace forKey(const std::string& key, const lower::LowerOptions& options);

  const std::string& key() const { return m_key; }
  int64_t size() const { return static_cast<int64_t>(m_configs.size()); }
  const lower::Knobs& config(int64_t index) const { return m_configs.at(static_cast<size_t>(index)); }
  /// The index of a configuration; an optional knob given at its default counts as left out.
  std::optional<int64_t> indexOf(const lower::Knobs& knobs) const;
  /// Knob names and the values each takes somewhere in the space (an optional knob's default
  /// included).
  const std::map<std::string, std::vector<int64_t>>& knobValues() const { return m_values; }
  /// Configurations that differ from `index` in exactly one knob (an optional knob left out
  /// counts as its default).
  std::vector<int64_t> neighbors(int64_t index) const;
  /// A configuration taking each knob from `a` or `b` at random, when one of the tries is in the
  /// space and differs from both (none when the two share no knob names).
  std::optional<int64_t> crossover(int64_t a, int64_t b, std::mt19937_64& rng) const;
  /// The target the space was sized for.
  const lower::LowerOptions& options() const { return m_options; }

  /// Features of a configuration for the cost model: the knob values, then properties of the
  /// loop nest they produce (tile area, FMAs per load, tiles per row and the share of padded
  /// tile slots, parallel iterations per thread, the weight bytes a tile streams, the vector
  /// width), then the task's shape. Same length for every task of one operator kind.
  std::vector<float> features(int64_t index) const;
  std::string kind() const { return m_kind; }
  /// Configurations worth measuring right after the heuristic's: a convolution's default
  /// annotation of each algorithm (direct, each Winograd tile) and weight packing. The tune loop
  /// takes those that agree with the heuristic's configuration on the knobs they share.
  const std::vector<int64_t>& seeds() const { return m_seeds; }

 private:
  void add(lower::Knobs knobs);
  /// `knobs` without the optional knobs that are at their defaults.
  lower::Knobs canonical(lower::Knobs knobs) const;

  std::string m_key, m_kind;
  lower::Knobs m_params;
  lower::LowerOptions m_options;
  std::vector<lower::Knobs> m_configs;
  std::map<lower::Knobs, int64_t> m_index;
  std::map<std::string, std::vector<int64_t>> m_values;
  /// Optional knobs: the value a configuration without them has (par_chunks: the runtime's).
  std::map<std::string, int64_t> m_defaults;
  std::vector<int64_t> m_seeds;
};

}  // namespace kiln::core::tune
