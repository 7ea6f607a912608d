// The transforms of Winograd convolutions, their plain nest and sketch rule; see winograd_search.h.
#include "core/lower/winograd_search.h"

#include <algorithm>
#include <cmath>

#include "core/lower/lower_internal.h"
#include "core/lower/schedule.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

namespace {

/// Σ coefficient·term over the non-zero coefficients (±1 as additions/subtractions).
Expr linearCombination(const std::vector<double>& coeffs, const std::vector<Expr>& terms, int lanes) {
  Expr sum;
  bool negated = false;  // `sum` holds the negation of the true sum
  for (size_t i = 0; i < coeffs.size(); ++i) {
    double c = coeffs[i];
    if (c == 0.0) continue;
    double magnitude = std::fabs(c);
    Expr term = magnitude == 1.0 ? terms[i] : terms[i] * splat(f32(magnitude), lanes);
    bool negative = c < 0;
    if (!sum.defined()) {
      sum = term;
      negated = negative;
    } else {
      sum = negative != negated ? sum - term : sum + term;
    }
  }
  if (!sum.defined()) return splat(f32(0.0), lanes);
  return negated ? splat(f32(0.0), lanes) - sum : sum;
}

/// Binds each expression to a fresh Var (LetStmt) around the statement `body` builds from the
/// bound values.
Stmt bindAll(const std::string& stem, const std::vector<Expr>& values,
             const std::function<Stmt(const std::vector<Expr>&)>& body) {
  std::vector<Expr> vars;
  for (size_t i = 0; i < values.size(); ++i) vars.push_back(Var::make(stem + std::to_string(i), values[i].type()));
  Stmt s = body(vars);
  for (size_t i = values.size(); i-- > 0;) s = LetStmt::make(vars[i], values[i], s);
  return s;
}

/// Row `row` of an n-column matrix stored row-major.
std::vector<double> matrixRow(const std::vector<double>& matrix, int row, int n) {
  return {matrix.begin() + row * n, matrix.begin() + (row + 1) * n};
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

ConvSketchShape WinogradShape::gemm() const {
  ConvSketchShape g;
  g.n = positions(), g.cb = cb, g.ib = ib, g.pixels = tiles;
  g.groups = og, g.vectors = vecs, g.lanes = lanes;
  g.ownWeights = true;
  return g;
}

std::optional<WinogradShape> winogradShape(const Shape& xs, const Shape& us, const Shape& ys, int m,
                                           const std::vector<int64_t>& padding, bool bias) {
  if (xs.size() != 5 || us.size() != 5 || ys.size() != 5 || padding.size() != 2 || (m != 2 && m != 4))
    return std::nullopt;
  WinogradShape s;
  s.n = xs[0], s.cb = xs[1], s.h = xs[2], s.w = xs[3], s.ib = xs[4], s.c = s.cb * s.ib;
  s.og = us[0], s.ob = us[4];
  s.lanes = ys[4], s.ocb = ys[1], s.oh = ys[2], s.ow = ys[3];
  s.m = m, s.alpha = m + 2;
  s.ph = padding[0], s.pw = padding[1];
  if (s.lanes < 1 || s.ob % s.lanes != 0 || us[1] != s.alpha || us[2] != s.alpha || us[3] != s.c) return std::nullopt;
  s.vecs = static_cast<int>(s.ob / s.lanes);
  if (ys[0] != s.n || s.ocb != s.og * s.vecs || s.ph < 0 || s.ph > 2 || s.pw < 0 || s.pw > 2) return std::nullopt;
  if (s.oh != s.h + 2 * s.ph - 2 || s.ow != s.w + 2 * s.pw - 2 || s.oh < 1 || s.ow < 1) return std::nullopt;
  s.th = ceilDiv(s.oh, m), s.tw = ceilDiv(s.ow, m);
  s.tiles = s.n * s.th * s.tw;
  s.bias = bias;
  return s;
}

std::optional<WinogradShape> winogradShapeOfKey(const std::string& key, int m, int64_t ocVecs, int lanes) {
  TuneKeyParts parts = parseTuneKey(key);
  if (parts.kind != "conv2d_nchwc") throw Error("tuning key '" + key + "' is not a conv2d_nchwc key", ErrorKind::InvalidInput);
  const ConvGeometry g = convGeometryOfKey(parts.params);
  if (!winogradEligible(g)) return std::nullopt;
  LowerOptions options;
  options.vectorLanes = lanes;
  const int64_t block = channelBlock(g.o, options), ib = channelBlock(g.c, options);
  if (ocVecs < 1 || (g.o / block) % ocVecs != 0) return std::nullopt;
  const int64_t alpha = m + 2, ob = block * ocVecs;
  return winogradShape({g.n, g.c / ib, g.h, g.w, ib}, {g.o / ob, alpha, alpha, g.c, ob},
                       {g.n, g.o / block, g.outHeight(), g.outWidth(), block}, m, {g.ph, g.pw}, true);
}

Stmt winogradInputTransform(const WinogradShape& s, const Buffer& x, const Buffer& v, ForKind outer) {
  const WinogradMatrices& mat = winogradMatrices(s.m);
  const int a = s.alpha, ib = static_cast<int>(s.ib);
  Expr f = Var::make("n_ti_icb"), tj = Var::make("tj");
  Expr icb = s.cb == 1 ? Expr(i64(0)) : f % s.cb;
  Expr rest = s.cb == 1 ? f : f / s.cb;
  Expr ti = s.th == 1 ? Expr(i64(0)) : rest % s.th;
  Expr n = s.n == 1 ? Expr(i64(0)) : (s.th == 1 ? rest : rest / s.th);
  Expr t = (n * s.th + ti) * s.tw + tj;

  // The α×α patch; loads at clamped positions, zeros outside the input.
  std::vector<Expr> patch;
  for (int i = 0; i < a; ++i) {
    Expr ih = ti * s.m + (i - s.ph);
    Expr rowInside = ih >= 0 && ih < s.h;
    Expr ihc = max(min(ih, i64(s.h - 1)), i64(0));
    for (int j = 0; j < a; ++j) {
      Expr iw = tj * s.m + (j - s.pw);
      Expr inside = rowInside && iw >= 0 && iw < s.w;
      Expr iwc = max(min(iw, i64(s.w - 1)), i64(0));
      Expr value = vload(x, (((n * s.cb + icb) * s.h + ihc) * s.w + iwc) * s.ib, ib);
      patch.push_back(Select::make(inside, value, splat(f32(0.0), ib)));
    }
  }
  Stmt body = bindAll("d", patch, [&](const std::vector<Expr>& d) {
    // Bᵀ d: rows of Bᵀ against the columns of d.
    std::vector<Expr> rows;
    for (int k = 0; k < a; ++k)
      for (int j = 0; j < a; ++j) {
        std::vector<Expr> column;
        for (int i = 0; i < a; ++i) column.push_back(d[static_cast<size_t>(i * a + j)]);
        rows.push_back(linearCombination(matrixRow(mat.bt, k, a), column, ib));
      }
    return bindAll("bd", rows, [&](const std::vector<Expr>& bd) {
      // (Bᵀ d) B: each row against the rows of Bᵀ.
      std::vector<Stmt> stores;
      for (int k = 0; k < a; ++k)
        for (int l = 0; l < a; ++l) {
          std::vector<Expr> row(bd.begin() + k * a, bd.begin() + (k + 1) * a);
          Expr offset = ((int64_t{k * a + l} * s.cb + icb) * s.tiles + t) * s.ib;
          stores.push_back(vstore(v, offset, linearCombination(matrixRow(mat.bt, l, a), row, ib)));
        }
      return Seq::make(std::move(stores));
    });
  });
  return For::make(f, i64(0), i64(s.n * s.th * s.cb), outer, serialFor(tj, 0, s.tw, body));
}

Stmt winogradOutputTile(const WinogradShape& s, const Expr& t, const std::function<Expr(int)>& m,
                        const Expr& bias,
                        const std::function<Stmt(const Expr&, const Expr&, const Expr&, const Expr&)>& store) {
  const WinogradMatrices& mat = winogradMatrices(s.m);
  const int a = s.alpha, L = static_cast<int>(s.lanes);
  const int64_t perImage = s.th * s.tw;
  Expr n = s.n == 1 ? Expr(i64(0)) : t / perImage;
  Expr inImage = s.n == 1 ? t : t % perImage;
  Expr ti = inImage / s.tw, tj = inImage % s.tw;
  std::vector<Expr> tile;
  for (int k = 0; k < a * a; ++k) tile.push_back(m(k));
  return bindAll("mt", tile, [&](const std::vector<Expr>& mt) {
    std::vector<Expr> rows;  // Aᵀ M: m × α
    for (int i = 0; i < s.m; ++i)
      for (int l = 0; l < a; ++l) {
        std::vector<Expr> column;
        for (int k = 0; k < a; ++k) column.push_back(mt[static_cast<size_t>(k * a + l)]);
        rows.push_back(linearCombination(matrixRow(mat.at, i, a), column, L));
      }
    return bindAll("am", rows, [&](const std::vector<Expr>& am) {
      std::vector<Stmt> stores;
      for (int i = 0; i < s.m; ++i)
        for (int j = 0; j < s.m; ++j) {
          std::vector<Expr> row(am.begin() + i * a, am.begin() + (i + 1) * a);
          Expr value = linearCombination(matrixRow(mat.at, j, a), row, L);
          if (bias.defined()) value = value + bias;
          Expr oh = ti * s.m + i, ow = tj * s.m + j;
          Stmt one = store(n, oh, ow, value);
          // Partial tiles exist only when m does not divide the output extent.
          Expr inside;
          if (s.oh % s.m != 0 && i > 0) inside = oh < s.oh;
          if (s.ow % s.m != 0 && j > 0) inside = inside.defined() ? (inside && ow < s.ow) : (ow < s.ow);
          stores.push_back(inside.defined() ? IfThenElse::make(inside, one) : one);
        }
      return Seq::make(std::move(stores));
    });
  });
}

Stmt winogradPlainNest(const WinogradShape& s, const Buffer& x, const Buffer& u, const Buffer& b, const Buffer& y) {
  const Type elem = y->elemType;
  const int L = static_cast<int>(s.lanes);
  Buffer v = makeBuffer("wino_v", elem, {s.positions() * s.cb * s.tiles * s.ib});
  Buffer m = makeBuffer("wino_m", elem, {s.tiles, s.positions(), s.ocb, s.lanes});
  Stmt input = winogradInputTransform(s, x, v, ForKind::Serial);
  Stmt gemm = convSketchPlainNest(s.gemm(), v, u, nullptr, m);
  Expr blk = Var::make("blk_o"), t = Var::make("t_o");
  Expr bias = b ? vload(b, blk * s.lanes, L) : Expr();
  Stmt tile = winogradOutputTile(
      s, t, [&](int k) { return vload(m, ((t * s.positions() + k) * s.ocb + blk) * s.lanes, L); }, bias,
      [&](const Expr& n, const Expr& oh, const Expr& ow, const Expr& value) {
        return vstore(y, (((n * s.ocb + blk) * s.oh + oh) * s.ow + ow) * s.lanes, value);
      });
  Stmt output = serialFor(blk, 0, s.ocb, serialFor(t, 0, s.tiles, tile));
  return Allocate::make(v, Allocate::make(m, Seq::make({input, gemm, output})));
}

PrimFunc winogradPlainFunc(const WinogradShape& s) {
  const Type elem = Type::f32();
  Buffer x = makeBuffer("x", elem, {s.n, s.cb, s.h, s.w, s.ib});
  Buffer u = makeBuffer("u", elem, {s.og, s.alpha, s.alpha, s.c, s.ob});
  Buffer b = s.bias ? makeBuffer("b", elem, {s.ocb * s.lanes}) : nullptr;
  Buffer y = makeBuffer("y", elem, {s.n, s.ocb, s.oh, s.ow, s.lanes});
  return plainFunc("conv2d_winograd_nchwc", x, u, b, y, winogradPlainNest(s, x, u, b, y));
}

namespace {

/// The annotation of the GEMM's pointwise sketch: the knobs without the algorithm.
Knobs gemmKnobs(Knobs knobs) {
  knobs.erase("algo");
  return knobs;
}

}  // namespace

bool winogradSketchFits(const WinogradShape& s, const Knobs& knobs, int registers) {
  return knob(knobs, "algo", 0) == s.m && convSketchAnnotationFits(s.gemm(), gemmKnobs(knobs), registers);
}

Knobs winogradSketchDefaultKnobs(const WinogradShape& s, int registers) {
  // The tallest tile (at most 16 tiles that fit the registers, a block's products at most 64 KB,
  // the stack's share) whose blocks merge, unless that is under half the tallest that fits
  // (then the pointwise sketch's choice, a tail loop after the blocks); weight groups outermost
  // when the transformed filter is at least as large as the transformed input (the direct
  // builder's order, schedule.h convChannelsOuter).
  const int64_t po = convChannelsOuter(s.og * s.ob, s.tiles) ? 1 : 0;
  const int64_t perTile = s.positions() * (po == 1 ? s.vecs : s.ocb) * s.lanes;  // products, floats
  int64_t tallest = 0;
  for (int64_t mi = std::min<int64_t>(16, s.tiles); mi >= 1; --mi) {
    Knobs k{{"algo", s.m}, {"mi", mi}, {"po", po}, {"oc_vecs", s.vecs}};
    if (!winogradSketchFits(s, k, registers) || (mi > 1 && mi * perTile * 4 > 64 * 1024)) continue;
    tallest = std::max(tallest, mi);
    if (2 * mi < tallest) break;
    if (winogradSketchMerges(s, k)) return k;
  }
  Knobs k = convSketchDefaultKnobs(s.gemm(), registers);
  k["algo"] = s.m;
  return k;
}

std::optional<Knobs> winogradAnnotationOf(const WinogradShape& s, const Knobs& knobs, int registers) {
  if (knobs.count("mi")) return knobs;
  if (!knobs.count("ow_block")) return std::nullopt;
  // The builder ran a narrower last block where its tile did not divide the tiles, and always
  // transformed each block's products while they were in cache. The sketch does the latter only
  // when its tile divides the tiles (winogradSketchMerges), so the record's tile is read as the
  // nearest one that merges (the narrower first), else as it is.
  const int64_t block = knobs.at("ow_block"),
                byDefault = knob(winogradSketchDefaultKnobs(s, registers), "po", 0);
  std::optional<Knobs> asItIs;
  for (int64_t po : {knob(knobs, "oc_outer", byDefault), byDefault}) {
    for (int64_t d = 0; d <= std::max<int64_t>(block, s.tiles); ++d)
      for (int64_t mi : {block - d, block + d}) {
        Knobs k{{"algo", s.m}, {"mi", mi}, {"po", po}, {"oc_vecs", s.vecs}};
        if (const int64_t chunks = parallelChunksOf(&knobs); chunks != defaultParallelChunks())
          k["par_chunks"] = chunks;
        if (mi < 1 || !winogradSketchFits(s, k, registers)) continue;
        if (winogradSketchMerges(s, k)) return k;
        if (mi == block && !asItIs) asItIs = k;
      }
  }
  return asItIs;
}

std::vector<Knobs> winogradSketchAnnotations(const WinogradShape& s, int registers) {
  std::vector<Knobs> out = convSketchAnnotations(s.gemm(), registers);
  for (Knobs& k : out) k["algo"] = s.m;
  return out;
}

namespace {

/// The GEMM's register tile of mi tiles × V vectors inside the tile blocks p_o, with the output
/// transform of each block's tiles merged into its loop (see the file comment).
void applyMergedSketch(Schedule& sched, const WinogradShape& s, int64_t mi, int64_t po, bool parallel) {
  // The GEMM: tile blocks (po = 0) or weight groups, then tile blocks (po = 1) outermost.
  if (po == 1)
    sched.reorder({"g", "p", "n", "v"});
  else
    sched.reorder({"p", "n", "g", "v"});
  auto [pOuter, pInner] = sched.split("p", mi, TailStrategy::Loop);
  if (po == 1)
    sched.reorder({pOuter, "n", "c", "i", pInner, "v", "l"});
  else
    sched.reorder({pOuter, "n", "g", "c", "i", pInner, "v", "l"});
  if (mi > 1) sched.unroll(pInner);
  if (s.vecs > 1) sched.unroll("v");
  if (s.lanes == 1) sched.unroll("l");
  sched.cacheWrite("c");
  // The output transform of the same tiles (and, po = 1, the same weight group's blocks).
  std::string blocks = "blk_o";
  if (po == 1 && s.vecs > 1) blocks = sched.split("blk_o", s.vecs, TailStrategy::Loop).first;
  sched.reorder(po == 1 ? std::vector<std::string>{blocks, "t_o"} : std::vector<std::string>{"t_o", "blk_o"});
  if (po == 1 && s.vecs > 1) sched.reorder({"t_o", "blk_o_i"});
  const std::string tiles = sched.split("t_o", mi, TailStrategy::Loop).first;
  std::string outer = pOuter;
  if (po == 1) sched.merge("g", blocks);
  sched.merge(pOuter, tiles);
  // The products of one block only, while they are in cache.
  sched.storeAt("wino_m", pOuter);
  if (po == 1 && parallel) outer = sched.fuse("g", pOuter);
  if (parallel) sched.parallel(outer);
  if (s.lanes > 1)
    for (const char* loop : {"l", "l_r", "l_w"}) sched.vectorize(loop);
}

}  // namespace

bool winogradSketchMerges(const WinogradShape& s, const Knobs& knobs) {
  const int64_t mi = knob(knobs, "mi", 0), po = knob(knobs, "po", 0);
  return mi >= 1 && s.tiles % mi == 0 && (po == 1 ? s.og : int64_t{1}) * (s.tiles / mi) >= 2;
}

void applyWinogradSketch(Schedule& sched, const WinogradShape& s, const Knobs& knobs, int registers) {
  if (!winogradSketchFits(s, knobs, registers))
    throw Error("conv2d_winograd_nchwc sketch: annotation '" + knobsText(knobs) + "' does not fit the shape",
                ErrorKind::InvalidInput);
  const bool parallelTransform = wantParallel(s.positions() * s.cb * s.tiles * s.ib, s.positions());
  const bool parallelGemm = wantParallel(s.positions() * s.ocb * s.tiles * s.lanes, s.c);
  if (winogradSketchMerges(s, knobs)) {
    applyMergedSketch(sched, s, knobs.at("mi"), knobs.at("po"), parallelGemm);
  } else {
    applyConvSketch(sched, s.gemm(), gemmKnobs(knobs), registers);
    if (wantParallel(s.n * s.ocb * s.oh * s.ow * s.lanes, s.positions())) sched.parallel("blk_o");
  }
  // The input transform: its outer loop in parallel.
  if (parallelTransform) sched.parallel("n_ti_icb");
}

Trace winogradSketchTrace(const std::string& key, const Knobs& knobs, int lanes, int registers) {
  std::optional<WinogradShape> s =
      winogradShapeOfKey(key, static_cast<int>(knob(knobs, "algo", 0)), knob(knobs, "oc_vecs", 1), lanes);
  if (!s) throw Error("tuning key '" + key + "' has no Winograd sketch for '" + knobsText(knobs) + "'", ErrorKind::InvalidInput);
  Schedule sched(winogradPlainFunc(*s));
  applyWinogradSketch(sched, *s, knobs, registers);
  return sched.trace();
}

}  // namespace kiln::core::lower
