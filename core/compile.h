// The compiler, top to bottom: everything between an imported graph and code generation, as one
// list of named, timed steps. `kiln compile/run/ir/tune`, tuning candidates and the workbench all
// compile through here; nothing else strings the stages together.
//
//   1. graph passes    the -O level's pipeline, or --passes (core/passes): simplification,
//                      constant and batch-norm folding, NCHW[x]c layout, fusion; then the same
//                      pipeline on each sub-graph of an if/loop node
//   2. lowering        operators and fused groups → loop-IR kernels and a runtime plan (if/loop
//                      nodes → calls of sub-plans)
//                      (core/lower): each kernel's schedule is chosen here, by the heuristic
//                      or from tuned knobs (LowerOptions::schedules)
//   3. loop-IR passes  per kernel, the pipeline's loop-IR part (fast-math, bounds-check, ...)
//   Each step can be verified (CompileOptions::verify: the graph verifier, then the loop-IR one).
//   → codegen/ turns the kernels into machine code (JIT or export); core/ stops at the hand-off.
//
// Opt levels are defined here and nowhere else (optLevelPipelineText):
//   O0  nothing (types and shapes are inferred when the graph is built); one kernel per node
//   O1  simplify-inference, fold-constants, eliminate-common-subexpressions, eliminate-dead-code
//   O2  O1 + fold-pad-into-conv (zero pads before a convolution become its padding) + fuse-ops
//   O3  O1 + fold-pad-into-conv + fold-scale-axis (batch-norm scale into conv/dense weights) +
//       alter-layout{lanes=the target's f32 vector width} (weights packed at compile time) +
//       fold-constants + qnn-alter-layout + eliminate-dead-code, then fuse-ops last
//   O4  O3 with merge-parallel (sibling conv2d/dense on one input become one wide op) before its
//       final eliminate-dead-code, and the loop-IR pass fast-math
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/ir/graph.h"
#include "core/lower/lower.h"
#include "core/passes/pass_manager.h"

namespace kiln::core {

/// The default pipeline text of opt level 0..passes::kMaxOptLevel (Usage error otherwise) for a
/// target whose f32 vectors have `vectorLanes` lanes (alter-layout's channel block), with
/// convolutions up to Winograd F(`winograd`×`winograd`, 3×3) (alter-layout's option; 4, 2 or 0).
std::string optLevelPipelineText(int optLevel, int vectorLanes = 8, int winograd = 4);

struct CompileOptions {
  int optLevel = 3;
  /// Pipeline text replacing the level's (graph passes, then loop-IR passes).
  std::optional<std::string> passes;
  std::set<std::string> skipPasses;  // pass names not to run (either kind)
  bool verify = false;               // the graph verifier after every graph pass, the loop-IR
                                     // verifier (core/tir/verify.h) after lowering and every loop-IR pass
  bool keepIr = false;               // the graph text after every graph pass that changed it
  bool boundsCheck = false;          // append the loop-IR pass bounds-check
  const std::atomic<bool>* cancel = nullptr;  // checked between graph passes
  /// The target's vector lanes, registers and caches (lower::lowerOptionsFor) and tuned knobs.
  lower::LowerOptions lower;
};

/// One step of a compilation: "graph passes", "lower", then each loop-IR pass by name.
struct CompileStep {
  std::string name;
  double seconds = 0;
  std::string detail;  // "12 passes, 7 changed the graph", "41 kernels, 73 calls", "41 of 41 kernels changed"
};

/// The graph after step 1.
struct OptimizedGraph {
  Graph graph;
  passes::PipelineResult passes;
  std::string pipeline;  // the whole pipeline text, loop-IR passes included
};

/// Steps 1–3.
struct CompiledKernels {
  Graph graph;                   // after the graph passes
  passes::PipelineResult passes;  // what each graph pass did
  std::string pipeline;          // the whole pipeline text
  lower::LoweredModule module;   // kernels after the loop-IR passes, and the plan
  std::vector<CompileStep> steps;
};

/// Runs step 1 only (`kiln ir --stage optimized`). Throws kiln::Error.
OptimizedGraph optimizeGraph(Graph graph, const CompileOptions& options);

/// Runs steps 1–3. Throws kiln::Error (a bad pipeline, an operator without lowering).
CompiledKernels compile(Graph graph, const CompileOptions& options);

/// Runs the loop-IR passes of `pipeline` over every kernel, in order; one step per pass (with
/// `verify`, the loop-IR verifier after each). Throws kiln::Error (Usage) when the pipeline holds
/// a graph pass, InternalError when a verified kernel is malformed.
std::vector<CompileStep> runLoopPasses(std::vector<tir::PrimFunc>& kernels, const passes::Pipeline& pipeline,
                                       const std::set<std::string>& skip = {}, bool verify = false);

}  // namespace kiln::core
