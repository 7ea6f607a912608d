// Lowering: graph operators → loop-IR PrimFuncs, and a whole graph → kernels + a runtime plan.
//
// Each node lowers to one PrimFunc whose buffer parameters are the node's inputs (graph values,
// in order) followed by its outputs. Nodes with equal workload keys (same op, attributes, input
// and output types) share one kernel. Naive-but-sane schedules: loops in memory order, the
// outermost data-parallel loop marked Parallel when there is enough work, contiguous innermost
// loops left for LLVM's vectorizer.
//
// Details the rest of the compiler can rely on:
// - Parameter buffers are named after the graph values (sanitized to C identifiers, unique in
//   the function); loop variables and local buffers never reuse a parameter's name.
// - Every loop binds its own Var. Parallel loops may sit inside serial loops (a small batch
//   loop around a parallel innermost copy) and a function may hold several in sequence (concat).
//   Local accumulators are Allocate'd inside the parallel loop body (one per worker iteration),
//   or at the top of the function when there is no parallel loop.
// - Adaptive pooling uses loop bounds computed from the enclosing loop variables.
// - PrimFunc::attrs holds "workload_key" (workloadKey) and "op".
// - core/lower/interpreter.h runs any PrimFunc directly, as the numerical reference.
#pragma once

#include <string>
#include <vector>

#include "core/ir/graph.h"
#include "core/tir/stmt.h"
#include "runtime/graph_plan.h"

namespace kiln::core::lower {

/// True when lowerNode knows the operator.
bool canLower(const std::string& op);

/// Lowers one node to a PrimFunc named `funcName`. Throws kiln::Error (Unsupported) when the
/// operator or one of its attribute combinations has no lowering.
tir::PrimFunc lowerNode(const Graph& graph, NodeId node, const std::string& funcName);

/// Stable text key of a node's computation: op, sorted attributes, input and output types.
std::string workloadKey(const Graph& graph, NodeId node);

struct LoweredModule {
  std::vector<tir::PrimFunc> funcs;  // one per distinct workload, in first-use order
  runtime::GraphPlan plan;           // calls reference funcs by name
};

/// Lowers every node; graph outputs that are inputs or constants get copy kernels so the plan's
/// outputs are always written by a call.
LoweredModule lowerGraph(const Graph& graph);

}  // namespace kiln::core::lower
