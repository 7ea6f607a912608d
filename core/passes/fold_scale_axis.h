// fold-scale-axis (O3): folds per-output-channel affine ops that follow a conv2d or dense into
// the weights and bias, so the convolution produces the final value directly. After
// simplify-inference and fold-constants a batch norm is `mul(conv, scale)` then `add(·, shift)`
// with constant per-channel scale/shift; this is where it disappears into the convolution:
//
//   y = conv(x, W, b)·s + t   ==>   y = conv(x, W', b')   with W'[o] = W[o]·s[o], b' = b·s + t
//
// The chain may hold any mix of mul, add, sub and div by constants that are per output channel
// (axis 1 of a conv2d's output, the last axis of a dense's; scalars count too) and keep the
// output shape. Every intermediate in the chain must have that one use (the next op of the
// chain) and must not be a graph output. The weight and the chain's constants must be constant
// (run fold-constants first). Results change only by floating-point rounding.
#pragma once

#include "core/ir/graph.h"
#include "core/passes/pass_registry.h"

namespace kiln::core::passes {

/// Returns true when a chain was folded. Counters: "anchors" (convolutions/dense rewritten),
/// "ops-folded" (chain ops removed).
bool foldScaleAxis(Graph& graph, PassCounters* counters = nullptr);

}  // namespace kiln::core::passes
