// Lowerings of the packed-layout operators introduced by alter-layout (O3): conv2d_nchwc and
// layout_transform.
//
// conv2d_nchwc, groups = 1. Input x [N, C/ib, H, W, ib], weight pre-packed at compile time to
// w [O/ob, C/ib, KH, KW, ib, ob] with ob = V·L (V output vectors of L lanes, L the output block),
// output y [N, O/L, OH, OW, L]. A register tile holds V × B accumulators (B output columns):
//
//   parallel (n, oco, oh)                            oco: a group of V output blocks
//     for each column run (schedule.h planColumns)   interior tiles in a loop, border tiles at
//       acc[v][b] = bias (or 0)                      constant columns
//       for icb in [0, C/ib)
//         for kh in taps(oh)                         bounds from oh: rows never read padding
//           for kw, ic                               interior: loops; border: kw unrolled, taps
//             w_v = w[oco, icb, kh, kw, ic, v·L : v·L+L]     that read padding dropped
//             for b: x_b = x[n, icb, ih, iw(b, kw), ic]      (a scalar, broadcast)
//                    acc[v][b] += broadcast(x_b) · w_v       (FMA)
//       y[n, oco·V + v, oh, ow0 + b, :] = epilogue(acc[v][b])
//
// The inner step loads V weight vectors and B scalars for V·B FMAs. The weight vectors are
// contiguous because of the packing; broadcasts come straight from memory (AVX-512 embedded
// broadcast). 1×1 convolutions are the same tile without kh/kw loops: a packed GEMM; on narrow
// rows (7×7) their spatial axes are flattened into one row so that the tiles stay full. This
// builder runs only for a record of its knobs (and, untuned, for a convolution padded beyond its
// window's reach into more than 5 × 5 regions): an untuned convolution (groups 1 or depthwise)
// and one whose record is a sketch annotation or trace run the sketch of conv_search.h (the same
// tile, built by schedule primitives on a plain nest; untuned, its default annotation).
//
// Vector width (knob vec_lanes = w, schedule.h packedConvLaneChoices): by default w = L. With
// w = L/2 every L-lane vector above is S = L/w vectors of w lanes — accumulators acc[v·S + s][b],
// weight loads at v·L + s·w inside the ob axis, and the bias, the epilogue's lane index and the
// store at the same sub-vector offset s·w of the output block — so a tile holds V·S·B
// accumulators. On AVX-512 this gives 256-bit code (one µop per FMA on Zen 4, which splits 512-bit
// ones) without changing the weight packing or any layout.
//
// Depthwise (groups = C, ib = ob = L): weight [C/L, 1, KH, KW, 1, L]; the tile is B vectors over
// the channel block: acc[b] += x[n, cb, ih, iw(b, kw), :] · w[cb, 0, kh, kw, 0, :] (S·B
// vectors of w lanes with vec_lanes = w: the input is loaded in w-lane pieces too).
//
// layout_transform copies between NCHW and NCHW[x]c (or two blocks) element by element in the
// output's order.
#include <algorithm>

#include "core/lower/conv_search.h"
#include "core/lower/lower_internal.h"
#include "core/lower/schedule.h"
#include "core/lower/schedule_config.h"
#include "core/tir/functor.h"
#include "core/tir/schedule.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

namespace {

/// `e + k`, or `e` itself when k = 0 (default schedules keep their exact expressions).
Expr plusConst(const Expr& e, int64_t k) { return k == 0 ? e : e + k; }

/// The channel block of a layout attribute: "NCHW" → 0, "NCHW16c" → 16.
int64_t layoutBlockOf(const std::string& layout) {
  if (layout == "NCHW") return 0;
  return std::stoll(layout.substr(4, layout.size() - 5));
}

struct PackedConvShape {
  int64_t n = 0, cb = 0, h = 0, w = 0, ib = 0;  // input [N, C/ib, H, W, ib]
  int64_t oco = 0, kh = 0, kw = 0, ob = 0;      // weight [O/ob, ., KH, KW, ., ob]
  int64_t lanes = 0, ocb = 0;                   // output block L and O/L
  int64_t oh = 0, ow = 0;
  int ocVecs = 1;
  bool depthwise = false;
  int64_t flatWidth = 0;  // > 0: spatial axes flattened into one row; the true OW
  WindowAxis rows, cols;
};

class PackedConvBuilder {
 public:
  PackedConvBuilder(const OpContext& ctx, PackedConvShape s, int owBlock, bool ocOuter, int unroll,
                    int vecLanes)
      : m_ctx(ctx),
        m_s(std::move(s)),
        m_owBlock(owBlock),
        m_ocOuter(ocOuter),
        m_unroll(unroll),
        m_w(vecLanes),
        m_splits(static_cast<int>(m_s.lanes / vecLanes)) {
    KILN_ASSERT(vecLanes >= 1 && m_s.lanes % vecLanes == 0,
                "packed conv: vec_lanes must divide the output block");
  }

  Stmt build() {
    const PackedConvShape& s = m_s;
    int64_t work = s.depthwise ? s.kh * s.kw : s.cb * s.ib * s.kh * s.kw;
    bool parallel = wantParallel(m_ctx.outTypes[0].numel(), work);
    int64_t extent = s.n * s.oco * s.oh;
    // f enumerates (n, oco, oh) with oh innermost when channel groups run outside rows
    // (consecutive iterations reuse one group's weights), else (n, oh, oco).
    Expr f = Var::make(m_ocOuter ? "n_oc_oh" : "n_oh_oc");
    auto digit = [&](const Expr& rest, int64_t extent, bool last, Expr& value) {
      value = extent == 1 ? Expr(i64(0)) : (last ? rest : rest % extent);
      return extent == 1 || last ? rest : rest / extent;
    };
    Expr rest = f;
    if (m_ocOuter) {
      rest = digit(rest, s.oh, s.oco == 1 && s.n == 1, m_oh);
      rest = digit(rest, s.oco, s.n == 1, m_oco);
    } else {
      rest = digit(rest, s.oco, s.oh == 1 && s.n == 1, m_oco);
      rest = digit(rest, s.oh, s.n == 1, m_oh);
    }
    m_n = s.n == 1 ? Expr(i64(0)) : rest;
    m_acc = RegisterTile("acc", m_ctx.out[0]->elemType, s.ocVecs * m_splits * m_owBlock, m_w);

    std::vector<Stmt> runs;
    for (const ColumnRun& run : planColumns(s.cols, m_owBlock)) {
      if (run.count == 1) {
        runs.push_back(tile(i64(run.start), run.width, run.interior));
        continue;
      }
      Expr blk = Var::make("owb");
      Expr ow0 = blk * run.width;
      if (run.start != 0) ow0 = ow0 + run.start;
      runs.push_back(serialFor(blk, 0, run.count, tile(ow0, run.width, true)));
    }
    Stmt body = Allocate::make(m_acc.buffer(), Seq::make(std::move(runs)));
    return For::make(f, i64(0), i64(extent), parallel ? ForKind::Parallel : ForKind::Serial, body);
  }

 private:
  /// Accumulator vectors per column: output vectors × sub-vectors of w lanes.
  int vectors() const { return m_s.ocVecs * m_splits; }

  // One register tile: columns [ow0, ow0 + width); ow0 is a constant unless `interior`.
  Stmt tile(const Expr& ow0, int64_t width, bool interior) {
    const PackedConvShape& s = m_s;
    std::vector<Stmt> init;
    for (int u = 0; u < vectors(); ++u) {
      int v = u / m_splits, sub = u % m_splits;
      Expr value =
          m_ctx.in.size() == 3
              ? vload(m_ctx.in[2], plusConst((m_oco * s.ocVecs + v) * s.lanes, int64_t{sub} * m_w), m_w)
              : splat(literal(m_acc.buffer()->elemType, 0), m_w);
      for (int64_t b = 0; b < width; ++b) init.push_back(m_acc.set(slot(u, b, width), value));
    }
    Stmt reduce = s.depthwise ? depthwiseReduction(ow0, width, interior) : denseReduction(ow0, width, interior);
    return Seq::make({Seq::make(std::move(init)), reduce, store(ow0, width)});
  }

  /// The accumulator of vector u (output vector u / S, sub-vector u % S) at column b.
  int slot(int u, int64_t b, int64_t width) const { return static_cast<int>(u * width + b); }

  /// The columns of the tile whose tap `kw` reads inside the input (all when interior).
  std::vector<int64_t> liveColumns(const Expr& ow0, int64_t width, int64_t kw, bool interior) const {
    std::vector<int64_t> live;
    const int64_t* start = asConstInt(ow0);
    for (int64_t b = 0; b < width; ++b) {
      if (interior || start == nullptr || m_s.cols.tapInside(*start + b, kw)) live.push_back(b);
    }
    return live;
  }

  // groups = 1: Σ over icb, kh, kw, ic of broadcast(x) · w.
  Stmt denseReduction(const Expr& ow0, int64_t width, bool interior) {
    const PackedConvShape& s = m_s;
    const Buffer &x = m_ctx.in[0], &w = m_ctx.in[1];
    Expr icb = Var::make("icb"), kh = Var::make("kh"), ic = Var::make("ic");
    auto [khFirst, khExtent] = s.rows.tapRange(m_oh);
    Expr ih = s.rows.inputIndex(m_oh, kh);
    Expr xRow = ((m_n * s.cb + icb) * s.h + ih) * s.w;          // x[n, icb, ih, 0, 0] / ib
    Expr wTap = ((m_oco * s.cb + icb) * s.kh + kh) * s.kw;      // w[oco, icb, kh, 0, ..] / (ib·ob)

    // The FMAs of one (kw, ic) step over the given columns. Vector u of w lanes starts at u·w
    // inside the ob axis (v·L + s·w).
    auto step = [&](const Expr& kw, const std::vector<int64_t>& columns) {
      std::vector<Expr> wv;
      for (int u = 0; u < vectors(); ++u) wv.push_back(Var::make("w" + std::to_string(u), Type::f32(m_w)));
      Expr wBase = ((wTap + kw) * s.ib + ic) * s.ob;
      std::vector<Stmt> fmas;
      for (int64_t b : columns) {
        Expr iw = s.cols.inputIndex(ow0 + b, kw);
        Expr xs = Load::make(x, (xRow + iw) * s.ib + ic);
        fmas.push_back(letBind("x" + std::to_string(b), xs, [&](const Expr& xv) {
          std::vector<Stmt> per;
          for (int u = 0; u < vectors(); ++u)
            per.push_back(m_acc.fma(slot(u, b, width), splat(xv, m_w), wv[u]));
          return Seq::make(std::move(per));
        }));
      }
      Stmt body = Seq::make(std::move(fmas));
      for (int u = vectors(); u-- > 0;)
        body = LetStmt::make(wv[u], vload(w, wBase + int64_t{u} * m_w, m_w), body);
      return body;
    };

    // kw outside ic: one ic step holds one tap's broadcasts only (reusing them across taps would
    // keep more values live than the register file has room for next to the tile).
    Stmt inner;
    // The ic loop, unrolled by the knob: `step` reads ic, bound here per copy.
    auto icLoop = [&](const Expr& kw, const std::vector<int64_t>& columns) {
      Stmt body = step(kw, columns);
      Expr icVar = Var::make("ic");
      return unrolledFor(icVar, s.ib, m_unroll, [&](const Expr& index) { return substitute(body, {{ic, index}}); });
    };
    if (interior) {
      Expr kw = Var::make("kw");
      inner = serialFor(kw, 0, s.kw, icLoop(kw, liveColumns(ow0, width, 0, true)));
    } else {
      std::vector<Stmt> taps;
      for (int64_t k = 0; k < s.kw; ++k) {
        std::vector<int64_t> live = liveColumns(ow0, width, k, false);
        if (live.empty()) continue;
        taps.push_back(icLoop(i64(k), live));
      }
      if (taps.empty()) return Stmt();
      inner = Seq::make(std::move(taps));
    }
    Stmt khLoop = For::make(kh, khFirst, khExtent, ForKind::Serial, inner);
    return serialFor(icb, 0, s.cb, khLoop);
  }

  // Depthwise: Σ over kh, kw of x[n, cb, ih, iw, :] · w[cb, 0, kh, kw, 0, :].
  Stmt depthwiseReduction(const Expr& ow0, int64_t width, bool interior) {
    const PackedConvShape& s = m_s;
    const Buffer &x = m_ctx.in[0], &w = m_ctx.in[1];
    Expr kh = Var::make("kh");
    auto [khFirst, khExtent] = s.rows.tapRange(m_oh);
    Expr ih = s.rows.inputIndex(m_oh, kh);
    Expr xRow = ((m_n * s.cb + m_oco) * s.h + ih) * s.w;
    Expr wTap = (m_oco * s.kh + kh) * s.kw;
    auto step = [&](const Expr& kw, const std::vector<int64_t>& columns) {
      std::vector<Expr> wv;
      for (int u = 0; u < m_splits; ++u) wv.push_back(Var::make("w" + std::to_string(u), Type::f32(m_w)));
      std::vector<Stmt> fmas;
      for (int64_t b : columns) {
        Expr iw = s.cols.inputIndex(ow0 + b, kw);
        for (int u = 0; u < m_splits; ++u)
          fmas.push_back(m_acc.fma(slot(u, b, width),
                                   vload(x, plusConst((xRow + iw) * s.lanes, int64_t{u} * m_w), m_w), wv[u]));
      }
      Stmt body = Seq::make(std::move(fmas));
      for (int u = m_splits; u-- > 0;)
        body = LetStmt::make(wv[u], vload(w, plusConst((wTap + kw) * s.lanes, int64_t{u} * m_w), m_w), body);
      return body;
    };
    Stmt inner;
    if (interior) {
      Expr kw = Var::make("kw");
      inner = serialFor(kw, 0, s.kw, step(kw, liveColumns(ow0, width, 0, true)));
    } else {
      std::vector<Stmt> taps;
      for (int64_t k = 0; k < s.kw; ++k) {
        std::vector<int64_t> live = liveColumns(ow0, width, k, false);
        if (!live.empty()) taps.push_back(step(i64(k), live));
      }
      if (taps.empty()) return Stmt();
      inner = Seq::make(std::move(taps));
    }
    return For::make(kh, khFirst, khExtent, ForKind::Serial, inner);
  }

  // Sub-vector s of an output vector goes to lanes [s·w, s·w + w) of its output block.
  Stmt store(const Expr& ow0, int64_t width) {
    const PackedConvShape& s = m_s;
    std::vector<Stmt> stores;
    for (int v = 0; v < s.ocVecs; ++v) {
      Expr block = m_oco * s.ocVecs + v;
      for (int64_t b = 0; b < width; ++b) {
        Expr col = ow0 + b;
        Expr oh = s.flatWidth ? col / s.flatWidth : m_oh, ow = s.flatWidth ? col % s.flatWidth : col;
        for (int sub = 0; sub < m_splits; ++sub) {
          int64_t first = int64_t{sub} * m_w;
          Expr offset = plusConst((((m_n * s.ocb + block) * s.oh + m_oh) * s.ow + col) * s.lanes, first);
          Expr lane = m_w == 1 ? Expr(i64(first)) : Ramp::make(i64(first), i64(1), m_w);
          Expr value =
              m_ctx.applyEpilogue(m_acc.get(slot(v * m_splits + sub, b, width)), {m_n, block, oh, ow, lane});
          stores.push_back(vstore(m_ctx.out[0], offset, value));
        }
      }
    }
    return Seq::make(std::move(stores));
  }

  const OpContext& m_ctx;
  PackedConvShape m_s;
  int m_owBlock;
  bool m_ocOuter;
  int m_unroll;
  int m_w;       // lanes of the accumulators and loads (vec_lanes)
  int m_splits;  // L / w: vectors per output vector
  Expr m_n, m_oco, m_oh;
  RegisterTile m_acc{"acc", Type::f32(), 1, 1};
};

/// The sketch-scheduled kernel of a convolution's record; without one, the sketch with its default
/// annotation when `byDefault`, else an undefined Stmt (the builder's). The fused epilogue is
/// applied where the register tile is written back.
Stmt sketchConv(const OpContext& ctx, const ConvSketchShape& s, bool byDefault) {
  const int registers = ctx.options.vectorRegisters;
  const Buffer b = s.bias ? ctx.in[2] : nullptr;
  PrimFunc plain = plainFunc("conv2d_nchwc", ctx.in[0], ctx.in[1], b, ctx.out[0],
                             convSketchPlainNest(s, ctx.in[0], ctx.in[1], b, ctx.out[0]));
  auto sketch = [&](Schedule& sched, const Knobs& k) { applyConvSketch(sched, s, k, registers); };
  Stmt nest = tunedBySketch(
      ctx, plain, [&](const Knobs& k) { return convSketchAnnotationFits(s, k, registers); }, sketch);
  if (!nest.defined() && byDefault)
    nest = defaultSketch(ctx, std::move(plain), convSketchDefaultKnobs(s, registers), sketch);
  if (!nest.defined() || !ctx.epilogue) return nest;
  const Shape& ys = ctx.outTypes[0].shape;
  return epilogueAtStores(ctx, nest, Shape(ys.begin(), ys.end() - 1), ys.back());
}

}  // namespace

Stmt lowerConv2dNchwc(const OpContext& ctx) {
  ctx.requireFloat();
  if (ctx.inTypes[0].dtype != DType::Float32) ctx.unsupported("dtype other than f32");
  const Shape &xs = ctx.inTypes[0].shape, &ws = ctx.inTypes[1].shape, &ys = ctx.outTypes[0].shape;
  PackedConvShape s;
  s.n = xs[0], s.cb = xs[1], s.h = xs[2], s.w = xs[3], s.ib = xs[4];
  s.oco = ws[0], s.kh = ws[2], s.kw = ws[3], s.ob = ws[5];
  s.lanes = ys[4], s.ocb = ys[1], s.oh = ys[2], s.ow = ys[3];
  s.ocVecs = static_cast<int>(s.ob / s.lanes);
  s.depthwise = ctx.attrs.getInt("groups", 1) != 1;
  if (s.depthwise && (s.ib != s.lanes || s.ob != s.lanes))
    ctx.unsupported("depthwise convolution with input block " + std::to_string(s.ib) + ", weight block " +
                    std::to_string(s.ob) + " and output block " + std::to_string(s.lanes));
  auto stride = ctx.pairAttr("stride", 1), pad = ctx.pairAttr("padding", 0), dil = ctx.pairAttr("dilation", 1);

  // Tuned knobs (schedule_config.h) when a record fits this kernel, else the heuristic. A record
  // whose oc_vecs disagrees with the weight packing was made for another packing: ignore it.
  ctx.tuneKey = tuneKeyOf(ctx.op, ctx.attrs, ctx.inTypes, ctx.outTypes);
  const Knobs* tuned = ctx.tunedKnobs(ctx.tuneKey);
  // Likewise a record for a Winograd algorithm (alter-layout did not transform this weight).
  if (tuned && (knob(*tuned, "oc_vecs", s.ocVecs) != s.ocVecs || knob(*tuned, "algo", 0) != 0)) tuned = nullptr;
  bool pointwise = s.kh == 1 && s.kw == 1 && stride == std::vector<int64_t>{1, 1} && pad == std::vector<int64_t>{0, 0};
  // A convolution whose record is a sketch annotation or trace (conv_search.h).
  const int64_t groups = ctx.attrs.getInt("groups", 1);
  if (auto shape = convSketchShape(xs, ws, ys, stride, pad, dil, groups, ctx.in.size() == 3)) {
    // Untuned, every convolution the sketch takes runs its default annotation, unless padding
    // beyond the window's reach (outputs without taps) cuts it into more than 5 × 5 regions (a
    // 3×3 with padding 3: 7 × 7 regions, measured 1.4× slower than the builder and 6× the compile
    // time); a record of builder knobs keeps the builder.
    const size_t regions = shape->rowRuns().size() * shape->columnRuns().size();
    Stmt nest = sketchConv(ctx, *shape, !tuned && !(shape->beyondReach() && regions > 25));
    if (nest.defined()) return nest;
  }
  bool flatten = packedConvFlattens(s.kh, s.kw, stride, pad, s.ow, ctx.options);
  if (tuned) flatten = pointwise && knob(*tuned, "flatten", flatten) != 0;
  if (flatten) {
    // Pointwise: one row of OH·OW columns (the output index is unflattened for the epilogue).
    s.flatWidth = s.ow;
    s.w = s.h * s.w, s.h = 1;
    s.ow = s.oh * s.ow, s.oh = 1;
  }
  s.rows = WindowAxis{s.h, s.oh, s.kh, stride[0], pad[0], dil[0]};
  s.cols = WindowAxis{s.w, s.ow, s.kw, stride[1], pad[1], dil[1]};

  // Narrower vectors (vec_lanes < L) when a record asks for a valid width whose tile can fit.
  int64_t vecLanes = packedConvLanesOf(tuned, s.lanes);
  if (!packedConvTileFits(s.ocVecs, 1, ctx.options, s.lanes / vecLanes)) vecLanes = s.lanes;
  int64_t splits = s.lanes / vecLanes;
  int owBlock = packedConvOwBlock(s.ow, static_cast<int>(s.ocVecs * splits), ctx.options);
  int64_t weightElems = s.oco * s.ob * s.kh * s.kw * (s.depthwise ? 1 : s.cb * s.ib);
  bool ocOuter = !convOrdersDiffer(s.oco, s.oh) || convChannelsOuter(weightElems, ctx.inTypes[0].numel());
  int unroll = 1;
  if (tuned) {
    int64_t b = knob(*tuned, "ow_block", owBlock);
    if (b >= 1 && b <= s.ow && packedConvTileFits(s.ocVecs, b, ctx.options, splits))
      owBlock = static_cast<int>(b);
    ocOuter = knob(*tuned, "oc_outer", ocOuter ? 1 : 0) != 0;
    int64_t u = knob(*tuned, "unroll", 1);
    std::vector<int64_t> factors = packedConvUnrollFactors(s.ib, s.depthwise);
    if (std::find(factors.begin(), factors.end(), u) != factors.end()) unroll = static_cast<int>(u);
  }
  Knobs used{{"oc_vecs", s.ocVecs},
             {"ow_block", owBlock},
             {"flatten", flatten ? 1 : 0},
             {"oc_outer", ocOuter ? 1 : 0},
             {"unroll", unroll},
             {"par_chunks", parallelChunksOf(tuned)}};
  // Convolutions that could run as Winograd carry the algorithm knob (0: this direct kernel).
  if (winogradEligible(convGeometry(ctx.op, ctx.attrs, ctx.inTypes))) used["algo"] = 0;
  // The vector width only when it is not the block (default schedules keep their text).
  if (vecLanes != s.lanes) used["vec_lanes"] = vecLanes;
  ctx.schedule = knobsText(used);
  return PackedConvBuilder(ctx, s, owBlock, ocOuter, unroll, static_cast<int>(vecLanes)).build();
}

Stmt lowerLayoutTransform(const OpContext& ctx) {
  int64_t src = layoutBlockOf(ctx.attrs.getString("src")), dst = layoutBlockOf(ctx.attrs.getString("dst"));
  const Shape& ys = ctx.outTypes[0].shape;
  const Shape& xs = ctx.inTypes[0].shape;
  int64_t channels = src ? xs[1] * src : xs[1];
  int64_t h = xs[2], w = xs[3];
  LoopNest nest(ys, dst ? std::vector<std::string>{"n", "cb", "h", "w", "ci"} : std::vector<std::string>{"n", "c", "h", "w"},
                wantParallel(ctx.outTypes[0].numel()));
  Expr c = dst ? nest[1] * dst + nest[4] : nest[1];
  Expr spatial = nest[2] * w + nest[3];
  Expr xIndex = src ? (((nest[0] * (channels / src) + c / src) * h * w + spatial) * src + c % src)
                    : ((nest[0] * channels + c) * h * w + spatial);
  return nest.wrap(Store::make(ctx.out[0], nest.offset(contiguousStrides(ys)), Load::make(ctx.in[0], xIndex)));
}

}  // namespace kiln::core::lower
