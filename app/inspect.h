// The inspection half of the façade: what a build looks like inside, for the Workbench's Graph and
// IR views. It describes the optimized graph as the calls the runtime makes (one node per fused
// function or unfused operator, with edges carrying tensor shapes), keeps each stage's text, and
// produces one kernel's loop IR, LLVM IR and assembly on demand. Layout-free and Qt-free: the
// front end decides how to draw it. Same rules as facade.h: values or a Diagnostic, no throw.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "app/facade.h"

namespace kiln::app {

// ---- targets ----------------------------------------------------------------------------------

/// One entry of a front end's target picker.
struct TargetChoice {
  std::string label;        // "Host CPU: znver4 (AMD EPYC)", "AArch64 Neoverse-N1 (export only)"
  std::string spec;         // the target string build() takes
  std::string description;  // a sentence for a tooltip
  bool runnable = true;     // false: cross-compilation or a CPU this machine lacks (export only)
  bool host = false;
};

/// The host (detected and named), generic x86-64, AVX2, AVX-512 and a few cross-compilation
/// targets (aarch64 CPUs, wasm32 with SIMD128), each checked against this machine. Never fails: a target LLVM rejects is left out.
std::vector<TargetChoice> targetChoices();

// ---- the graph as the runtime runs it ----------------------------------------------------------

enum class GraphNodeKind { Input, Call, Output };

/// A node of the graph view. An if/loop call's regions (core/ir/graph.h "Control flow") are
/// described like the graph itself, recursively: a region's inputs (kind Input, bound by the
/// call), its calls and its outputs (kind Output) carry `region`, the region they are in.
struct GraphNode {
  GraphNodeKind kind = GraphNodeKind::Call;
  /// The call's profiler::OpRecord::index, -1 for inputs/outputs: at top level the plan call
  /// index; inside a region the profile row after the top-level calls, numbered depth-first as
  /// runtime::DebugExecutor::nestedCalls() does (plan.calls.size() + k).
  int call = -1;
  std::string title;             // "conv2d_nchwc + clamp", an input's or output's name
  std::string function;          // fused group name, or the node's label for an unfused operator
  std::string kernel;            // the compiled kernel it runs (equal workloads share one); empty for if/loop
  std::string key;               // output value name(s): matches profiler::OpRecord::key
  std::vector<std::string> ops;  // original operators inside, in order
  std::vector<std::string> inputShapes;
  std::string outputShape;
  std::string location;          // source location of the root operator, if known
  int group = -1;                // fused group index, -1 when not fused
  double flops = 0, bytes = 0;   // per call (one iteration inside a loop body)
  int region = -1;               // index into GraphDescription::regions; -1 at top level
  std::vector<int> regions;      // an if/loop call's own regions (then, else / body)
};

struct GraphEdge {
  int from = 0, to = 0;  // indices into GraphDescription::nodes
  std::string shape;     // "f32[1,32,112,112]"
};

/// One region of an if/loop call: the sub-plan it runs.
struct GraphRegion {
  int node = -1;      // the if/loop call's node (its enclosing control node)
  int parent = -1;    // the region that node is in; -1 when it is at top level
  std::string name;   // "then", "else", "body"
  std::string label;  // "%x0 loop · body"
};

struct GraphDescription {
  /// Inputs first, then calls in execution order, then outputs. An if/loop call is followed by
  /// its regions' nodes, region by region (inputs, calls, outputs; nested regions the same way).
  std::vector<GraphNode> nodes;
  /// Reads of a slot written by a call or input of the same (sub-)plan, and an edge from an
  /// if/loop call to each input of its regions (the values it binds them to).
  std::vector<GraphEdge> edges;
  std::vector<GraphRegion> regions;  // in the order their nodes appear
  int nodeOfCall(int call) const;    // -1 when absent
};

// ---- one build, inspected ----------------------------------------------------------------------

struct InspectState;  // the lowered kernels, kept for kernelCode()/moduleText()

struct Inspection {
  std::string model;
  std::string targetString;
  int optLevel = 3;
  bool runnable = true;
  std::string pipeline;
  GraphDescription graph;
  std::string importedText;   // IrStage::Graph
  std::string optimizedText;  // IrStage::Optimized
  std::string loweredText;    // IrStage::Lowered (every kernel)
  std::map<std::string, std::string> loopIrByKernel;
  std::vector<PassRun> passes;  // with irAfter for the passes that changed the graph
  int numKernels = 0, numCalls = 0;  // numCalls: top-level plan calls (those inside regions not counted)
  double seconds = 0;
  std::shared_ptr<const InspectState> state;
};

/// Runs the pass pipeline and lowering of `options` (no code generation) and describes the result.
Result<Inspection> inspect(std::shared_ptr<const Model> model, const BuildOptions& options);

struct KernelCode {
  std::string kernel;
  std::string loopIr, llvmIr, assembly;
};
/// One kernel's loop IR, optimized LLVM IR and assembly for the inspected target.
Result<KernelCode> kernelCode(const Inspection& inspection, const std::string& kernel);
/// The whole module's text for IrStage::Llvm or IrStage::Assembly (the others are in Inspection).
Result<std::string> moduleText(const Inspection& inspection, IrStage stage);

// ---- text diff ---------------------------------------------------------------------------------

enum class DiffKind { Same, Removed, Added };
struct DiffLine {
  DiffKind kind = DiffKind::Same;
  std::string text;
  int lineA = -1, lineB = -1;  // 1-based line numbers; -1 on the side where the line is absent
};
/// A line diff of two texts (longest common subsequence, so a kept line is never shown as both
/// removed and added). Leading/trailing common lines are matched first to keep it fast.
std::vector<DiffLine> lineDiff(const std::string& a, const std::string& b);

}  // namespace kiln::app
