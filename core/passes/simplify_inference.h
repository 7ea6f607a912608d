// simplify-inference (O1): rewrites inference-only operators into simpler ones and drops
// identities.
//
// - batch_norm(x, γ, β, μ, σ²){epsilon} becomes x·scale + shift with
//     scale = γ / sqrt(σ² + ε),  shift = β − μ·scale,
//   reshaped to [C, 1, ...] so they broadcast along axis 1. scale and shift are graph
//   computations over the parameters; with constant parameters fold-constants turns them into
//   two per-channel constants, and fold-scale-axis (O3) folds them into a preceding convolution.
//   (Dropout never reaches the graph: the importer removes it.)
// - copy(x), reshape(x) to x's own shape and transpose with the identity permutation are x.
// - reshape(reshape(x)) is one reshape.
// - pow(x, 2) with a constant exponent is mul(x, x) (the same value, no libm call).
#pragma once

#include "core/ir/graph.h"
#include "core/passes/pass_registry.h"

namespace kiln::core::passes {

/// Returns true when anything was rewritten. Counters: "batch-norms", "identities-removed",
/// "reshapes-merged", "squares".
bool simplifyInference(Graph& graph, PassCounters* counters = nullptr);

}  // namespace kiln::core::passes
