// Lowerings of the contraction operators: conv2d, dense and matmul.
//
// Each output element is computed by a reduction loop nest innermost, accumulating into a
// one-element local buffer that is allocated once per worker (inside the parallel loop).
//
// conv2d (NCHW input, OIHW weight, groups, stride, padding, dilation, optional bias):
//
//   parallel (n_oc, 0, N*OC)                 fused batch × output channel
//     for oh in [0, ohLo) ∪ [ohHi, OH)        border rows: kh taps check ih against 0 and/or H
//     for oh in [ohLo, ohHi)                  interior rows: no ih checks
//       for ow in border columns              kw taps check iw against 0 and/or W
//       for ow in [owLo, owHi)                interior columns: no checks
//         acc = bias[oc] (or 0)
//         for ic, kh, kw: acc += x[n, g·Cg + ic, ih, iw] · w[oc, ic, kh, kw]
//         y[n, oc, oh, ow] = acc
//
// The interior ranges are the output positions whose whole window lies inside the input; they
// are compile-time constants, so the common case runs without bounds checks. Every loop binds a
// fresh variable (no Var is bound twice in a function).
#include <algorithm>
#include <utility>

#include "core/lower/lower_internal.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

namespace {

/// Output positions [lo, hi) along one axis whose window lies inside [0, in).
std::pair<int64_t, int64_t> interiorRange(int64_t in, int64_t out, int64_t kernel, int64_t stride,
                                          int64_t pad, int64_t dilation) {
  int64_t lo = (pad + stride - 1) / stride;
  int64_t last = in - 1 + pad - (kernel - 1) * dilation;  // largest valid o·stride
  int64_t hi = last < 0 ? 0 : last / stride + 1;
  lo = std::min(lo, out);
  hi = std::clamp(hi, lo, out);
  return {lo, hi};
}

struct ConvShape {
  int64_t n, c, h, w;      // input
  int64_t oc, cg, kh, kw;  // weight (cg = input channels per group)
  int64_t oh, ow;          // output
  int64_t groups, ocg;     // groups and output channels per group
  std::vector<int64_t> stride, pad, dil;
};

/// Which window bounds a range of output positions must check along one axis.
struct Checks {
  bool low = false, high = false;  // index >= 0, index < extent
};

/// The checks needed by output positions [begin, end) along one axis.
Checks checksFor(int64_t begin, int64_t end, int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                 int64_t dilation) {
  return {begin * stride - pad < 0, (end - 1) * stride - pad + (kernel - 1) * dilation >= in};
}

/// `v >= 0 && v < extent`, keeping only the requested halves; undefined when neither.
Expr boundsCondition(const Expr& v, int64_t extent, Checks checks) {
  Expr lo = checks.low ? v >= 0 : Expr(), hi = checks.high ? v < extent : Expr();
  if (lo.defined() && hi.defined()) return lo && hi;
  return lo.defined() ? lo : hi;
}

class ConvBuilder {
 public:
  /// `yBase` is the offset of y[n, oc, 0, 0].
  ConvBuilder(const OpContext& ctx, ConvShape s, Expr n, Expr oc, Expr yBase, Buffer acc)
      : m_ctx(ctx), m_s(std::move(s)), m_n(std::move(n)), m_oc(std::move(oc)), m_yBase(std::move(yBase)),
        m_acc(std::move(acc)) {}

  Stmt build() {
    auto [lo, hi] = interiorRange(m_s.h, m_s.oh, m_s.kh, m_s.stride[0], m_s.pad[0], m_s.dil[0]);
    return Seq::make({rowLoop(0, lo), rowLoop(lo, hi), rowLoop(hi, m_s.oh)});
  }

 private:
  Stmt rowLoop(int64_t begin, int64_t end) {
    if (begin >= end) return Stmt();
    Checks hChecks = checksFor(begin, end, m_s.h, m_s.kh, m_s.stride[0], m_s.pad[0], m_s.dil[0]);
    Expr oh = Var::make("oh");
    auto [lo, hi] = interiorRange(m_s.w, m_s.ow, m_s.kw, m_s.stride[1], m_s.pad[1], m_s.dil[1]);
    std::vector<Stmt> cols;
    for (auto [b, e] : {std::pair{int64_t{0}, lo}, std::pair{lo, hi}, std::pair{hi, m_s.ow}}) {
      if (b >= e) continue;
      Checks wChecks = checksFor(b, e, m_s.w, m_s.kw, m_s.stride[1], m_s.pad[1], m_s.dil[1]);
      Expr ow = Var::make("ow");
      cols.push_back(serialFor(ow, b, e - b, point(oh, ow, hChecks, wChecks)));
    }
    return serialFor(oh, begin, end - begin, Seq::make(std::move(cols)));
  }

  // One output element: acc = bias; acc += x·w over (ic, kh, kw); y = acc.
  Stmt point(const Expr& oh, const Expr& ow, Checks hChecks, Checks wChecks) {
    const Buffer &x = m_ctx.in[0], &w = m_ctx.in[1], &y = m_ctx.out[0];
    Type t = y->elemType;
    Expr ic = Var::make("ic"), kh = Var::make("kh"), kw = Var::make("kw");
    Expr ih = oh * m_s.stride[0] - m_s.pad[0] + kh * m_s.dil[0];
    Expr iw = ow * m_s.stride[1] - m_s.pad[1] + kw * m_s.dil[1];
    Expr channel = m_n * m_s.c + ic;
    if (m_s.groups > 1) channel = channel + m_oc / m_s.ocg * m_s.cg;
    Expr xIndex = (channel * m_s.h + ih) * m_s.w + iw;
    Expr wIndex = ((m_oc * m_s.cg + ic) * m_s.kh + kh) * m_s.kw + kw;
    Stmt mac = storeLocal(m_acc, loadLocal(m_acc) + Load::make(x, xIndex) * Load::make(w, wIndex));
    if (Expr cond = boundsCondition(iw, m_s.w, wChecks); cond.defined()) mac = IfThenElse::make(cond, mac);
    Stmt kwLoop = serialFor(kw, 0, m_s.kw, mac);
    if (Expr cond = boundsCondition(ih, m_s.h, hChecks); cond.defined()) kwLoop = IfThenElse::make(cond, kwLoop);
    Stmt reduce = serialFor(ic, 0, m_s.cg, serialFor(kh, 0, m_s.kh, kwLoop));

    Expr init = m_ctx.in.size() == 3 ? Load::make(m_ctx.in[2], m_oc) : literal(t, 0);
    Expr yIndex = m_yBase + oh * m_s.ow + ow;
    return Seq::make({storeLocal(m_acc, init), reduce, Store::make(y, yIndex, loadLocal(m_acc))});
  }

  const OpContext& m_ctx;
  ConvShape m_s;
  Expr m_n, m_oc, m_yBase;
  Buffer m_acc;
};

}  // namespace

Stmt lowerConv2d(const OpContext& ctx) {
  ctx.requireFloat();
  const Shape &xs = ctx.inTypes[0].shape, &ws = ctx.inTypes[1].shape, &ys = ctx.outTypes[0].shape;
  ConvShape s;
  s.n = xs[0], s.c = xs[1], s.h = xs[2], s.w = xs[3];
  s.oc = ws[0], s.cg = ws[1], s.kh = ws[2], s.kw = ws[3];
  s.oh = ys[2], s.ow = ys[3];
  s.groups = ctx.attrs.getInt("groups", 1);
  s.ocg = s.oc / s.groups;
  s.stride = ctx.pairAttr("stride", 1);
  s.pad = ctx.pairAttr("padding", 0);
  s.dil = ctx.pairAttr("dilation", 1);

  bool parallel = wantParallel(ctx.outTypes[0].numel(), s.cg * s.kh * s.kw);
  LoopNest outer({s.n, s.oc}, {"n", "oc"}, parallel, ParallelPolicy::FuseAll);
  Buffer acc = makeLocal("acc", ctx.out[0]->elemType);
  Expr yBase = outer.offset({s.oc * s.oh * s.ow, s.oh * s.ow});
  ConvBuilder builder(ctx, s, outer[0], outer[1], yBase, acc);
  return outer.wrap(builder.build(), {acc});
}

// y[m, n] = bias[n] + Σ_k x[m, k] · w[n, k] with x flattened to [M, K].
Stmt lowerDense(const OpContext& ctx) {
  ctx.requireFloat();
  const Shape& xs = ctx.inTypes[0].shape;
  int64_t k = xs.back(), n = ctx.inTypes[1].shape[0];
  int64_t m = 1;
  for (size_t d = 0; d + 1 < xs.size(); ++d) m *= xs[d];
  Type t = ctx.out[0]->elemType;

  LoopNest nest({m, n}, {"m", "n"}, wantParallel(ctx.outTypes[0].numel(), k));
  Buffer acc = makeLocal("acc", t);
  Expr kv = Var::make("k");
  Expr product = Load::make(ctx.in[0], nest.offset({k, 0}) + kv) * Load::make(ctx.in[1], nest.offset({0, k}) + kv);
  Expr init = ctx.in.size() == 3 ? Load::make(ctx.in[2], nest[1]) : literal(t, 0);
  Stmt body = Seq::make({storeLocal(acc, init), serialFor(kv, 0, k, storeLocal(acc, loadLocal(acc) + product)),
                         Store::make(ctx.out[0], nest.offset({n, 1}), loadLocal(acc))});
  return nest.wrap(body, {acc});
}

// Numpy matmul: a [..., M, K] (or [K]) · b [..., K, N] (or [K]) with broadcast batch axes. The
// loop nest runs over the output's axes; each operand is read through strides that are 0 along
// broadcast batch axes and along the other operand's matrix axis.
Stmt lowerMatmul(const OpContext& ctx) {
  ctx.requireFloat();
  const Shape &as = ctx.inTypes[0].shape, &bs = ctx.inTypes[1].shape, &ys = ctx.outTypes[0].shape;
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  int64_t k = as.back();
  int64_t n = bVec ? 1 : bs.back();
  size_t batchRank = ys.size() - (aVec ? 0 : 1) - (bVec ? 0 : 1);
  std::vector<int64_t> aFull = contiguousStrides(as), bFull = contiguousStrides(bs);

  // Per output axis: the stride of each operand.
  std::vector<int64_t> aStrides(ys.size(), 0), bStrides(ys.size(), 0);
  auto batchStrides = [&](const Shape& shape, bool vec, const std::vector<int64_t>& full, std::vector<int64_t>& out) {
    size_t opBatch = vec ? 0 : shape.size() - 2;
    size_t lead = batchRank - opBatch;
    for (size_t d = lead; d < batchRank; ++d) out[d] = shape[d - lead] == 1 ? 0 : full[d - lead];
  };
  batchStrides(as, aVec, aFull, aStrides);
  batchStrides(bs, bVec, bFull, bStrides);
  std::vector<std::string> names;
  for (size_t d = 0; d < batchRank; ++d) names.push_back("b" + std::to_string(d));
  if (!aVec) {
    aStrides[batchRank] = k;  // the m axis
    names.push_back("m");
  }
  if (!bVec) {
    bStrides[ys.size() - 1] = 1;  // the n axis
    names.push_back("n");
  }

  Type t = ctx.out[0]->elemType;
  LoopNest nest(ys, names, wantParallel(ctx.outTypes[0].numel(), k));
  Buffer acc = makeLocal("acc", t);
  Expr kv = Var::make("k");
  Expr product = Load::make(ctx.in[0], nest.offset(aStrides) + kv) * Load::make(ctx.in[1], nest.offset(bStrides) + kv * n);
  Stmt body = Seq::make({storeLocal(acc, literal(t, 0)), serialFor(kv, 0, k, storeLocal(acc, loadLocal(acc) + product)),
                         Store::make(ctx.out[0], nest.offset(contiguousStrides(ys)), loadLocal(acc))});
  return nest.wrap(body, {acc});
}

}  // namespace kiln::core::lower
