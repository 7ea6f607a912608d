// The registry of passes, by name (after LLVM's PassRegistry.def): each pass has a name, a
// one-line summary, the lowest -O level whose default pipeline runs it, typed options with
// defaults, and counters it reports. Pipelines (core/passes/pipeline.h) name passes from here;
// the CLI, the tests and the workbench all go through this one table.
//
// Two kinds share the table: graph passes rewrite the graph before lowering; loop-IR passes
// rewrite each lowered kernel (tir::PrimFunc) after it. A pipeline names graph passes first; the
// compile driver (core/compile.h) runs the graph part, lowers, then runs the loop-IR part.
//
// A pass itself is a documented free function in its own .h/.cpp pair
// (`bool foldConstants(Graph&, const FoldConstantsOptions&, PassCounters*)`): it rewrites the
// graph in place and returns whether it changed anything. The registry adapts option text to
// the pass's options struct. Passes are registered explicitly in pass_registry.cpp (no static
// constructors).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/ir/graph.h"
#include "core/tir/stmt.h"

namespace kiln::core::lower {
struct ScheduleConfigs;
}

namespace kiln::core::passes {

/// Named counters a pass reports about its work ("folded" → 12). Pass functions take a
/// PassCounters* that may be null.
using PassCounters = std::map<std::string, int64_t>;

/// Adds `n` to counter `key` when `counters` is set.
inline void bump(PassCounters* counters, const char* key, int64_t n = 1) {
  if (counters) (*counters)[key] += n;
}

enum class OptionType { Int, Float, Bool, String };

struct PassOptionDef {
  std::string name;  // "max-depth"
  OptionType type = OptionType::Int;
  std::string defaultValue;  // as text: "256", "1", "true"
  std::string summary;
};

/// Option values of one pass invocation as text, checked against the pass's definitions when
/// set (PassInfo::makeOptions, parsePipeline). Getters convert; a missing name is an
/// InternalError.
class PassOptions {
 public:
  int64_t getInt(const std::string& name) const;
  double getFloat(const std::string& name) const;
  bool getBool(const std::string& name) const;
  const std::string& getString(const std::string& name) const;
  const std::map<std::string, std::string>& values() const { return m_values; }
  void setRaw(const std::string& name, std::string value) { m_values[name] = std::move(value); }
  /// Equal typed values (the build context below is not an option).
  bool operator==(const PassOptions& other) const { return m_values == other.m_values; }

  /// Build context the pass manager hands to every pass: tuned schedules, which alter-layout
  /// consults for the weight packing of each convolution (core/lower/schedule_config.h).
  std::shared_ptr<const lower::ScheduleConfigs> schedules;

 private:
  std::map<std::string, std::string> m_values;
};

enum class PassKind { Graph, Loop };

/// minOptLevel of a pass no default pipeline runs (a debugging aid such as bounds-check).
inline constexpr int kNoDefaultLevel = 99;

struct PassInfo {
  std::string name;
  std::string summary;
  int minOptLevel = 1;  // default pipelines from this level on run it
  std::vector<PassOptionDef> options;
  std::function<bool(Graph&, const PassOptions&, PassCounters*)> run;  // graph passes
  PassKind kind = PassKind::Graph;
  /// Loop-IR passes: rewrites one kernel, returns whether it changed it.
  std::function<bool(tir::PrimFunc&, const PassOptions&)> runLoop;

  /// The defaults with `overrides` applied; throws kiln::Error (Usage) for an unknown option
  /// or a value of the wrong type ("fuse-ops: option 'max-depth' expects an integer, got 'x'").
  PassOptions makeOptions(const std::map<std::string, std::string>& overrides = {}) const;
  const PassOptionDef* findOption(std::string_view option) const;
};

/// nullptr when no pass has that name.
const PassInfo* findPass(std::string_view name);
/// Every registered pass, in registration order (the order of the O3 pipeline; loop-IR passes last).
std::vector<const PassInfo*> allPasses();

/// A table of the registered passes: name, -O level, summary and options (for `kiln passes` and
/// the workbench).
std::string describePasses();

}  // namespace kiln::core::passes
