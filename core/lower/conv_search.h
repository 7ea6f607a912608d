// The template-free schedule of direct packed convolutions (conv2d_nchwc, groups 1: pointwise or
// any window, stride, padding and dilation): a plain loop nest and the sketch rule whose
// annotations the tuner searches, as core/lower/gemm_search.h has for the GEMMs. A configuration
// with "mi" is a sketch annotation; without it the hand-written builder of ops_conv_packed.cpp
// stays the kernel.
//
// ## The plain nest
//
// Input x [N, C/ib, H, W, ib], weight w [O/ob, C/ib, KH, KW, ib, ob] with ob = V·L (V output
// vectors per weight block: the oc_vecs knob, which alter-layout packs by), output y [N, O/L, OH,
// OW, L], optional bias b [O]. A pointwise convolution at stride 1 walks its P = H·W pixels as
// one row:
//
//   for n, g < O/ob, v < V, p < P, l < L, c < C/ib, i < ib:
//     y[n, g·V + v, p, l] = select(c = 0 ∧ i = 0, b[(g·V + v)·L + l] or 0, y[…])
//                           + x[n, c, p, i] · w[g, c, i, v·L + l]
//
// The first step of the reduction starts from the bias, so no separate pass sets y. Every other
// convolution keeps its rows: loops r < OH and p < OW after v, and a window adds the reduction
// loops kh < KH and kw < KW after c, reading x[n, c, r·sh + kh·dh, p·sw + kw·dw, i] (the start
// condition then also asks kh = kw = 0). A padded convolution reads a zero-padded copy xp of its
// input instead, made by a first nest in the same kernel (a local buffer of the rows and columns
// the windows reach, zero outside the image):
//
//   for xn, xc, xh, xw, xi: xp[xn, xc, xh, xw, xi] = inside(xh − ph, xw − pw) ? x[…] : 0
//
// so the convolution's nest holds no condition and its loads stay broadcasts from memory. (TVM's
// x86 NCHWc convolutions stage their padded input the same way.)
//
// ## The sketch (annotation mi, po; oc_vecs fixed by the packing)
//
//   reorder(g, p, v)                   pixels outside the block's vectors (po = 0: p, g, v; with
//                                      rows: g, r, p, v or r, p, g, v)
//   split(p; mi, 1)                    row tile of mi pixels, a tail loop for the last ones
//   reorder(p_o, c, [kh, kw,] i, p_i, v, l)
//                                      (po = 0: p_o, g, c, …) the tile innermost
//   unroll(p_i) unroll(v)              the mi × V register tile of L-lane vectors
//   cache_write(c)                     accumulated in a local buffer (registers) over the reduction
//   parallel(fuse(g, p_o) | …)         the outer data-parallel loop (rows: fuse(g, r) or r)
//   vectorize(l) (and l_r, l_w)        contiguous along l in y and w, a broadcast of x[…]
//   padded: parallel(fuse(fuse(xn, xc), xh)), vectorize(xi)   the copy, row-parallel
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

/// A direct packed convolution's sizes, read from its buffers.
struct ConvSketchShape {
  int64_t n = 1, cb = 1, ib = 1;  // input [N, C/ib, H, W, ib]
  int64_t pixels = 1;             // the row the sketch tiles: P = H·W (pointwise, stride 1), else OW
  int64_t groups = 1, vectors = 1, lanes = 1;  // weight blocks O/ob, V = ob / L, L
  bool bias = false;
  int64_t rows = 1;                        // output rows OH when the nest keeps rows, else 1
  int64_t strideH = 1, strideW = 1;
  int64_t inHeight = 1, inWidth = 1;       // H, W
  int64_t kh = 1, kw = 1;                  // the window
  int64_t padH = 0, padW = 0;              // zero padding before the first row and column
  int64_t dilH = 1, dilW = 1;
  bool windowed() const { return kh != 1 || kw != 1; }
  bool padded() const { return padH != 0 || padW != 0; }
  /// Rows × columns (loops r, p) rather than one flat row of pixels.
  bool rowed() const { return strideH != 1 || strideW != 1 || windowed() || padded(); }
  /// The padded copy's rows and columns: those the windows reach.
  int64_t paddedHeight() const { return (rows - 1) * strideH + (kh - 1) * dilH + 1; }
  int64_t paddedWidth() const { return (pixels - 1) * strideW + (kw - 1) * dilW + 1; }
  double flops() const {
    return 2.0 * static_cast<double>(n * rows * pixels) * static_cast<double>(cb * ib * kh * kw) *
           static_cast<double>(groups * vectors * lanes);
  }
};

/// The shape of a conv2d_nchwc kernel when the sketch takes it (groups 1, NCHW[x]c input and
/// output, any window, stride, padding and dilation); nullopt otherwise. `xs`, `ws`, `ys`: the
/// input, packed weight and output shapes; `stride`, `padding`, `dilation`: the kernel's (height,
/// width) pairs.
std::optional<ConvSketchShape> convSketchShape(const Shape& xs, const Shape& ws, const Shape& ys,
                                               const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                                               const std::vector<int64_t>& dilation, int64_t groups, bool bias);

/// The plain nest over the kernel's buffers (b null without bias); see the file comment.
tir::Stmt convSketchPlainNest(const ConvSketchShape& s, const tir::Buffer& x, const tir::Buffer& w,
                                 const tir::Buffer& b, const tir::Buffer& y);
/// The plain nest as a function of its own (params x, w, [b,] y), to record traces on.
tir::PrimFunc convSketchPlainFunc(const ConvSketchShape& s);

/// Whether annotation `knobs` (mi, po, oc_vecs) is one the sketch takes for this shape with
/// `registers` vector registers: oc_vecs the packing's V, at most the builder's accumulator
/// budget of mi·V vectors (schedule.h accumulatorBudget: 28 of 32 registers, 13 of 16).
bool convSketchAnnotationFits(const ConvSketchShape& s, const Knobs& knobs, int registers);
/// The sketch's plain choice for this shape: the tallest tile of at most 16 pixels that fits the
/// registers and divides P (a tail loop when only 1 would), weight groups outermost.
Knobs convSketchDefaultKnobs(const ConvSketchShape& s, int registers);
/// Every annotation that fits, po and mi (1..16) ascending.
std::vector<Knobs> convSketchAnnotations(const ConvSketchShape& s, int registers);
/// Applies the sketch with annotation `knobs` to a Schedule over the plain nest; throws
/// kiln::Error when it does not fit.
void applyConvSketch(tir::Schedule& sched, const ConvSketchShape& s, const Knobs& knobs, int registers);

/// The shape a conv2d_nchwc tuning key ("conv2d_nchwc:n=1,c=64,...,kh=3,kw=3,...:f32") gets on a
/// target of `lanes`-wide vectors when its weights are packed for `ocVecs` output vectors per
/// block (alter-layout's blocks); nullopt for a grouped convolution or a packing the channels do
/// not allow. Throws kiln::Error for a key that is not a conv2d_nchwc key.
std::optional<ConvSketchShape> convSketchShapeOfKey(const std::string& key, int64_t ocVecs, int lanes);
/// The sketch's trace for a conv2d_nchwc key and annotation (recorded on its plain function);
/// throws kiln::Error when the key has no sketch or the annotation does not fit.
tir::Trace convSketchTrace(const std::string& key, const Knobs& knobs, int lanes, int registers);

}  // namespace kiln::core::lower
