// Feature rows of configurations; see features.h.
#include "core/tune/features.h"

#include <chrono>
#include <limits>

#include "core/tir/loop_features.h"
#include "core/tune/task.h"
#include "runtime/error.h"

namespace kiln::core::tune {

FeatureSet featureSetNamed(const std::string& name) {
  for (FeatureSet set : {FeatureSet::Knobs, FeatureSet::Loops, FeatureSet::Both})
    if (name == featureSetName(set)) return set;
  throw Error("unknown feature set '" + name + "' (expected knobs, loops or both)", ErrorKind::Usage);
}

const std::vector<std::string>& featureSetNames() {
  static const std::vector<std::string> names{featureSetName(FeatureSet::Knobs), featureSetName(FeatureSet::Loops),
                                              featureSetName(FeatureSet::Both)};
  return names;
}

const char* featureSetName(FeatureSet set) {
  switch (set) {
    case FeatureSet::Knobs: return "knobs";
    case FeatureSet::Loops: return "loops";
    case FeatureSet::Both: return "both";
  }
  return "?";
}

CandidateFeatures::CandidateFeatures(const ConfigSpace& space, FeatureSet set, const lower::LowerOptions& options,
                                     int threads, int optLevel)
    : m_space(space), m_set(set), m_options(options), m_threads(threads), m_optLevel(optLevel) {}

const std::vector<float>& CandidateFeatures::row(int64_t index) {
  auto it = m_rows.find(index);
  if (it != m_rows.end()) return it->second;
  std::vector<float> row;
  if (m_set != FeatureSet::Loops) row = m_space.features(index);
  if (m_set != FeatureSet::Knobs) {
    auto start = std::chrono::steady_clock::now();
    std::vector<float> loops;
    try {
      const lower::Knobs& knobs = m_space.config(index);
      CompileOptions build = candidateCompileOptions(m_space.key(), knobs, m_options, m_optLevel);
      lower::Knobs layout;  // the knobs alter-layout reads (core/passes/alter_layout.h)
      for (const char* name : {"algo", "oc_vecs"})
        if (knobs.count(name)) layout[name] = knobs.at(name);
      auto graph = m_graphs.find(layout);
      if (graph == m_graphs.end())
        graph = m_graphs.emplace(layout, optimizeGraph(taskGraph(m_space.key()), build).graph).first;
      lower::LoweredModule module = lower::lowerGraph(graph->second, build.lower);
      loops = tir::loopFeatures(module.funcs[kernelWithKey(module, m_space.key())], m_threads);
    } catch (const Error&) {
      loops.assign(tir::loopFeatureNames().size(), std::numeric_limits<float>::quiet_NaN());
    }
    m_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    row.insert(row.end(), loops.begin(), loops.end());
  }
  return m_rows.emplace(index, std::move(row)).first->second;
}

}  // namespace kiln::core::tune
