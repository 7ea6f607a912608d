// fuse-ops (O2): operator fusion. Partitions the graph's nodes into fused groups (graph.h
// FusedGroup), each lowered as one kernel (core/lower/fused.cpp), so the values passed between
// the ops of a group stay in registers instead of making a round trip through memory. The
// algorithm is explained at the top of fuse_ops.cpp.
//
// Which ops fuse is decided by their OpPattern (core/ir/op_registry.h) and by what lowering can
// do with them (core/lower/lower.h fusedRole):
// - chains of elementwise/broadcast ops fuse together, and with injective ops (reshape,
//   transpose, layout_transform; concat as the last op of a group);
// - an out-elementwise-fusable anchor (conv2d, dense, matmul, pooling) absorbs the elementwise
//   and broadcast ops that follow it (bias add, relu/clamp, residual add, per-channel scale) as
//   its epilogue;
// - a reduction (mean, sum) takes the elementwise and broadcast ops that produce its input as a
//   prologue (sum(exp(x)), mean(relu(add(x, y)))): it is the group's root, and its input is
//   computed where the reduction reads it;
// - softmax, other reductions and unknown ops stay alone.
// A value computed inside a group is never broadcast to a larger shape inside it (each op runs
// once per output element), and only a group's last node has uses outside the group.
//
// Groups get readable names (fused_conv2d_add_relu_3: the ops in order, then a counter per
// name) and nodes are reordered so every group is a consecutive run. fuse-ops should run last:
// the rewriting passes drop fused groups.
#pragma once

#include <cstdint>

#include "core/ir/graph.h"
#include "core/passes/pass_registry.h"

namespace kiln::core::passes {

struct FuseOpsOptions {
  int64_t maxDepth = 256;  // the most nodes one group may hold
};

/// Returns true when at least one group of two or more nodes was formed. A graph that already
/// has fused groups is left alone. Counters: "groups", "ops-fused" (nodes inside groups),
/// "anchored" (groups with an anchor).
bool fuseOps(Graph& graph, const FuseOpsOptions& options = {}, PassCounters* counters = nullptr);

}  // namespace kiln::core::passes
