// pool-to-mean (O1, late): an average pool whose one window is a whole NCHW plane becomes a mean
// over H and W:
//
//   y = adaptive_avg_pool2d(x){output_size=[1,1]}                 (x: [N, C, H, W], f32)
//   y = avg_pool2d(x){kernel=[H,W], padding=[0,0]}
//     ==>  y = mean(x){axes=[2,3], keepdims=1}
//
// A mean is a row reduction (core/lower/ops_reduce.cpp): a kernel with a tuning key into which
// fuse-ops can fuse its element producers (a batch norm's per-channel scale and shift and a relu
// at O2), where the NCHW pool is a hand-written kernel of its own. The pass runs after
// alter-layout, so only the pools left on NCHW inputs (rank 4) change; packed pools are already
// the window nest. Results agree within float reassociation (the mean sums in vector partial
// sums).
#pragma once

#include "core/ir/graph.h"
#include "core/passes/pass_registry.h"

namespace kiln::core::passes {

/// Returns true when a pool was rewritten. Counter: "pools".
bool poolToMean(Graph& graph, PassCounters* counters = nullptr);

}  // namespace kiln::core::passes
