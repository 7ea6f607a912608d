// pool-to-mean (O1, late): an average pool whose one window is a whole NCHW plane becomes a mean
// over H and W:
//
//   y = adaptive_avg_pool2d(x){output_size=[1,1]}                 (x: [N, C, H, W], f32)
//   y = avg_pool2d(x){kernel=[H,W], padding=[0,0]}
//     ==>  y = mean(x){axes=[2,3], keepdims=1}
//
// A mean is a row reduction (core/lower/fused.cpp): a kernel with a tuning key whose element
// producers fuse into it (a quantized model's dequantize before its head), where the NCHW pool is
// a hand-written kernel of its own. The pass runs after alter-layout, so only the pools left on
// NCHW inputs (rank 4) change; packed pools are already the window nest. Results agree to an ulp
// (the pool divides the sum, the mean may multiply by its reciprocal).
#pragma once

#include "core/ir/graph.h"
#include "core/passes/pass_registry.h"

namespace kiln::core::passes {

/// Returns true when a pool was rewritten. Counter: "pools".
bool poolToMean(Graph& graph, PassCounters* counters = nullptr);

}  // namespace kiln::core::passes
