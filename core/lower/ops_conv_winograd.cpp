// Lowering of conv2d_winograd_nchwc: a 3×3, stride-1 convolution in the packed layout as
// Winograd F(m×m, 3×3), m = 2 or 4 (α = m + 2), and the transform matrices it uses.
//
// Layouts. Input x [N, C/ib, H, W, ib]; transformed filter u [O/ob, α, α, C, ob] with
// ob = V·L (V output vectors of L lanes), u[og, ξ, ν, c, :] = (G g Gᵀ)[ξ, ν] for the output
// channels og·ob .. og·ob + ob − 1 (made at compile time by alter-layout, so the GEMM reads one
// position's filter as a contiguous stream of ob-wide rows); output y [N, O/L, OH, OW, L].
// Output tiles are m×m, T = N · ⌈OH/m⌉ · ⌈OW/m⌉ of them; those at the bottom and right border
// may be partial (their missing outputs are computed and not stored).
//
// The kernel is winograd_search.h's plain nest (input transform, batched GEMM, output transform)
// scheduled by its sketch: the default annotation untuned, else a record's trace or annotation.
// A record of the hand-written builder this replaced (knobs ow_block, oc_outer, unroll,
// par_chunks; no mi) is read as the annotation it stands for (winogradAnnotationOf: its tile of
// ow_block output tiles, its loop order, its launch granularity); unroll has no counterpart and
// is dropped.
//
// Transform matrices: Toom-Cook from the points 0, ±1 (m = 2) and 0, ±1, 1/2, −2 (m = 4), plus
// ∞. Aᵀ[i][j] = pⱼⁱ; Bᵀ[j] = coefficients of Πₗ≠ⱼ (x − pₗ) (of Πₗ (x − pₗ) for ∞); G[j][k] =
// pⱼᵏ / Πₗ≠ⱼ (pⱼ − pₗ) (row ∞ picks g₂). With these points Aᵀ and Bᵀ are dyadic rationals,
// exact in f32. The points set the rounding error of the f32 transforms: simulated on O(1) data
// (one layer, 256 to 2048 input channels, against a double-precision direct convolution), the
// pair 1/2, −2 gives a 2.4× smaller worst error and a 1.5× smaller RMS error than ±1/2 or the
// textbook ±2 (F(2×2) stays near the direct kernel's error; F(4×4) is still ~8× above it). Stacked
// 3×3 layers add their errors up, so the deepest ResNets need the better pair to stay within 1e-3.
#include <algorithm>
#include <cmath>
#include <optional>

#include "core/lower/lower_internal.h"
#include "core/lower/schedule.h"
#include "core/lower/schedule_config.h"
#include "core/lower/winograd_search.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

namespace {

/// Coefficients (lowest degree first) of Π (x − p) over `roots`.
std::vector<double> polyFromRoots(const std::vector<double>& roots) {
  std::vector<double> c{1.0};
  for (double r : roots) {
    std::vector<double> next(c.size() + 1, 0.0);
    for (size_t i = 0; i < c.size(); ++i) {
      next[i + 1] += c[i];
      next[i] -= r * c[i];
    }
    c = std::move(next);
  }
  return c;
}

WinogradMatrices buildMatrices(int m, const std::vector<double>& points) {
  constexpr int r = 3;
  WinogradMatrices w;
  w.m = m;
  w.alpha = m + r - 1;
  int a = w.alpha, finite = a - 1;
  KILN_ASSERT(static_cast<int>(points.size()) == finite, "winogradMatrices: wrong number of points");
  w.at.assign(static_cast<size_t>(m * a), 0.0);
  w.g.assign(static_cast<size_t>(a * r), 0.0);
  w.bt.assign(static_cast<size_t>(a * a), 0.0);
  for (int j = 0; j < finite; ++j) {
    double p = points[static_cast<size_t>(j)];
    std::vector<double> others;
    double scale = 1.0;
    for (int l = 0; l < finite; ++l) {
      if (l == j) continue;
      others.push_back(points[static_cast<size_t>(l)]);
      scale *= p - points[static_cast<size_t>(l)];
    }
    for (int i = 0; i < m; ++i) w.at[static_cast<size_t>(i * a + j)] = std::pow(p, i);
    for (int k = 0; k < r; ++k) w.g[static_cast<size_t>(j * r + k)] = std::pow(p, k) / scale;
    std::vector<double> basis = polyFromRoots(others);
    for (size_t i = 0; i < basis.size(); ++i) w.bt[static_cast<size_t>(j * a) + i] = basis[i];
  }
  w.at[static_cast<size_t>((m - 1) * a + finite)] = 1.0;
  w.g[static_cast<size_t>(finite * r + r - 1)] = 1.0;
  std::vector<double> full = polyFromRoots(points);
  for (size_t i = 0; i < full.size(); ++i) w.bt[static_cast<size_t>(finite * a) + i] = full[i];
  return w;
}

}  // namespace

const WinogradMatrices& winogradMatrices(int m) {
  static const WinogradMatrices f2 = buildMatrices(2, {0.0, 1.0, -1.0});
  static const WinogradMatrices f4 = buildMatrices(4, {0.0, 1.0, -1.0, 0.5, -2.0});
  KILN_ASSERT(m == 2 || m == 4, "winogradMatrices: tile must be 2 or 4, got " + std::to_string(m));
  return m == 2 ? f2 : f4;
}

bool winogradEligible(const ConvGeometry& g) {
  return g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.groups == 1 &&
         g.ph >= 0 && g.ph <= 2 && g.pw >= 0 && g.pw <= 2 && g.outHeight() > 0 && g.outWidth() > 0;
}

int packedConvAlgo(const ConvGeometry& g, const LowerOptions& options) {
  (void)options;
  // Measured on this machine (Zen 4, AVX-512, tests/bench conv_algo*, one thread, CPU time):
  // F(4×4, 3×3) runs ResNet-18's 56×56×64, 28×28×128 and 14×14×256 layers 2.2-3.2× faster than
  // the direct kernel (which is at ~98 % of the FMA peak); on 7×7×512 (4 tiles of 4×4) it only
  // breaks even while F(2×2, 3×3) (16 tiles) gains 1.1-1.4×. Few channels leave the transforms
  // dominant: elsewhere the direct kernel stays the default.
  if (!winogradEligible(g) || g.c < 32 || g.o < 32) return 0;
  int64_t outputs = g.outHeight() * g.outWidth();
  if (outputs >= 196) return 4;
  if (outputs >= 49 && g.c >= 256) return 2;
  return 0;
}

Stmt lowerConv2dWinogradNchwc(const OpContext& ctx) {
  ctx.requireFloat();
  if (ctx.inTypes[0].dtype != DType::Float32) ctx.unsupported("dtype other than f32");
  const Shape &xs = ctx.inTypes[0].shape, &us = ctx.inTypes[1].shape, &ys = ctx.outTypes[0].shape;
  const int m = static_cast<int>(ctx.attrs.getInt("tile", 0));
  std::vector<int64_t> pad = ctx.attrs.getPair("padding", 0);
  if (pad[0] > 2 || pad[1] > 2) ctx.unsupported("Winograd convolution with padding above 2");
  std::optional<WinogradShape> shape = winogradShape(xs, us, ys, m, pad, ctx.in.size() == 3);
  if (!shape) ctx.unsupported("Winograd convolution whose buffers disagree with its tile");
  const WinogradShape& s = *shape;

  // The sketch (winograd_search.h) of a record for this key made for the same algorithm and
  // packing: its trace, its annotation, or the annotation a record of the former hand-written
  // builder's knobs stands for; else (untuned, or a record that does not fit) the default
  // annotation.
  ctx.tuneKey = tuneKeyOf(ctx.op, ctx.attrs, ctx.inTypes, ctx.outTypes);
  const Knobs* tuned = ctx.tunedKnobs(ctx.tuneKey);
  if (tuned && (knob(*tuned, "algo", 0) != s.m || knob(*tuned, "oc_vecs", s.vecs) != s.vecs)) tuned = nullptr;
  const int registers = ctx.options.vectorRegisters;
  const Buffer b = s.bias ? ctx.in[2] : nullptr;
  PrimFunc plain = plainFunc("conv2d_winograd_nchwc", ctx.in[0], ctx.in[1], b, ctx.out[0],
                             winogradPlainNest(s, ctx.in[0], ctx.in[1], b, ctx.out[0]));
  Stmt nest = kernelBySketch(
      ctx, std::move(plain), tuned, [&](const Knobs& k) { return winogradSketchFits(s, k, registers); },
      [&](Schedule& sched, const Knobs& k) { applyWinogradSketch(sched, s, k, registers); },
      [&](const Knobs& k) { return winogradAnnotationOf(s, k, registers); },
      winogradSketchDefaultKnobs(s, registers));
  return ctx.epilogue ? epilogueAtStores(ctx, nest, Shape(ys.begin(), ys.end() - 1), ys.back()) : nest;
}

}  // namespace kiln::core::lower
