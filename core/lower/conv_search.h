// The template-free schedule of pointwise packed convolutions (conv2d_nchwc, 1×1, no padding,
// groups 1, any stride): a plain loop nest and the sketch rule whose annotations the tuner
// searches, as core/lower/gemm_search.h has for the GEMMs. A configuration with "mi" is a sketch
// annotation; without it the hand-written builder of ops_conv_packed.cpp stays the kernel.
//
// ## The plain nest
//
// Input x [N, C/ib, H, W, ib], weight w [O/ob, C/ib, 1, 1, ib, ob] with ob = V·L (V output
// vectors per weight block: the oc_vecs knob, which alter-layout packs by), output y [N, O/L, H,
// W, L], optional bias b [O]. With P = H·W pixels walked as one row:
//
//   for n, g < O/ob, v < V, p < P, l < L, c < C/ib, i < ib:
//     y[n, g·V + v, p, l] = select(c = 0 ∧ i = 0, b[(g·V + v)·L + l] or 0, y[…])
//                           + x[n, c, p, i] · w[g, c, i, v·L + l]
//
// The first step of the reduction starts from the bias, so no separate pass sets y. A strided
// convolution (the ResNet downsampling layers) keeps its rows: loops r < OH and p < OW after v,
// reading x[n, c, r·sh, p·sw, i].
//
// ## The sketch (annotation mi, po; oc_vecs fixed by the packing)
//
//   reorder(g, p, v)               pixels outside the block's vectors (po = 0: p, g, v;
//                                  strided: g, r, p, v or r, p, g, v)
//   split(p; mi, 1)                row tile of mi pixels, a tail loop for the P mod mi last ones
//   reorder(p_o, c, i, p_i, v, l)  (po = 0: p_o, g, c, i, p_i, v, l) the tile innermost
//   unroll(p_i) unroll(v)          the mi × V register tile of L-lane vectors
//   cache_write(c)                 accumulated in a local buffer (registers) over the reduction
//   parallel(fuse(g, p_o) | …)     the outer data-parallel loop (strided: fuse(g, r) or r)
//   vectorize(l) (and l_r, l_w)    contiguous along l in y and w, a broadcast of x[n, c, p, i]
//
// po = 1 keeps a weight block's output channels outermost (its weights stay in cache while the
// pixels stream by, the builder's oc_outer); po = 0 walks pixel tiles outermost.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/lower/schedule_config.h"
#include "core/tir/schedule.h"
#include "core/tir/trace.h"

namespace kiln::core::lower {

/// A pointwise packed convolution's sizes, read from its buffers.
struct PointwiseConvShape {
  int64_t n = 1, cb = 1, ib = 1;  // input [N, C/ib, H, W, ib]
  int64_t pixels = 1;             // the row the sketch tiles: P = H·W (stride 1), else OW
  int64_t groups = 1, vectors = 1, lanes = 1;  // weight blocks O/ob, V = ob / L, L
  bool bias = false;
  int64_t rows = 1;                        // output rows OH of a strided convolution, else 1
  int64_t strideH = 1, strideW = 1;        // a stride > 1 walks rows × columns (loops r, p)
  int64_t inHeight = 1, inWidth = 1;       // H, W
  bool rowed() const { return strideH != 1 || strideW != 1; }
  double flops() const {
    return 2.0 * static_cast<double>(n * rows * pixels) * static_cast<double>(cb * ib) *
           static_cast<double>(groups * vectors * lanes);
  }
};

/// The shape of a conv2d_nchwc kernel when it is pointwise (1×1 weight, no padding, groups 1,
/// NCHW[x]c input and output, any stride); nullopt otherwise. `xs`, `ws`, `ys`: the input, packed
/// weight and output shapes; `stride`, `padding`: the kernel's (height, width) pairs.
std::optional<PointwiseConvShape> pointwiseConvShape(const Shape& xs, const Shape& ws, const Shape& ys,
                                                     const std::vector<int64_t>& stride,
                                                     const std::vector<int64_t>& padding, int64_t groups, bool bias);

/// The plain nest over the kernel's buffers (b null without bias); see the file comment.
tir::Stmt pointwiseConvPlainNest(const PointwiseConvShape& s, const tir::Buffer& x, const tir::Buffer& w,
                                 const tir::Buffer& b, const tir::Buffer& y);
/// The plain nest as a function of its own (params x, w, [b,] y), to record traces on.
tir::PrimFunc pointwiseConvPlainFunc(const PointwiseConvShape& s);

/// Whether annotation `knobs` (mi, po, oc_vecs) is one the sketch takes for this shape with
/// `registers` vector registers: oc_vecs the packing's V, mi·V + V + 1 registers.
bool pointwiseConvAnnotationFits(const PointwiseConvShape& s, const Knobs& knobs, int registers);
/// The sketch's plain choice for this shape: the tallest tile of at most 16 pixels that fits the
/// registers and divides P (a tail loop when only 1 would), weight groups outermost.
Knobs pointwiseConvDefaultKnobs(const PointwiseConvShape& s, int registers);
/// Every annotation that fits, po and mi (1..16) ascending.
std::vector<Knobs> pointwiseConvAnnotations(const PointwiseConvShape& s, int registers);
/// Applies the sketch with annotation `knobs` to a Schedule over the plain nest; throws
/// kiln::Error when it does not fit.
void applyPointwiseConvSketch(tir::Schedule& sched, const PointwiseConvShape& s, const Knobs& knobs, int registers);

/// The shape a pointwise conv2d_nchwc tuning key ("conv2d_nchwc:n=1,c=64,...,kh=1,kw=1,...:f32")
/// gets on a target of `lanes`-wide vectors when its weights are packed for `ocVecs` output
/// vectors per block (alter-layout's blocks); nullopt for a key of another convolution or a
/// packing the channels do not allow. Throws kiln::Error for a key that is not a conv2d_nchwc key.
std::optional<PointwiseConvShape> pointwiseConvShapeOfKey(const std::string& key, int64_t ocVecs, int lanes);
/// The sketch's trace for a pointwise conv2d_nchwc key and annotation (recorded on its plain
/// function); throws kiln::Error when the key is not pointwise or the annotation does not fit.
tir::Trace pointwiseConvTrace(const std::string& key, const Knobs& knobs, int lanes, int registers);

}  // namespace kiln::core::lower
