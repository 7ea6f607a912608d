// Tuning tasks: the distinct tunable workloads of a compiled model, each with the share of the
// model's time it stands for, and the standalone graph a candidate is measured on.
//
// A task is named by its tuning key (core/lower/schedule_config.h): the key describes the
// anchor computation completely, so a task can be rebuilt from the key alone (taskGraph) — in a
// worker process, in a later session, or for another model with the same layer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/compile.h"
#include "core/ir/graph.h"
#include "core/lower/lower.h"
#include "core/lower/schedule_config.h"

namespace kiln::core::tune {

struct TuneTask {
  std::string name;     // the first kernel with this key ("fused_conv2d_nchwc_add_relu_3")
  std::string key;      // tuning key
  std::string
      kind;  // the key's kind: "conv2d_nchwc", "conv2d", "dense", "nest", "reduce", "pool", "window", ...
  int weight = 0;       // kernel calls per inference with this key
  double flops = 0;     // per call (element nest: one per output element; row nest: per element read)
  std::string defaultKnobs;  // the heuristic's knobs in the model's build
};

/// One task per distinct attrs["tune_key"] among the module's kernels, weighted by how many of
/// the plan's calls run a kernel with that key; largest weight × FLOPs first.
std::vector<TuneTask> extractTasks(const lower::LoweredModule& module);

/// FLOPs of one call of the key's computation; throws kiln::Error (InvalidInput) for a key
/// that is not a tuning key.
double taskFlops(const std::string& key);

/// A graph that computes just the key's anchor op on plain-layout inputs, with deterministic
/// pseudo-random weights (and a bias, as batch-norm folding leaves one on every convolution); a
/// matmul's two operands are both graph inputs. An element or row nest's graph is its fused group
/// (one node alone), every value it reads a graph input (core/lower/nest_search.h). An int8 key's
/// graph is its quantized op on u8 inputs (qnn.dense; qnn.conv2d_nchwc already packed in the
/// key's blocks), random i8 weights in [-8, 8].
/// Its O3 build holds one kernel with this key (conv2d_nchwc after alter-layout), next to the
/// layout transforms at its edges.
Graph taskGraph(const std::string& key, uint64_t seed = 1);

/// The task graph of `key` compiled as a tuning candidate, the way a build at `optLevel` compiles
/// the anchor: alter-layout for a convolution at O3 and up (its weight packing follows `knobs`),
/// fast-math at O4, no fusion (the kernel holds the anchor alone), with `knobs` as the key's
/// schedule (empty: the heuristic's). `kernel` indexes the kernel with the key in module.funcs.
/// Throws kiln::Error (a key that is not a tuning key, knobs the lowering refuses).
struct Candidate {
  lower::LoweredModule module;
  size_t kernel = 0;
  /// Per graph input, the rows of the table it indexes (core/ir/graph.h indexBound; 0: none):
  /// where random integer inputs keep to.
  std::vector<int64_t> indexBounds;
};
Candidate compileCandidate(const std::string& key, const lower::Knobs& knobs, lower::LowerOptions options,
                           int optLevel);
/// The options compileCandidate compiles taskGraph(key) with.
CompileOptions candidateCompileOptions(const std::string& key, const lower::Knobs& knobs, lower::LowerOptions options,
                                       int optLevel);
/// The index of the kernel with tuning key `key` in `module`; throws kiln::Error (Internal) when
/// there is none.
size_t kernelWithKey(const lower::LoweredModule& module, const std::string& key);

}  // namespace kiln::core::tune
