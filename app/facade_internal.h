// Helpers shared by the façade's implementation files (app/facade*.cpp). Not a public header.
#pragma once

#include <chrono>
#include <exception>
#include <new>
#include <string>

#include "app/facade.h"
#include "codegen/target.h"
#include "core/compile.h"
#include "core/lower/lower.h"
#include "core/passes/pass_manager.h"

namespace kiln::app {

/// codegen::Target::parse, with its errors as ErrorKind::UnknownTarget naming the whole spec.
codegen::Target parseTarget(const std::string& spec);

/// A model lowered for a target: what build() JIT-compiles and exportModel() writes to disk, so
/// both run the same kernels on the same plan.
struct Lowered {
  core::lower::LoweredModule module;
  codegen::Target target;
  core::Graph graph;                    // the optimized graph that was lowered
  core::passes::PipelineResult passes;  // what the graph passes did
  std::string pipeline;                 // the pipeline's text (graph and loop-IR passes)
  std::vector<core::CompileStep> steps; // the compile driver's steps (core/compile.h)
};

/// What the compile driver (core/compile.h) gets from the build options for `target`: the opt
/// level or --passes, skips, verification, bounds checks, the target's lowering options and the
/// tuned schedules (options.records unless `schedules` is given). Throws kiln::Error.
core::CompileOptions compileOptionsFor(const BuildOptions& options, const codegen::Target& target,
                                       std::shared_ptr<const core::lower::ScheduleConfigs> schedules = nullptr);

/// Validates the options, parses the target and runs the compile driver: graph passes, lowering,
/// loop-IR passes. Throws kiln::Error.
/// `schedules` replaces the tuned configurations of options.records (schedule_config.h).
Lowered lowerFor(const Model& model, const BuildOptions& options,
                 std::shared_ptr<const core::lower::ScheduleConfigs> schedules = nullptr);

/// A copy of the model's graph after the graph passes of the options (no lowering).
core::OptimizedGraph optimizeFor(const Model& model, const BuildOptions& options);

/// The best configuration per workload of options.records for `target` (nullptr without
/// records). Throws kiln::Error (Io) for a missing or unreadable file.
std::shared_ptr<const core::lower::ScheduleConfigs> schedulesFor(const BuildOptions& options, const std::string& target);
/// build() with explicit tuned configurations (tuning compares untuned and tuned builds).
Result<std::shared_ptr<CompiledModel>> buildWithSchedules(std::shared_ptr<const Model> model, const BuildOptions& options,
                                                          std::shared_ptr<const core::lower::ScheduleConfigs> schedules);

/// A model source resolved to the file to import: `path` itself, or a Python reference's traced
/// file. Throws kiln::Error (the reference's errors name it).
struct ResolvedSource {
  std::string file;
  std::string pythonRef;  // canonical, for a reference
  std::string stateDict;
  std::string name;       // the model's name
};
ResolvedSource resolveSource(const std::string& path);

/// The input specs to import `file` with: options.inputs matched to the forward arguments' names,
/// else the file's own; then options.batch. A file that records no shapes throws InvalidInput
/// naming --input-shapes and the arguments. Throws kiln::Error.
std::vector<InputSpec> inputSpecsFor(const std::string& file, const OpenOptions& options);

/// How errors name a model: what the user opened (the path, or the Python reference).
inline const std::string& sourceOf(const Model& m) { return m.source.empty() ? m.path : m.source; }

inline double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Runs `fn`, turning every exception into a Diagnostic: exceptions stop at the façade.
template <typename T, typename Fn>
Result<T> guarded(const std::string& context, Fn&& fn) {
  std::string prefix = context.empty() ? "" : context + ": ";
  // Errors from a nested façade call already name the file: say it once.
  auto name = [&](const std::string& message) { return message.rfind(prefix, 0) == 0 ? message : prefix + message; };
  try {
    return Result<T>(fn());
  } catch (const Error& e) {
    return Diagnostic{name(e.what()), e.kind()};
  } catch (const std::bad_alloc&) {
    return Diagnostic{prefix + "out of memory", ErrorKind::Internal};
  } catch (const std::exception& e) {
    return Diagnostic{prefix + "internal error: " + e.what(), ErrorKind::Internal};
  }
}

}  // namespace kiln::app
