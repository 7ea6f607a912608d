// Lowering of conv2d in plain NCHW (opt levels O0–O2, and convolutions alter-layout leaves
// alone): a register-tiled direct convolution vectorized over output columns.
//
// Input x [N, C, H, W], weight w [O, C/G, KH, KW] (G groups), optional bias [O], output
// y [N, O, OH, OW]. A register tile holds B output channels (of one group) × a list of column
// vectors (each of L lanes, or narrower at the ends of a row):
//
//   parallel (n, o-tile, oh)
//     for each column tile                     interior tiles (V vectors of L) in a loop; border
//       acc[b][v] = bias[o0 + b]               columns and leftovers at constant positions
//       for ic in [0, C/G)
//         for kh in taps(oh)                   bounds from oh: rows never read padding
//           for kw (loop, or unrolled with taps that read padding dropped)
//             x_v = x[n, g·C/G + ic, ih, iw(v) : +lanes]   (a vector; strided when stride > 1)
//             acc[b][v] += broadcast(w[o0 + b, ic, kh, kw]) · x_v
//       y[n, o0 + b, oh, columns of v] = epilogue(acc[b][v])
//
// Columns whose window reaches into the padding are scalar "vectors" of one lane so that their
// taps can be pruned while building the IR; there are no bounds checks in any loop.
#include <algorithm>

#include "core/lower/lower_internal.h"
#include "core/lower/schedule.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

namespace {

struct NchwConvShape {
  int64_t n = 0, c = 0, h = 0, w = 0;  // input
  int64_t oc = 0, cg = 0, kh = 0, kw = 0;
  int64_t oh = 0, ow = 0;
  int64_t groups = 1, ocg = 0;
  WindowAxis rows, cols;
};

/// One vector of a column tile: `lanes` consecutive output columns starting `offset` columns
/// into the tile.
struct ColumnVector {
  int64_t offset = 0;
  int lanes = 1;
};

/// A column tile: vectors at `start` (+ tile · width for `count` > 1 tiles in a loop).
struct ColumnTile {
  int64_t start = 0, width = 0, count = 1;
  bool interior = true;
  std::vector<ColumnVector> vectors;
};

/// The tiles of one output row: scalar border columns, interior tiles of `vecs` × `lanes`
/// columns in a loop, and the leftover interior columns in vectors of halving width.
std::vector<ColumnTile> planNchwColumns(const WindowAxis& cols, int lanes, int vecs) {
  std::vector<ColumnTile> tiles;
  auto [lo, hi] = cols.interior();
  auto scalarTile = [&](int64_t begin, int64_t end) {
    for (int64_t start = begin; start < end; start += vecs) {
      ColumnTile t{start, std::min<int64_t>(vecs, end - start), 1, false, {}};
      for (int64_t j = 0; j < t.width; ++j) t.vectors.push_back({j, 1});
      tiles.push_back(t);
    }
  };
  scalarTile(0, lo);
  int64_t full = int64_t{lanes} * vecs;
  int64_t count = (hi - lo) / full;
  if (count > 0) {
    ColumnTile t{lo, full, count, true, {}};
    for (int v = 0; v < vecs; ++v) t.vectors.push_back({int64_t{v} * lanes, lanes});
    tiles.push_back(t);
  }
  // Leftover interior columns: vectors of lanes, lanes/2, ..., 1, at most `vecs` per tile.
  int64_t start = lo + count * full;
  ColumnTile rest{start, 0, 1, true, {}};
  for (int l = lanes; l >= 1 && start < hi; l /= 2) {
    while (hi - start >= l) {
      if (static_cast<int>(rest.vectors.size()) == vecs) {
        tiles.push_back(rest);
        rest = ColumnTile{start, 0, 1, true, {}};
      }
      rest.vectors.push_back({start - rest.start, l});
      rest.width += l;
      start += l;
    }
  }
  if (!rest.vectors.empty()) tiles.push_back(rest);
  scalarTile(hi, cols.out);
  return tiles;
}

class NchwConvBuilder {
 public:
  NchwConvBuilder(const OpContext& ctx, NchwConvShape s, ConvKnobs knobs, int lanes)
      : m_ctx(ctx), m_s(std::move(s)), m_knobs(knobs), m_lanes(lanes) {}

  Stmt build() {
    const NchwConvShape& s = m_s;
    int64_t tilesPerRow = s.oc / m_knobs.ocBlock;
    bool parallel = wantParallel(m_ctx.outTypes[0].numel(), s.cg * s.kh * s.kw);
    Expr f = Var::make("n_oc_oh");
    m_oh = s.oh == 1 ? Expr(i64(0)) : f % s.oh;
    Expr rest = s.oh == 1 ? f : f / s.oh;
    Expr tile = tilesPerRow == 1 ? Expr(i64(0)) : (s.n == 1 ? rest : rest % tilesPerRow);
    m_n = s.n == 1 ? Expr(i64(0)) : (tilesPerRow == 1 ? rest : rest / tilesPerRow);
    m_oc0 = tile * m_knobs.ocBlock;
    m_group = s.groups == 1 ? Expr(i64(0)) : m_oc0 / s.ocg;

    std::vector<ColumnTile> tiles = planNchwColumns(s.cols, m_lanes, m_knobs.owVecs);
    int64_t maxWidth = 1;
    for (const ColumnTile& t : tiles) maxWidth = std::max(maxWidth, t.width);
    m_tileWidth = maxWidth;
    m_acc = makeBuffer("acc", m_ctx.out[0]->elemType, {m_knobs.ocBlock * maxWidth});

    std::vector<Stmt> body;
    for (const ColumnTile& t : tiles) {
      if (t.count == 1) {
        body.push_back(tileCode(t, i64(t.start)));
        continue;
      }
      Expr blk = Var::make("owb");
      Expr ow0 = blk * t.width;
      if (t.start != 0) ow0 = ow0 + t.start;
      body.push_back(serialFor(blk, 0, t.count, tileCode(t, ow0)));
    }
    Stmt inner = Allocate::make(m_acc, Seq::make(std::move(body)));
    int64_t extent = s.n * tilesPerRow * s.oh;
    return For::make(f, i64(0), i64(extent), parallel ? ForKind::Parallel : ForKind::Serial, inner);
  }

 private:
  Expr accOffset(int b, const ColumnVector& v) const { return i64(b * m_tileWidth + v.offset); }
  Expr accGet(int b, const ColumnVector& v) const { return vload(m_acc, accOffset(b, v), v.lanes); }
  Stmt accSet(int b, const ColumnVector& v, Expr value) const { return vstore(m_acc, accOffset(b, v), std::move(value)); }

  Stmt tileCode(const ColumnTile& t, const Expr& ow0) {
    const NchwConvShape& s = m_s;
    const Buffer &x = m_ctx.in[0], &w = m_ctx.in[1], &y = m_ctx.out[0];
    Type elem = y->elemType;
    int ob = m_knobs.ocBlock;
    std::vector<Stmt> init;
    for (int b = 0; b < ob; ++b) {
      Expr bias = m_ctx.in.size() == 3 ? Load::make(m_ctx.in[2], m_oc0 + b) : literal(elem, 0);
      for (const ColumnVector& v : t.vectors) init.push_back(accSet(b, v, splat(bias, v.lanes)));
    }

    Expr ic = Var::make("ic"), kh = Var::make("kh");
    auto [khFirst, khExtent] = s.rows.tapRange(m_oh);
    Expr ih = s.rows.inputIndex(m_oh, kh);
    Expr channel = m_n * s.c + ic;
    if (s.groups > 1) channel = channel + m_group * s.cg;
    Expr xRow = (channel * s.h + ih) * s.w;
    Expr wTap = ((m_oc0 * s.cg + ic) * s.kh + kh) * s.kw;  // w[o0, ic, kh, 0]
    int64_t wStride = s.cg * s.kh * s.kw;                  // next output channel

    const int64_t* start = asConstInt(ow0);
    auto step = [&](const Expr& kwE, bool prune) {
      std::vector<Stmt> fmas;
      for (const ColumnVector& v : t.vectors) {
        if (prune && v.lanes == 1 && !s.cols.tapInside(*start + v.offset, *asConstInt(kwE))) continue;
        Expr iw = s.cols.inputIndex(ow0 + v.offset, kwE);
        Expr xIndex = v.lanes == 1 ? xRow + iw : Ramp::make(xRow + iw, i64(s.cols.stride), v.lanes);
        Expr xv = Var::make("x" + std::to_string(v.offset), elem.withLanes(static_cast<uint16_t>(v.lanes)));
        std::vector<Stmt> per;
        for (int b = 0; b < ob; ++b) {
          Expr wb = Load::make(w, wTap + kwE + int64_t{b} * wStride);
          per.push_back(accSet(b, v, accGet(b, v) + splat(wb, v.lanes) * xv));
        }
        fmas.push_back(LetStmt::make(xv, Load::make(x, xIndex), Seq::make(std::move(per))));
      }
      return fmas.empty() ? Stmt() : Seq::make(std::move(fmas));
    };
    Stmt taps;
    if (t.interior) {
      Expr kw = Var::make("kw");
      taps = serialFor(kw, 0, s.kw, step(kw, false));
    } else {
      std::vector<Stmt> all;
      for (int64_t k = 0; k < s.kw; ++k)
        if (Stmt st = step(i64(k), true); st.defined()) all.push_back(st);
      taps = all.empty() ? Stmt() : Seq::make(std::move(all));
    }
    Stmt reduce = taps.defined() ? serialFor(ic, 0, s.cg, For::make(kh, khFirst, khExtent, ForKind::Serial, taps))
                                 : Stmt();

    std::vector<Stmt> stores;
    for (int b = 0; b < ob; ++b) {
      Expr oc = m_oc0 + b;
      Expr rowBase = ((m_n * s.oc + oc) * s.oh + m_oh) * s.ow;
      for (const ColumnVector& v : t.vectors) {
        Expr col = ow0 + v.offset;
        Expr value = m_ctx.applyEpilogue(accGet(b, v), {m_n, oc, m_oh, vramp(col, v.lanes)});
        stores.push_back(vstore(y, rowBase + col, value));
      }
    }
    return Seq::make({Seq::make(std::move(init)), reduce, Seq::make(std::move(stores))});
  }

  const OpContext& m_ctx;
  NchwConvShape m_s;
  ConvKnobs m_knobs;
  int m_lanes;
  Expr m_n, m_oc0, m_oh, m_group;
  Buffer m_acc;
  int64_t m_tileWidth = 1;
};

/// NCHW tile: output channels per tile (dividing the channels of a group) and column vectors.
ConvKnobs nchwConvKnobs(const NchwConvShape& s, int lanes, const LowerOptions& options) {
  ConvKnobs k;
  int budget = accumulatorBudget(options);
  // Columns: enough vectors to cover a row when it is narrow, else 3-4.
  int64_t interior = std::max<int64_t>(1, s.cols.interior().second - s.cols.interior().first);
  k.owVecs = static_cast<int>(std::clamp<int64_t>((interior + lanes - 1) / lanes, 1, budget >= 24 ? 3 : 2));
  int maxBlock = std::max(1, (budget - k.owVecs) / (k.owVecs + 1));
  for (int b : {8, 6, 4, 3, 2, 1}) {
    if (b <= maxBlock && s.ocg % b == 0) {
      k.ocBlock = b;
      break;
    }
  }
  if (s.ocg == 1) k.owVecs = std::clamp(budget / 3, 1, 8);  // depthwise: only columns to tile
  return k;
}

}  // namespace

Stmt lowerConv2d(const OpContext& ctx) {
  ctx.requireFloat();
  const Shape &xs = ctx.inTypes[0].shape, &ws = ctx.inTypes[1].shape, &ys = ctx.outTypes[0].shape;
  NchwConvShape s;
  s.n = xs[0], s.c = xs[1], s.h = xs[2], s.w = xs[3];
  s.oc = ws[0], s.cg = ws[1], s.kh = ws[2], s.kw = ws[3];
  s.oh = ys[2], s.ow = ys[3];
  s.groups = ctx.attrs.getInt("groups", 1);
  s.ocg = s.oc / s.groups;
  auto stride = ctx.attrs.getPair("stride", 1), pad = ctx.attrs.getPair("padding", 0),
       dil = ctx.attrs.getPair("dilation", 1);
  s.rows = WindowAxis{s.h, s.oh, s.kh, stride[0], pad[0], dil[0]};
  s.cols = WindowAxis{s.w, s.ow, s.kw, stride[1], pad[1], dil[1]};
  // f64 gets half the lanes per register.
  int lanes = ctx.out[0]->elemType.bits == 64 ? std::max(1, ctx.options.vectorLanes / 2) : ctx.options.vectorLanes;
  ConvKnobs knobs = nchwConvKnobs(s, lanes, ctx.options);
  ctx.schedule = knobs.str();
  return NchwConvBuilder(ctx, s, knobs, lanes).build();
}

}  // namespace kiln::core::lower
