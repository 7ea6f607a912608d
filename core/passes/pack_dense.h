// pack-dense (O3): a dense layer (or a matmul by one constant matrix) over many rows gets its
// weights packed at compile time into column panels for the outer-product kernel
// (lower/ops_gemm.cpp):
//
//   y = dense(x [..., K], w [N, K], b [N])        rows M = product of x's leading axes >= min-rows
//     ==>  y = dense_packed(x, wp [N/P, K, P], b)  wp[p, k, j] = w[p·P + j, k]
//   y = matmul(x [..., M, K], w [K, N])            one constant matrix (an ONNX MatMul)
//     ==>  y = dense_packed(x, wp [N/P, K, P])     wp[p, k, j] = w[k, p·P + j]
//
// Why: dense's own kernel vectorizes the reduction (both operands contiguous along K). That suits
// a stream over the weights at one row (a classifier at batch 1) but pays a horizontal lane sum
// per output. Over many rows (a transformer's tokens) an outer-product tile is faster: one x
// element broadcast against vectors of a panel row, no lane sums, and each panel one contiguous
// stream that consecutive row tiles reuse (measured on bert_encoder's shapes: 1.4-1.8× over the
// same tile on the transposed weights [K, N], whose rows 4 KiB apart share L1 sets).
//
// The panel width P is nv·lanes: the most vectors (max-vectors, then fewer) whose width divides N;
// a layer no panel width divides stays dense. Results agree within float reassociation.
#pragma once

#include <cstdint>

#include "core/ir/graph.h"
#include "core/passes/pass_registry.h"

namespace kiln::core::passes {

struct PackDenseOptions {
  int lanes = 8;         // f32 lanes of the target's vectors
  int maxVectors = 3;    // the most vectors of one panel (the register tile is rows × vectors)
  int64_t minRows = 16;  // dense layers over fewer rows keep the dot-product kernel
};

/// The most vectors of one panel on `lanes`-wide f32 vectors: 4, but 3 with AVX2's 8 lanes
/// (16 registers: a 4 × 3 accumulator tile leaves 4 for the broadcasts and the panel's loads).
inline int packDenseMaxVectors(int lanes) { return lanes == 8 ? 3 : 4; }

/// w [N, K] packed into panels [N/P, K, P]. InternalError unless P divides N.
runtime::Tensor packDenseWeight(const runtime::Tensor& w, int64_t panel);

/// Returns true when a layer was packed. Counters: "dense", "matmul".
bool packDense(Graph& graph, const PackDenseOptions& options = {}, PassCounters* counters = nullptr);

}  // namespace kiln::core::passes
