// Winograd F(m×m, 3×3) convolutions (conv2d_winograd_nchwc) as a plain loop nest and a sketch,
// as core/lower/conv_search.h has for direct ones: the transforms, the plain nest, and the rule whose
// annotations (mi, po) the tuner searches. A configuration with "mi" and "algo" = m is a sketch
// annotation; untuned, the kernel is the sketch with its default annotation. There is no other
// schedule: a record of the former hand-written builder's knobs (ow_block, oc_outer; no "mi") is
// read as the annotation it stands for (winogradAnnotationOf).
//
// ## The plain nest
//
// Input x [N, C/ib, H, W, ib], transformed filter u [O/ob, α, α, C, ob] (ob = V·L), output y
// [N, O/L, OH, OW, L], optional bias b [O]; T = N·⌈OH/m⌉·⌈OW/m⌉ output tiles, α = m + 2. Two
// scratch buffers hold the transformed input v [α², C/ib, T, ib] and the products M [T, α², O/L, L]
// (tile-major: a block of tiles' products are contiguous):
//
//   for n_ti_icb, tj:                   input transform (a micro-kernel: Bᵀ d B of one α×α patch of
//     v[ξν, icb, t, :] = (Bᵀ d B)[ξ, ν]  ib-lane vectors, reads outside the input are zeros)
//   for n, g, v, p, l, c, i:            the batched GEMM: α² pointwise convolutions, each with its
//     M[p, n, g·V + v, l] = select(c = 0 ∧ i = 0, 0, M[…])      own weights (n the position ξν,
//                           + v[n, c, p, i] · u[g, n, c·ib + i, v·L + l]    p the tile)
//   for blk_o, t_o:                     output transform (a micro-kernel: Aᵀ M A of one tile, L
//     y[tile t_o of block blk_o] = Aᵀ M A + b        lanes, stores inside the output only)
//
// ## The sketch (annotation mi, po; algo = m and oc_vecs = V fixed by alter-layout's weight)
//
// When mi divides T (winogradSketchMerges), as the retired hand-written builder did:
//
//   reorder(p, n, g, v)                 tile blocks outermost (po = 1: g, p, n, v — weight
//   split(p; mi, 1)                     groups, then tile blocks)
//   reorder(p_o, n, g, c, i, p_i, v, l) (po = 1: p_o, n, c, i, p_i, v, l) for each position, the
//   unroll(p_i) unroll(v)               mi × V register tile over the reduction
//   cache_write(c)
//   reorder(t_o, blk_o)                 the output transform by tile blocks too (po = 1: split
//   split(t_o; mi, 1)                   blk_o by V and merge its groups with g first)
//   merge(p_o, t_o_o)                   each block's output transform right after its GEMM, while
//   store_at(wino_m, p_o)               its products are in cache, in a buffer of one block's
//                                       products (the window of M one iteration touches)
//   parallel(p_o)                       (po = 1: parallel(fuse(g, p_o)))
//   vectorize(l)
//
// Otherwise the GEMM takes conv_search.h's pointwise sketch (a tail loop after the tile blocks)
// with the positions in its parallel loop, and the output transform runs after it, its blocks in
// parallel. The input transform runs its outer loop in parallel.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/lower/conv_search.h"
#include "core/lower/schedule_config.h"
#include "core/tir/schedule.h"
#include "core/tir/trace.h"

namespace kiln::core::lower {

/// A Winograd convolution's sizes, read from its buffers.
struct WinogradShape {
  int64_t n = 0, cb = 0, h = 0, w = 0, ib = 0, c = 0;  // input [N, C/ib, H, W, ib]
  int64_t og = 0, ob = 0, lanes = 0, ocb = 0;          // u [O/ob, α, α, C, ob]; output block L
  int64_t oh = 0, ow = 0, ph = 0, pw = 0;
  int64_t th = 0, tw = 0, tiles = 0;  // tile rows, tile columns, T
  int m = 0, alpha = 0, vecs = 1;
  bool bias = false;
  int64_t positions() const { return int64_t{alpha} * alpha; }
  /// The batched GEMM as α² pointwise convolutions of T pixels with their own weights.
  ConvSketchShape gemm() const;
};

/// The shape of a conv2d_winograd_nchwc kernel (`xs`, `us`, `ys`: input, transformed filter and
/// output shapes; tile m; padding (height, width)); nullopt when the buffers disagree.
std::optional<WinogradShape> winogradShape(const Shape& xs, const Shape& us, const Shape& ys, int m,
                                           const std::vector<int64_t>& padding, bool bias);
/// The shape a conv2d_nchwc tuning key gets as F(m×m, 3×3) on `lanes`-wide vectors with the filter
/// packed for `ocVecs` output vectors per block; nullopt when the convolution is not Winograd-eligible
/// or the channels do not allow the packing.
std::optional<WinogradShape> winogradShapeOfKey(const std::string& key, int m, int64_t ocVecs, int lanes);

/// The input transform: `outer` over (image, tile row, channel block), tile columns inside; each
/// step stores the α² transformed vectors of one patch into v [α², C/ib, T, ib].
tir::Stmt winogradInputTransform(const WinogradShape& s, const tir::Buffer& x, const tir::Buffer& v,
                                 tir::ForKind outer);
/// Y = Aᵀ M A for output tile `t` (L lanes of one output block): `m(k)` is position k's vector;
/// adds `bias` when defined; `store(n, oh, ow, value)` stores one output, guarded when the tile
/// is partial.
tir::Stmt winogradOutputTile(const WinogradShape& s, const tir::Expr& t, const std::function<tir::Expr(int)>& m,
                             const tir::Expr& bias,
                             const std::function<tir::Stmt(const tir::Expr&, const tir::Expr&, const tir::Expr&,
                                                           const tir::Expr&)>& store);

/// The plain nest over the kernel's buffers (b null without bias); see the file comment.
tir::Stmt winogradPlainNest(const WinogradShape& s, const tir::Buffer& x, const tir::Buffer& u,
                            const tir::Buffer& b, const tir::Buffer& y);
/// The plain nest as a function of its own (params x, u, [b,] y), to record traces on.
tir::PrimFunc winogradPlainFunc(const WinogradShape& s);

/// Whether `knobs` (algo, mi, po, oc_vecs) is a sketch annotation of this shape.
bool winogradSketchFits(const WinogradShape& s, const Knobs& knobs, int registers);
/// The sketch's plain choice: the tallest tile of at most 16 tiles that fits the registers (and
/// whose block's products fit 64 KB) and merges, if at least half the tallest that fits (weight
/// groups outermost when the filter is the larger operand); else convSketchDefaultKnobs of the
/// GEMM, with the algorithm.
Knobs winogradSketchDefaultKnobs(const WinogradShape& s, int registers);
/// The annotation a record of the retired hand-written builder's knobs (algo, oc_vecs, ow_block,
/// oc_outer, par_chunks; no mi) stands for: its loop order oc_outer as po (the default's order
/// when nothing fits with it), as mi the tile nearest to its ow_block output tiles that merges
/// (the builder transformed every block's products while they were in cache), else ow_block
/// itself, and its launch granularity.
/// A sketch annotation is returned as it is; nullopt when the knobs have no tile or nothing fits.
std::optional<Knobs> winogradAnnotationOf(const WinogradShape& s, const Knobs& knobs, int registers);
/// Every annotation that fits, po and mi ascending.
std::vector<Knobs> winogradSketchAnnotations(const WinogradShape& s, int registers);
/// Whether the annotation's tile blocks take the output transform of their tiles into their
/// loop (merge): mi divides the tiles and there are at least two blocks (po = 1: weight groups
/// × blocks) to run in parallel. Otherwise the transform runs after the whole GEMM.
bool winogradSketchMerges(const WinogradShape& s, const Knobs& knobs);
/// Applies the sketch to a Schedule over the plain nest; throws kiln::Error when it does not fit.
void applyWinogradSketch(tir::Schedule& sched, const WinogradShape& s, const Knobs& knobs, int registers);
/// The sketch's trace for a conv2d_nchwc key and a Winograd annotation (recorded on its plain
/// function); throws kiln::Error when the key has no such sketch.
tir::Trace winogradSketchTrace(const std::string& key, const Knobs& knobs, int lanes, int registers);

}  // namespace kiln::core::lower
