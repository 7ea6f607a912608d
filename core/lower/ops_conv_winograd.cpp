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
//   v[α², C/ib, T, ib]    a scratch buffer (heap when large), shared by both phases
//   parallel (n, tile row, icb):                         phase 1: input transform
//     for each tile column: d = the α×α patch (ib-lane vectors; reads outside the input are
//       zeros: loads at clamped positions, then a select), v[ξν, icb, t, :] = (Bᵀ d B)[ξ, ν]
//   parallel (og, tile block) (order: knob oc_outer):      phase 2: batched GEMM + output
//     for ξν in α²:                                        transform
//       acc[V][B] = 0                                      register tile: V vectors × B tiles
//       for icb, ic (ic unrolled by knob unroll):
//         w_v = u[og, ξν, c, v·L : v·L + L]
//         for b: acc[v][b] += broadcast(v[ξν, icb, t0 + b, ic]) · w_v
//       mbuf[ξν, v, b, :] = acc[v][b]                      (a local buffer, per iteration)
//     for v, b: Y = Aᵀ M A (+ bias); y[n, og·V + v, tile rows/cols] = epilogue(Y)
//
// The tile block B (knob ow_block) is cut from the flat tile index, so a block may span tile
// rows and images; the last block is narrower when B does not divide T (its own code path).
//
// This builder runs only for a record of its knobs. The transforms of both phases are
// winograd_search.h's, which the untuned kernel and a record holding a sketch annotation or trace
// (knob mi) build theirs from: the plain nest with the batched GEMM as a loop nest of its own,
// scheduled by primitives.
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

class WinogradBuilder {
 public:
  WinogradBuilder(const OpContext& ctx, WinogradShape s, int tileBlock, bool ocOuter, int unroll)
      : m_ctx(ctx),
        m_s(s),
        m_block(tileBlock),
        m_ocOuter(ocOuter),
        m_unroll(unroll) {
    m_v = makeBuffer("wino_v", Type::f32(), {int64_t{s.alpha} * s.alpha * s.cb * s.tiles * s.ib});
    m_acc = RegisterTile("acc", Type::f32(), s.vecs * tileBlock, static_cast<int>(s.lanes));
    m_mbuf = makeBuffer("wino_m", Type::f32(), {int64_t{s.alpha} * s.alpha * s.vecs * tileBlock * s.lanes});
  }

  Stmt build() {
    const WinogradShape& s = m_s;
    m_parallel = wantParallel(m_ctx.outTypes[0].numel(), s.c * 9);
    return Allocate::make(m_v, Seq::make({inputTransform(), gemmAndOutput()}));
  }

 private:
  int alpha() const { return m_s.alpha; }
  int lanes() const { return static_cast<int>(m_s.lanes); }
  ForKind parallelKind() const { return m_parallel ? ForKind::Parallel : ForKind::Serial; }

  // ---- phase 1 ----
  Stmt inputTransform() { return winogradInputTransform(m_s, m_ctx.in[0], m_v, parallelKind()); }

  // ---- phase 2 ----
  Stmt gemmAndOutput() {
    const WinogradShape& s = m_s;
    int64_t blocks = (s.tiles + m_block - 1) / m_block, full = s.tiles / m_block, rest = s.tiles % m_block;
    Expr f = Var::make(m_ocOuter ? "og_tb" : "tb_og");
    m_og = s.og == 1 ? Expr(i64(0)) : (m_ocOuter ? f / blocks : f % s.og);
    Expr blk = blocks == 1 ? Expr(i64(0)) : (m_ocOuter ? f % blocks : f / s.og);
    Stmt body;
    if (full == 0) {
      body = tileBlock(i64(0), rest);
    } else if (rest == 0) {
      body = tileBlock(blk * m_block, m_block);
    } else {
      body = IfThenElse::make(blk < full, tileBlock(blk * m_block, m_block),
                              tileBlock(i64(full * m_block), rest));
    }
    body = Allocate::make(m_mbuf, Allocate::make(m_acc.buffer(), body));
    return For::make(f, i64(0), i64(s.og * blocks), parallelKind(), body);
  }

  /// Tiles [t0, t0 + width) against the output-channel group m_og.
  Stmt tileBlock(const Expr& t0, int64_t width) {
    const WinogradShape& s = m_s;
    const Buffer& u = m_ctx.in[1];
    int64_t positions = int64_t{alpha()} * alpha();
    Expr pos = Var::make("pos"), icb = Var::make("icb"), ic = Var::make("ic");

    std::vector<Stmt> init;
    for (int v = 0; v < s.vecs; ++v)
      for (int64_t b = 0; b < width; ++b) init.push_back(m_acc.set(slot(v, b), splat(f32(0.0), lanes())));

    auto step = [&](const Expr& icIndex) {
      std::vector<Expr> wv;
      for (int v = 0; v < s.vecs; ++v) wv.push_back(Var::make("w" + std::to_string(v), Type::f32(lanes())));
      Expr wBase = ((m_og * positions + pos) * s.c + icb * s.ib + icIndex) * s.ob;
      std::vector<Stmt> fmas;
      for (int64_t b = 0; b < width; ++b) {
        Expr xs = Load::make(m_v, ((pos * s.cb + icb) * s.tiles + t0 + b) * s.ib + icIndex);
        fmas.push_back(letBind("x" + std::to_string(b), xs, [&](const Expr& xv) {
          std::vector<Stmt> per;
          for (int v = 0; v < s.vecs; ++v) per.push_back(m_acc.fma(slot(v, b), splat(xv, lanes()), wv[v]));
          return Seq::make(std::move(per));
        }));
      }
      Stmt inner = Seq::make(std::move(fmas));
      for (int v = s.vecs; v-- > 0;)
        inner = LetStmt::make(wv[v], vload(u, wBase + v * s.lanes, lanes()), inner);
      return inner;
    };
    Stmt reduce = serialFor(icb, 0, s.cb, unrolledFor(ic, s.ib, m_unroll, step));

    std::vector<Stmt> spill;
    for (int v = 0; v < s.vecs; ++v)
      for (int64_t b = 0; b < width; ++b)
        spill.push_back(vstore(m_mbuf, ((pos * s.vecs + v) * m_block + b) * s.lanes, m_acc.get(slot(v, b))));
    Stmt gemm = serialFor(pos, 0, positions,
                          Seq::make({Seq::make(std::move(init)), reduce, Seq::make(std::move(spill))}));

    Expr v = Var::make("v"), b = Var::make("b");
    Stmt output = serialFor(v, 0, s.vecs, serialFor(b, 0, width, outputTransform(t0 + b, v, b)));
    return Seq::make({gemm, output});
  }

  int slot(int v, int64_t b) const { return static_cast<int>(v * m_block + b); }

  /// Y = Aᵀ M A for tile `t`, output vector `v` of the group, plus bias and epilogue, stored
  /// where the tile lies inside the output.
  Stmt outputTransform(const Expr& t, const Expr& v, const Expr& b) {
    const WinogradShape& s = m_s;
    const int L = lanes();
    Expr block = m_og * s.vecs + v;
    Expr bias = m_ctx.in.size() == 3 ? vload(m_ctx.in[2], block * s.lanes, L) : Expr();
    Expr lane = L == 1 ? Expr(i64(0)) : Ramp::make(i64(0), i64(1), L);
    return winogradOutputTile(
        s, t, [&](int k) { return vload(m_mbuf, ((int64_t{k} * s.vecs + v) * m_block + b) * s.lanes, L); }, bias,
        [&](const Expr& n, const Expr& oh, const Expr& ow, const Expr& value) {
          Expr offset = (((n * s.ocb + block) * s.oh + oh) * s.ow + ow) * s.lanes;
          return vstore(m_ctx.out[0], offset, m_ctx.applyEpilogue(value, {n, block, oh, ow, lane}));
        });
  }

  const OpContext& m_ctx;
  WinogradShape m_s;
  int m_block;
  bool m_ocOuter;
  int m_unroll;
  bool m_parallel = false;
  Buffer m_v, m_mbuf;
  Expr m_og;
  RegisterTile m_acc{"acc", Type::f32(), 1, 1};
};

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
  std::vector<int64_t> pad = ctx.pairAttr("padding", 0);
  if (pad[0] > 2 || pad[1] > 2) ctx.unsupported("Winograd convolution with padding above 2");
  std::optional<WinogradShape> shape = winogradShape(xs, us, ys, m, pad, ctx.in.size() == 3);
  if (!shape) ctx.unsupported("Winograd convolution whose buffers disagree with its tile");
  const WinogradShape& s = *shape;

  // Knobs: a record for this key made for the same algorithm and packing, else the heuristic.
  ctx.tuneKey = tuneKeyOf(ctx.op, ctx.attrs, ctx.inTypes, ctx.outTypes);
  const Knobs* tuned = ctx.tunedKnobs(ctx.tuneKey);
  if (tuned && (knob(*tuned, "algo", 0) != s.m || knob(*tuned, "oc_vecs", s.vecs) != s.vecs)) tuned = nullptr;
  // A record that is a sketch annotation or trace of this algorithm and packing (winograd_search.h).
  // Untuned, the sketch with its default annotation; a record of builder knobs keeps the builder.
  const int registers = ctx.options.vectorRegisters;
  const Buffer b = s.bias ? ctx.in[2] : nullptr;
  PrimFunc plain = plainFunc("conv2d_winograd_nchwc", ctx.in[0], ctx.in[1], b, ctx.out[0],
                             winogradPlainNest(s, ctx.in[0], ctx.in[1], b, ctx.out[0]));
  auto sketch = [&](Schedule& sched, const Knobs& k) { applyWinogradSketch(sched, s, k, registers); };
  auto fits = [&](const Knobs& k) { return winogradSketchFits(s, k, registers); };
  Stmt nest = tunedBySketch(ctx, plain, fits, sketch);
  if (!nest.defined() && !tuned)
    nest = defaultSketch(ctx, std::move(plain), winogradSketchDefaultKnobs(s, registers), sketch);
  if (nest.defined())
    return ctx.epilogue ? epilogueAtStores(ctx, nest, Shape(ys.begin(), ys.end() - 1), ys.back()) : nest;
  int block = packedConvOwBlock(s.tiles, s.vecs, ctx.options);
  // The transformed filter u holds O·α²·C values, the transformed input v α²·C·T.
  bool ocOuter = !convOrdersDiffer(s.og, (s.tiles + block - 1) / block) || convChannelsOuter(s.og * s.ob, s.tiles);
  int unroll = 1;
  if (tuned) {
    int64_t b = knob(*tuned, "ow_block", block);
    if (b >= 1 && b <= s.tiles && packedConvTileFits(s.vecs, b, ctx.options)) block = static_cast<int>(b);
    ocOuter = knob(*tuned, "oc_outer", ocOuter ? 1 : 0) != 0;
    int64_t u = knob(*tuned, "unroll", 1);
    std::vector<int64_t> factors = packedConvUnrollFactors(s.ib, false);
    if (std::find(factors.begin(), factors.end(), u) != factors.end()) unroll = static_cast<int>(u);
  }
  Knobs used{{"algo", s.m},  {"oc_vecs", s.vecs},           {"ow_block", block},
             {"flatten", 0}, {"oc_outer", ocOuter ? 1 : 0}, {"unroll", unroll},
             {"par_chunks", parallelChunksOf(tuned)}};
  ctx.schedule = knobsText(used);
  return WinogradBuilder(ctx, s, block, ocOuter, unroll).build();
}

}  // namespace kiln::core::lower
