// Lowering: graph operators → loop-IR PrimFuncs, and a whole graph → kernels + a runtime plan.
//
// Each node lowers to one PrimFunc whose buffer parameters are the node's inputs (graph values,
// in order) followed by its outputs; a fused group (from fuse-ops, O2+) lowers to one PrimFunc
// for all its nodes (see "fused groups" below). Nodes with equal workload keys (same op,
// attributes, input and output types) share one kernel, and so do groups with equal keys.
//
// Schedules are explicit and target-aware (LowerOptions: vector lanes and registers):
// convolutions, dense, matmul and pooling are register-tiled with vector TIR (schedule.h picks
// the knobs and records them in attrs["schedule"]); every other op's innermost loop is vectorized
// by vectorize.h; the outermost data-parallel loop is Parallel when there is enough work.
//
// Details the rest of the compiler can rely on:
// - Parameter buffers are named after the graph values (sanitized to C identifiers, unique in
//   the function); loop variables and local buffers never reuse a parameter's name.
// - Every loop binds its own Var. Parallel loops may sit inside serial loops (a small batch
//   loop around a parallel innermost copy) and a function may hold several in sequence (concat).
//   Local accumulators are Allocate'd inside the parallel loop body (one per worker iteration),
//   or at the top of the function when there is no parallel loop.
// - Adaptive pooling uses loop bounds computed from the enclosing loop variables.
// - PrimFunc::attrs holds "workload_key" (workloadKey) and "op", and "schedule" (the knobs,
//   "oc_vecs=2,ow_block=14") and "tune_key" (schedule_config.h) for ops with a tunable schedule.
// - core/lower/interpreter.h runs any PrimFunc directly, as the numerical reference.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/ir/graph.h"
#include "core/tir/stmt.h"
#include "runtime/graph_plan.h"

namespace kiln::core::lower {

struct ScheduleConfigs;  // schedule_config.h

/// What lowering needs to know about the target (filled by the façade from codegen::Target;
/// the defaults suit any x86-64 with AVX2). Schedules pick their knobs from it (schedule.h).
struct LowerOptions {
  int vectorLanes = 8;               // f32 lanes of a vector register: 8 (AVX2), 16 (AVX-512)
  int vectorRegisters = 16;          // architectural vector registers: 16 (AVX2), 32 (AVX-512)
  int64_t l1Bytes = 32 * 1024;       // per-core data caches
  int64_t l2Bytes = 1024 * 1024;
  /// Tuned knobs by tuning key (schedule_config.h); kernels without an entry use the heuristic.
  std::shared_ptr<const ScheduleConfigs> schedules;
  /// The largest Winograd output tile (4, 2 or 0): the level's alter-layout option, and the
  /// tuning space's limit (core/tune/space.cpp).
  int winograd = 4;
};

/// True when lowerNode knows the operator.
bool canLower(const std::string& op);

/// Lowers one node to a PrimFunc named `funcName`. Throws kiln::Error (Unsupported) when the
/// operator or one of its attribute combinations has no lowering.
tir::PrimFunc lowerNode(const Graph& graph, NodeId node, const std::string& funcName,
                        const LowerOptions& options = {});

/// Stable text key of a node's computation: op, sorted attributes, input and output types.
std::string workloadKey(const Graph& graph, NodeId node);

// ---- fused groups (core/lower/fused.cpp) -----------------------------------------------------
//
// A fused group (graph.h FusedGroup, formed by core/passes/fuse_ops.h) lowers to one PrimFunc.
// Its parameters are the group's inputs (groupInputs: values used inside but computed outside,
// the anchor's inputs first) followed by the root's output. With an anchor (conv2d, dense, ...)
// the anchor's own lowering runs with OpContext::epilogue set to the chain of elementwise and
// broadcast ops after it; a reduction root (mean, sum, max, min) runs its own lowering with
// OpContext::prologue evaluating its input from the element ops before it; otherwise one loop
// nest over the root's output inlines every op's per-element expression (a concat root gets one
// loop nest per input).

/// How `op` can take part in a fused group: as its anchor (an out-elementwise-fusable op whose
/// lowering applies an epilogue), as a per-element expression, as a reduction root whose input
/// is computed inline by the group's element ops (mean, sum: OpContext::prologue), or not at all.
enum class FusedRole { None, Anchor, Element, Reduce };
FusedRole fusedRole(const std::string& op);
/// Whether a group member's value of type `t` can be read along the rows of `reduction` (a node
/// of Reduce role): it is of the reduction input's shape (read at the row's flat offset) or
/// constant along the reduced axes (read once per row). A reduction over several axes that
/// takes only such members runs in vectors; fuse-ops fuses no other into one.
bool readsAlongRows(const Graph& graph, const Node& reduction, const TensorType& t);

/// The group's inputs in parameter order: the anchor's inputs first, then the other values read
/// inside the group in order of first use (each once).
std::vector<ValueId> groupInputs(const Graph& graph, int group);
std::vector<ValueId> groupInputs(const Graph& graph, const FusedGroup& group);
/// Stable text key of a group's computation: every member's op, attributes and types, with its
/// operands named by position (%k: member k, $j: input j), so groups with equal keys share a
/// kernel.
std::string groupWorkloadKey(const Graph& graph, int group);
std::string groupWorkloadKey(const Graph& graph, const FusedGroup& group);
/// Lowers fused group `group` to one PrimFunc named `funcName` (attrs: "workload_key", "op" =
/// "fused", "ops" = "conv2d,add,relu").
tir::PrimFunc lowerGroup(const Graph& graph, int group, const std::string& funcName,
                         const LowerOptions& options = {});
/// Whether node `n` outside any group lowers as a group of one, which gives it a nest's sketch and
/// tuning key (nest_search.h), whatever its dtypes: an element op of fusedRole (an element nest;
/// concat, copy and batch_norm aside), a reduction (mean, sum, max, min) or softmax (a row
/// nest when it reduces along rows), or pooling of a packed input (a window nest, conv_search.h).
bool lowersAsGroupOfOne(const Graph& graph, NodeId n);
/// Lowers such a node as a group of one (attrs as lowerGroup's, "op" the node's op).
tir::PrimFunc lowerAsGroupOfOne(const Graph& graph, NodeId n, const std::string& funcName,
                                const LowerOptions& options = {});

struct LoweredModule {
  std::vector<tir::PrimFunc> funcs;  // one per distinct workload, in first-use order
  runtime::GraphPlan plan;           // calls reference funcs by name
};

/// Lowers every node, or every fused group as one kernel (named after the first group with its
/// workload key); graph outputs that are inputs or constants get copy kernels so the plan's
/// outputs are always written by a call.
LoweredModule lowerGraph(const Graph& graph, const LowerOptions& options = {});

}  // namespace kiln::core::lower
