// The template-free schedule of direct convolutions, packed (conv2d_nchwc, groups 1 or depthwise:
// pointwise or any window, stride, padding and dilation) and plain NCHW (conv2d, any groups; see
// "NCHW" below): a plain loop nest and the sketch rule whose annotations the tuner searches, as
// core/lower/gemm_search.h has for the GEMMs: the only schedule of these convolutions. Untuned, a convolution
// takes the sketch's default annotation; a record of the retired hand-written builder's knobs, the annotation
// it stands for (convAnnotationOf). Packed pooling is the depthwise form without weights (see "pooling"
// below).
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
// The first step of the reduction starts from the bias, so no separate pass sets y. A strided
// 1×1 convolution keeps its rows: loops r < OH and p < OW after v, reading x[n, c, r·sh, p·sw, i].
//
// A window or padding splits the output into regions (TapRun): runs of rows and runs of columns
// whose windows reach the same taps inside the image — the interior, where every tap is inside,
// and the border rows and columns, each with the taps that do not fall on padding. Every region
// is a nest of its own whose tap loops cover exactly those taps, so no tap reads padding, no
// multiply is spent on it, and no load needs a condition:
//
//   for n, g:
//     for each run A of rows (rows r0 + r, taps kh0 + kh) and run B of columns (q0 + p, kw0 + kw):
//       for r, p, v, l, c, kh, kw, i:             (every name with the suffix _A_B)
//         y[n, g·V + v, r0 + r, q0 + p, l] = select(c = kh = kw = i = 0, b[…] or 0, y[…])
//           + x[n, c, (r0 + r)·sh + (kh0 + kh)·dh − ph, (q0 + p)·sw + (kw0 + kw)·dw − pw, i]
//             · w[g, c, kh0 + kh, kw0 + kw, i, v·L + l]
//
// A region whose windows lie wholly in the padding (a run with no taps, e.g. the border of a
// padded 1×1) has no reduction: for r, p, v, l: y[…] = b[…] or 0.
//
// An axis of one run adds no index to the names: a 3×3 with padding 1 has three runs of rows (the
// first row, the interior, the last) and three of columns, the interior region's loops being
// r_1_1, p_1_1, c_1_1, … . A depthwise convolution (one channel block per weight group, g its
// block) has the same regions without c, i and v: for r, p, l, kh, kw:
//   y[n, g, r0 + r, q0 + p, l] = select(kh = kw = 0, b[g·L + l] or 0, y[…])
//                                + x[n, g, …, l] · w[g, kh0 + kh, kw0 + kw, l]
//
// ## The sketch (annotation mi, po; oc_vecs fixed by the packing, an int8 nest's chosen)
//
//   reorder(g, p, v)                   pixels outside the block's vectors (po = 0: p, g, v;
//                                      strided 1×1: g, r, p, v or r, p, g, v)
//   split(p; mi, 1)                    row tile of mi pixels, a tail loop for the last ones
//   reorder(p_o, c, [kh, kw,] i, p_i, v, l)
//                                      (po = 0: p_o, g, c, …) the tile innermost
//   unroll(p_i) unroll(v)              the mi × V register tile of L-lane vectors
//   cache_write(c)                     accumulated in a local buffer (registers) over the reduction
//   dot4(j)                            int8 only: four bytes' products per step (see "Int8")
//   parallel(fuse(g, p_o) | …)         the outer data-parallel loop (strided 1×1: fuse(g, r) or r)
//   vectorize(l) (and l_r, l_w)        contiguous along l in y and w, a broadcast of x[…]
//
// A regioned convolution takes the same steps in every region with taps, along the region's
// longer axis (the rows of a border column): a tile of min(mi, extent) pixels, the rest of the
// axis a second tile of its own (the split's tail loop moved inside the reduction), no one-pixel
// loops. A region without taps stores the bias in vectors (serially when po = 0). po = 1 runs
// the weight groups g in parallel; po = 0 each region's outer loop.
//
// po = 1 keeps a weight block's output channels outermost (its weights stay in cache while the
// pixels stream by); po = 0 walks pixel tiles outermost. An annotation may add par_chunks, the
// parallel loop's launch granularity (chunks per thread, schedule.h parallelChunkChoices).
//
// ## Int8 (qnn.conv2d_nchwc, `bytes`)
//
// The same nests over u8 activations and i8 weights, summed exactly in i32: x [N, C/ib, H, W, ib]
// with ib a multiple of 4, so four input channels of a pixel are one 32-bit word, and the weight
// packed with those words innermost, w [O/L, C/4, KH, KW, L, 4]. The channel loop i counts words
// and a loop j < 4 inside it takes the word's bytes:
//
//   y[…] = select(c = kh = kw = i = j = 0, −b[region, o], y[…])
//          + i32(x[n, c, row, col, 4·i + j]) · i32(w[g·V + v, c·ib/4 + i, kh, kw, l, j])
//
// The packing has one output block per weight block, so V (oc_vecs) is the schedule's choice
// here: a weight group g is any V consecutive blocks.
//
// so the sketch's dot4(j), after cache_write, makes each step one dot4_u8i8 (vpdpbusd's lane) and
// vectorize(l) one vpdpbusd of L lanes with x's word broadcast. The sums start from minus the
// input zero point's share in the window's taps inside the image, zx·Σw over them: a product
// (x − zx)·w summed as x·w − zx·w over the taps a region reads (the padding reads x = zx and adds
// nothing). b holds that share per region (rows of regions in the order of the nest, then the
// output channels), computed by qnn-alter-layout (quantizedConvShares); the caller requantizes the
// sums where the kernel stores them. A depthwise int8 nest has no words: i32(x) · i32(w) per lane.
//
// ## NCHW (conv2d at O0–O2, and a convolution alter-layout leaves alone: `planar`)
//
// The same regions over unpacked buffers, x [N, C, H, W], w [O, C/G, KH, KW] (G groups), y [N, O,
// OH, OW], always in rows and columns. A weight group g is V = oc_vecs consecutive output channels
// of one convolution group (V divides O/G, or is 1); in each region:
//
//   for r, p, v, c < C/G, kh, kw:                 o = g·V + v, its group's input channels
//     y[n, o, r0 + r, q0 + p] = select(c = kh = kw = 0, b[o] or 0, y[…])
//       + x[n, (o / (O/G))·C/G + c, row, col] · w[o, c, kh0 + kh, kw0 + kw]
//
// The sketch (annotation mi, oc_vecs) vectorizes output columns, L = the target's lanes, in each
// region with taps: split(p; mi·L) and split(p_i; L), reorder(p_o, c, kh, kw, v, p_i_o, p_i_i),
// unroll(v) unroll(p_i_o), cache_write(c), vectorize(p_i_i): a register tile of V channels × mi
// vectors, the weight broadcast, the input a contiguous (stride 1) or strided load. The split's
// tail loop is a tile of its own, vectorized in halving widths, and so is a region narrower than
// mi·L. A region one column wide (a border column) is a scalar tile of up to 8 rows × V channels
// instead. The weight groups run in parallel (with the images: fuse(n, g)), else each region's rows.
// The int8 form (qnn.conv2d at O0–O2: u8 x, i8 w) sums (i32(x) − zx) · i32(w) in i32 from 0, zx
// the input zero point: padding reads zx, so the taps it skips add nothing. Its caller requantizes
// the sums where the kernel stores them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/lower/schedule_config.h"
#include "core/tir/schedule.h"
#include "core/tir/trace.h"

namespace kiln::core::lower {

/// Consecutive outputs along one axis (rows or columns) whose windows read the same taps inside
/// the image: outputs [first, first + count), taps [lo, hi) of the window.
struct TapRun {
  int64_t first = 0, count = 0, lo = 0, hi = 0;
  /// Outputs whose window lies wholly in the padding.
  bool noTaps() const { return hi <= lo; }
  bool operator==(const TapRun&) const = default;
};

/// The runs of `outputs` outputs of a window of `k` taps (stride, padding before, dilation) over
/// `in` inputs, first to last; a run for every change of the taps that stay inside.
std::vector<TapRun> tapRuns(int64_t outputs, int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil);

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
  /// Depthwise (groups = channels): weight blocks are channel blocks (groups = C/L, V = 1, cb =
  /// ib = 1), input x [N, C/L, H, W, L], weight w [C/L, 1, KH, KW, 1, L]; no channel reduction.
  bool depthwise = false;
  /// Each image n its own weights (the batched GEMM of a Winograd convolution, n its position):
  /// weight w [O/ob, N, C/ib, ib, ob], output pixel-major y [P, N, O/L, L] (pointwise only); n
  /// joins the parallel loop.
  bool ownWeights = false;
  /// A pooling window (depthwise regions, no weight, no bias): max keeps the largest tap (−inf
  /// before the first), sum adds them (an average's division is its lowering's epilogue).
  enum class Pool { None, Max, Sum };
  Pool pool = Pool::None;
  /// u8 × i8 products summed in i32 (qnn.conv2d_nchwc; see "Int8" above): the bias is the
  /// zero point's share of each region, [regions(), O], subtracted at the reduction's start.
  bool bytes = false;
  /// A plain NCHW conv2d (see "NCHW" above): x [N, C, H, W], w [O, C/G, KH, KW], y [N, O, OH,
  /// OW]; lanes 1, weight groups of V = vectors output channels, cb = C/G input channels per
  /// output, convGroups = G, and the sketch's vectors of columnLanes output columns.
  bool planar = false;
  int64_t convGroups = 1, columnLanes = 1;
  /// A planar int8 nest's input zero point (qnn.conv2d: `bytes`, no bias): it sums
  /// (i32(x) − zeroPoint) · i32(w) over the taps inside the image into i32.
  int64_t zeroPoint = 0;
  bool windowed() const { return kh != 1 || kw != 1; }
  bool padded() const { return padH != 0 || padW != 0; }
  /// Nested by runs of rows and columns whose taps inside the image agree (see the file comment).
  bool regioned() const { return windowed() || padded() || depthwise || planar; }
  /// Elements of the input (a flat row of P pixels when not rowed) and of the packed weight.
  int64_t inputElements() const {
    if (planar) return n * convGroups * cb * inHeight * inWidth;
    const int64_t in = rowed() ? inHeight * inWidth : pixels;
    return depthwise ? n * groups * in * lanes : n * cb * in * ib;
  }
  int64_t weightElements() const {
    if (pool != Pool::None) return 0;
    return (ownWeights ? n : 1) * groups * cb * kh * kw * ib * vectors * lanes;
  }
  /// Rows × columns (loops r, p) rather than one flat row of pixels.
  bool rowed() const { return strideH != 1 || strideW != 1 || regioned(); }
  /// The runs of output rows and of output columns (one run each without a window or padding).
  std::vector<TapRun> rowRuns() const;
  std::vector<TapRun> columnRuns() const;
  /// Whether some outputs' windows lie wholly in the padding (a run without taps).
  bool beyondReach() const;
  /// Regions of the nest: runs of rows × runs of columns.
  int64_t regions() const {
    return static_cast<int64_t>(rowRuns().size()) * static_cast<int64_t>(columnRuns().size());
  }
  double flops() const {
    return 2.0 * static_cast<double>(n * rows * pixels) * static_cast<double>(cb * ib * kh * kw) *
           static_cast<double>(groups * vectors * lanes);
  }
};

/// The shape of a conv2d_nchwc kernel when the sketch takes it (groups 1 or depthwise, NCHW[x]c
/// input and output, any window, stride, padding and dilation); nullopt otherwise. `xs`, `ws`, `ys`: the
/// input, packed weight and output shapes; `stride`, `padding`, `dilation`: the kernel's (height,
/// width) pairs.
std::optional<ConvSketchShape> convSketchShape(const Shape& xs, const Shape& ws, const Shape& ys,
                                               const std::vector<int64_t>& stride,
                                               const std::vector<int64_t>& padding,
                                               const std::vector<int64_t>& dilation, int64_t groups,
                                               bool bias);

/// The shape of a plain NCHW conv2d kernel (`planar`) whose weight groups are `vectors` output
/// channels, on a target of `lanes`-wide vectors: `xs` [N, C, H, W], `ws` [O, C/groups, KH, KW],
/// `ys` [N, O, OH, OW]; nullopt when they disagree with each other or the attributes, or V divides
/// neither the output channels of a group nor is 1.
std::optional<ConvSketchShape> planarConvSketchShape(const Shape& xs, const Shape& ws, const Shape& ys,
                                                     const std::vector<int64_t>& stride,
                                                     const std::vector<int64_t>& padding,
                                                     const std::vector<int64_t>& dilation, int64_t groups,
                                                     bool bias, int64_t vectors, int lanes);

/// The planar nest a kernel builds: `shapeFor`'s nest (planarConvSketchShape for the kernel,
/// given V) with the weight groups of record `tuned` when its annotation fits them, else with
/// those of the default annotation `defaults` (which must have a nest).
ConvSketchShape planarShapeOfRecord(const std::function<std::optional<ConvSketchShape>(int64_t)>& shapeFor,
                                    const Knobs* tuned, const Knobs& defaults, int registers);

/// The shape of a plain NCHW qnn.conv2d kernel (`planar`, `bytes`): u8 `xs` [N, C, H, W] with input
/// zero point `zeroPoint`, i8 `ws` [O, C/groups, KH, KW], i32 sums `ys` [N, O, OH, OW]; as
/// planarConvSketchShape otherwise.
std::optional<ConvSketchShape> quantizedPlanarConvSketchShape(
    const Shape& xs, const Shape& ws, const Shape& ys, const std::vector<int64_t>& stride,
    const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation, int64_t groups,
    int64_t zeroPoint, int64_t vectors, int lanes);

/// The shape of a qnn.conv2d_nchwc kernel (`bytes`) whose weight groups are `vectors` output
/// blocks (V; depthwise 1): `xs` u8 [N, C/ib, H, W, ib], `ws` i8 [O/L, C/4, KH, KW, L, 4]
/// (depthwise [C/L, 1, KH, KW, L, 1]), `ys` [N, O/L, OH, OW, L]; nullopt when they disagree with
/// each other or the attributes, or V does not divide the blocks.
std::optional<ConvSketchShape> quantizedConvSketchShape(const Shape& xs, const Shape& ws, const Shape& ys,
                                                        const std::vector<int64_t>& stride,
                                                        const std::vector<int64_t>& padding,
                                                        const std::vector<int64_t>& dilation, int64_t groups,
                                                        int64_t vectors = 1);

/// The weight group an untuned int8 convolution takes (`s` with V = 1): two output blocks when
/// the blocks pair up (not depthwise), else one.
int64_t quantizedConvDefaultVectors(const ConvSketchShape& s);

/// The input zero point's share in each region of an int8 convolution's output, the bias of its
/// nest: for each run of output rows and of columns (tapRuns over the height, then the width;
/// one each for a convolution without window or padding) and each output channel o, zx · Σ w[o, c,
/// kh, kw] over the input channels and the taps inside the image, as i32 [regions, O]. `w` is the
/// unpacked weight [O, C/groups, KH, KW], `in` the input's (height, width), the other pairs the
/// attributes.
std::vector<int32_t> quantizedConvShares(const int8_t* w, const Shape& ws, int64_t zx,
                                         const std::vector<int64_t>& in, const std::vector<int64_t>& stride,
                                         const std::vector<int64_t>& padding,
                                         const std::vector<int64_t>& dilation);

/// The shape of a pooling window over packed x [N, C/L, H, W, L] → y [N, C/L, OH, OW, L] as a
/// depthwise nest (`max`, else a sum): `kernel`, `stride`, `padding`, `dilation` (height, width)
/// pairs. OH and OW may be any count the windows reach (ceil mode included: a window hanging past
/// the input has the taps inside). nullopt when the buffers are not such a pair.
std::optional<ConvSketchShape> poolSketchShape(const Shape& xs, const Shape& ys, bool max,
                                               const std::vector<int64_t>& kernel,
                                               const std::vector<int64_t>& stride,
                                               const std::vector<int64_t>& padding,
                                               const std::vector<int64_t>& dilation);

// ---- pooling (ops_pool.cpp) ----------------------------------------------------------------------
// Packed pooling (f32 max_pool2d, avg_pool2d, and adaptive_avg_pool2d whose windows are uniform:
// H and W multiples of the output's; integer max_pool2d) is this file's depthwise window nest without
// weights, scheduled by the same sketch and annotations (mi, po, par_chunks). Its tuning key is "pool:" + its
// group's workload key (lower.h), rebuilt as a task graph by nest_search.h nestTaskGraph.

/// max_pool2d, avg_pool2d or adaptive_avg_pool2d: the ops that may have a window nest.
bool isWindowPool(const std::string& op);
/// The window nest of pooling op `op` (attributes `attrs`) from packed input shape `xs` to `ys`;
/// nullopt when the op has none (another op or layout, an adaptive pool of uneven windows).
std::optional<ConvSketchShape> poolSketchShapeOf(const std::string& op, const Attrs& attrs, const Shape& xs,
                                                 const Shape& ys);
/// "pool:" + `workloadKey`.
std::string poolTuneKey(const std::string& workloadKey);
/// The window nest of a pool key's pooling op; throws kiln::Error (InvalidInput) when `key` is
/// not a pool key or its pooling has no window nest.
ConvSketchShape poolSketchShapeOfKey(const std::string& key);
/// The trace annotation `knobs` records on a pool key's window nest (what a tuning record of it
/// stores); throws kiln::Error (InvalidInput) for a bad key or an annotation that does not fit.
tir::Trace poolSketchTrace(const std::string& key, const Knobs& knobs, int registers);

/// The plain nest over the kernel's buffers (b null without bias; w null for a pool); see the file
/// comment. A pool's regions update y[…] = max(select(kh = kw = 0, −inf, y[…]), x[…]) or
/// select(kh = kw = 0, 0, y[…]) + x[…].
tir::Stmt convSketchPlainNest(const ConvSketchShape& s, const tir::Buffer& x, const tir::Buffer& w,
                                 const tir::Buffer& b, const tir::Buffer& y);
/// The plain nest as a function of its own (params x, w, [b,] y; a pool's x, y), to record traces
/// on.
tir::PrimFunc convSketchPlainFunc(const ConvSketchShape& s);

/// Whether annotation `knobs` (mi, po, oc_vecs, optionally par_chunks) is one the sketch takes
/// for this shape with `registers` vector registers: oc_vecs the packing's V, at most mi·V
/// accumulator vectors (schedule.h accumulatorBudget: 28 of 32 registers, 13 of 16), par_chunks
/// one of schedule.h parallelChunkChoices (the parallel loop's launch granularity).
bool convSketchAnnotationFits(const ConvSketchShape& s, const Knobs& knobs, int registers);
/// The sketch's plain choice for this shape: the tallest tile of at most 16 pixels (a pool's 8)
/// that fits the registers and divides P (a tail loop when only 1 would), weight groups outermost
/// when the weights are at least as large as the input, the nest is regioned or int8, else pixel
/// tiles.
Knobs convSketchDefaultKnobs(const ConvSketchShape& s, int registers);
/// Every annotation that fits, po and mi (1..16) ascending.
std::vector<Knobs> convSketchAnnotations(const ConvSketchShape& s, int registers);
/// The annotation a record of the retired hand-written builder's knobs (oc_vecs, ow_block,
/// oc_outer, par_chunks; no mi) stands for: its loop order oc_outer as po (the default's when it
/// has none; always 1 in a regioned nest, whose po = 0 is a parallel loop per region), as mi its
/// ow_block output columns, or the widest tile below that fits the registers, and its parallel
/// granularity. Its unroll, flatten and vec_lanes have no counterpart and are
/// dropped. A sketch annotation is returned as it is; nullopt when the knobs have no tile or
/// another packing.
std::optional<Knobs> convAnnotationOf(const ConvSketchShape& s, const Knobs& knobs, int registers);
/// Applies the sketch with annotation `knobs` to a Schedule over the plain nest; throws
/// kiln::Error when it does not fit.
void applyConvSketch(tir::Schedule& sched, const ConvSketchShape& s, const Knobs& knobs, int registers);

/// The shape a conv2d_nchwc tuning key ("conv2d_nchwc:n=1,c=64,...,kh=3,kw=3,...:f32") gets on a
/// target of `lanes`-wide vectors when its weights are packed for `ocVecs` output vectors per
/// block (alter-layout's blocks); nullopt for a grouped convolution or a packing the channels do
/// not allow. An int8 key (":u8", qnn.conv2d_nchwc) names its blocks (ib, ob: the input's and the
/// output's, qnn-alter-layout's); `ocVecs` groups its weight blocks (quantizedConvSketchShape). Throws
/// kiln::Error for a key that is not a conv2d_nchwc key.
std::optional<ConvSketchShape> convSketchShapeOfKey(const std::string& key, int64_t ocVecs, int lanes);
/// The sketch's trace for a conv2d_nchwc key and annotation (recorded on its plain function);
/// throws kiln::Error when the key has no sketch or the annotation does not fit.
tir::Trace convSketchTrace(const std::string& key, const Knobs& knobs, int lanes, int registers);

}  // namespace kiln::core::lower
