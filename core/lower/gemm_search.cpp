// The plain GEMM nests (matmul, dense, dense_packed) and their sketch rules; see gemm_search.h.
#include "core/lower/gemm_search.h"

#include <algorithm>
#include <tuple>

#include "core/lower/conv_search.h"
#include "core/lower/lower_internal.h"
#include "core/lower/nest_search.h"
#include "core/lower/schedule.h"
#include "core/lower/winograd_search.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

namespace {

/// The parts of `key`, a key of `kind` over f32 (what a plain function is built for); throws
/// kiln::Error otherwise.
TuneKeyParts f32KeyOfKind(const std::string& key, const std::string& kind) {
  TuneKeyParts parts = parseTuneKey(key);
  if (parts.kind != kind) throw Error("tuning key '" + key + "' is not a " + kind + " key", ErrorKind::InvalidInput);
  std::optional<DType> dtype = runtime::parseDType(parts.dtype);
  if (!dtype || *dtype != DType::Float32)
    throw Error("tuning key '" + key + "': only f32 " + kind + " is supported", ErrorKind::Unsupported);
  return parts;
}

/// Axes of `batch` longer than 1.
size_t longAxes(const Shape& batch) {
  return static_cast<size_t>(std::count_if(batch.begin(), batch.end(), [](int64_t d) { return d > 1; }));
}

/// Indices of flat batch `flat` over `batch` (outermost first); {} for no batch axes. Axes of
/// length 1 are 0 and the outermost longer axis takes the rest undivided, so a batch with one
/// such axis ([1, heads]) indexes affinely (what parallel()'s disjointness proof needs).
std::vector<Expr> batchIndex(const Expr& flat, const Shape& batch) {
  std::vector<Expr> idx(batch.size(), i64(0));
  Expr rest = flat;
  size_t left = longAxes(batch);
  for (size_t d = batch.size(); d-- > 0;) {
    if (batch[d] == 1) continue;
    idx[d] = --left == 0 ? rest : rest % batch[d];
    if (left > 0) rest = rest / batch[d];
  }
  return idx;
}

/// Element offset of an operand's matrix at output batch indices `idx` (0 along broadcast axes).
Expr batchOffset(const Shape& operand, const Shape& batch, const std::vector<Expr>& idx) {
  size_t opBatch = operand.size() - 2, lead = batch.size() - opBatch;
  int64_t stride = operand[operand.size() - 2] * operand.back();
  Expr offset = i64(0);
  for (size_t d = opBatch; d-- > 0;) {
    if (operand[d] != 1) offset = offset + idx[lead + d] * stride;
    stride *= operand[d];
  }
  return offset;
}

int64_t keyParam(const Knobs& params, const std::string& name, const std::string& key) {
  auto it = params.find(name);
  if (it == params.end() || it->second < 0)
    throw Error("tuning key '" + key + "': missing or negative '" + name + "'", ErrorKind::InvalidInput);
  return it->second;
}

}  // namespace

std::optional<MatmulShape> matmulShape(const Shape& a, const Shape& b) {
  if (a.size() < 2 || b.size() < 2 || a.back() != b[b.size() - 2]) return std::nullopt;
  MatmulShape s;
  s.a = a, s.b = b;
  s.m = a[a.size() - 2], s.k = a.back(), s.n = b.back();
  size_t ra = a.size() - 2, rb = b.size() - 2, rank = std::max(ra, rb);
  s.batch.assign(rank, 1);
  for (size_t d = 0; d < rank; ++d) {
    int64_t da = d + ra >= rank ? a[d + ra - rank] : 1, db = d + rb >= rank ? b[d + rb - rank] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    s.batch[d] = da == 1 ? db : da;
  }
  for (int64_t d : s.batch) s.batches *= d;
  return s;
}

std::string matmulTuneKey(const MatmulShape& s, DType dtype) {
  std::string text = "ra=" + std::to_string(s.a.size());
  for (size_t d = 0; d < s.a.size(); ++d) text += ",a" + std::to_string(d) + "=" + std::to_string(s.a[d]);
  text += ",rb=" + std::to_string(s.b.size());
  for (size_t d = 0; d < s.b.size(); ++d) text += ",b" + std::to_string(d) + "=" + std::to_string(s.b[d]);
  return "matmul:" + text + ":" + std::string(runtime::dtypeName(dtype));
}

MatmulShape matmulShapeOfKey(const Knobs& params, const std::string& key) {
  auto shapeOf = [&](const std::string& prefix) {
    int64_t rank = keyParam(params, "r" + prefix, key);
    if (rank < 2 || rank > 8) throw Error("tuning key '" + key + "': operand rank must be 2 to 8", ErrorKind::InvalidInput);
    Shape shape;
    for (int64_t d = 0; d < rank; ++d) shape.push_back(keyParam(params, prefix + std::to_string(d), key));
    return shape;
  };
  std::optional<MatmulShape> s = matmulShape(shapeOf("a"), shapeOf("b"));
  if (!s) throw Error("tuning key '" + key + "': the operand shapes do not multiply", ErrorKind::InvalidInput);
  return *s;
}

Stmt matmulPlainNest(const MatmulShape& s, const Buffer& a, const Buffer& b, const Buffer& y) {
  Type elem = y->elemType;
  Expr bb = Var::make("b"), i = Var::make("i"), j = Var::make("j"), k = Var::make("k");
  std::vector<Expr> idx = batchIndex(bb, s.batch);
  Expr yOff = bb * (s.m * s.n) + i * s.n + j;
  Expr aOff = batchOffset(s.a, s.batch, idx) + i * s.k + k;
  Expr bOff = batchOffset(s.b, s.batch, idx) + k * s.n + j;
  // The first step of the reduction starts from 0: no separate pass sets y.
  Expr start = Select::make(EQ::make(k, i64(0)), literal(elem, 0), Load::make(y, yOff));
  Stmt update = Store::make(y, yOff, start + Load::make(a, aOff) * Load::make(b, bOff));
  return serialFor(bb, 0, s.batches,
                   serialFor(i, 0, s.m, serialFor(j, 0, s.n, serialFor(k, 0, s.k, update))));
}

PrimFunc matmulPlainFunc(const std::string& key) {
  TuneKeyParts parts = f32KeyOfKind(key, "matmul");
  MatmulShape s = matmulShapeOfKey(parts.params, key);
  Type elem = Type::f32();
  Shape ys = s.batch;
  ys.push_back(s.m);
  ys.push_back(s.n);
  Buffer a = makeBuffer("a", elem, s.a), b = makeBuffer("b", elem, s.b), y = makeBuffer("y", elem, ys);
  PrimFunc f;
  f.name = "matmul";
  f.params = {a, b, y};
  f.numOutputs = 1;
  f.body = matmulPlainNest(s, a, b, y);
  return f;
}

int matmulDefaultRows(int64_t m) {
  if (fourRowsWithATail(m)) return 4;  // as dense_packed's default (ViT's 197 tokens)
  for (int rows : {4, 3, 2})
    if (m % rows == 0) return rows;
  return 1;
}

int matmulDefaultVectors(int rows, int budget) { return std::max(1, std::min(4, (budget - 1) / rows - 1)); }

int matmulLanes(const MatmulShape& s, int lanes) {
  int l = std::max(1, lanes);
  while (l > 2 && l > s.n) l /= 2;
  return l;
}

namespace {

/// The one-column form's annotation fits (see gemm_search.h): mi rows (at most 8 and M), no
/// column vectors or cache block, a parallel loop of the ones offered.
bool dotAnnotationFits(const MatmulShape& s, const Knobs& knobs) {
  int64_t mi = knob(knobs, "mi", 0), par = knob(knobs, "par", -1);
  if (mi < 1 || mi > std::min<int64_t>(8, s.m) || knobs.count("nv") || knob(knobs, "kt", 0) != 0)
    return false;
  if (par < 0 || par > 3) return false;
  if (par == 1 && s.m / mi < 2) return false;
  if (par == 2 && s.batches < 2) return false;
  if (par == 3 && (s.batches < 2 || s.m / mi < 2 || s.m % mi != 0)) return false;
  return true;
}

}  // namespace

bool matmulAnnotationFits(const MatmulShape& s, const Knobs& knobs, int lanes) {
  if (s.n == 1) return dotAnnotationFits(s, knobs);
  lanes = matmulLanes(s, lanes);
  int64_t mi = knob(knobs, "mi", 0), nv = knob(knobs, "nv", 0), kt = knob(knobs, "kt", 0), par = knob(knobs, "par", 0);
  if (mi < 1 || mi > s.m || nv < 1 || lanes < 2 || nv * lanes > s.n) return false;
  if (kt < 0 || (kt > 0 && (kt >= s.k || s.k % kt != 0))) return false;
  if (par < 0 || par > 3) return false;
  // parallel() proves the iterations of i_o, of the batch loop (its index divided when two batch
  // axes are longer than 1) and of the fused loop disjoint without replaying them, tail loops
  // included (tir/schedule_analysis.h), but not with a cache block of the reduction (kt), whose
  // tile is read back between blocks: then the batch and fused loops replay the whole product,
  // within a budget.
  if (par == 1 && s.m / mi < 2) return false;
  const bool replayed = kt > 0 && s.batches * s.m * s.n * s.k > kMatmulCheckedIterations;
  if (par == 2 && (s.batches < 2 || replayed)) return false;
  if (par == 3 && (s.batches < 2 || s.m / mi < 2 || replayed)) return false;
  return true;
}

std::vector<Knobs> matmulAnnotations(const MatmulShape& s, int lanes) {
  std::vector<Knobs> out;
  if (s.n == 1) {
    for (int64_t par : {3, 2, 1, 0})
      for (int64_t mi = 1; mi <= 8; ++mi) {
        Knobs k{{"mi", mi}, {"par", par}};
        if (dotAnnotationFits(s, k)) out.push_back(std::move(k));
      }
    return out;
  }
  std::vector<int64_t> kts{0};
  for (int64_t kt : {16, 32, 64, 128, 256})
    if (kt < s.k && s.k % kt == 0) kts.push_back(kt);
  for (int64_t par : {3, 2, 1, 0})
    for (int64_t kt : kts)
      for (int64_t mi : {1, 2, 3, 4, 5, 6, 8})
        for (int64_t nv : {1, 2, 3, 4}) {
          // The register tile: mi·nv accumulators, nv vectors of b and a broadcast at most.
          if (mi * nv + nv + 1 > 16) continue;
          Knobs k{{"mi", mi}, {"nv", nv}, {"kt", kt}, {"par", par}};
          if (matmulAnnotationFits(s, k, lanes)) out.push_back(std::move(k));
        }
  return out;
}

Knobs matmulDefaultKnobs(const MatmulShape& s, int lanes, int budget) {
  lanes = matmulLanes(s, lanes);
  const int64_t mi = matmulDefaultRows(s.m);
  if (s.n == 1) {
    // The one-column form: the hand-written dot-product rows it replaced, parallel as below.
    std::vector<int64_t> pars{0};
    if (wantParallel(s.batches * s.m, s.k)) pars = {3, 2, 1, 0};
    for (int64_t par : pars)
      if (Knobs k{{"mi", mi}, {"par", par}}; dotAnnotationFits(s, k)) return k;
    return {{"mi", mi}, {"par", 0}};
  }
  const int64_t nv = std::min<int64_t>(matmulDefaultVectors(static_cast<int>(mi), budget),
                                       std::max<int64_t>(1, s.n / lanes));
  // The parallel loop, when the product is worth threads: batches × row tiles fused, else the
  // batches, else the row tiles.
  std::vector<int64_t> pars{0};
  if (wantParallel(s.batches * s.m * s.n, s.k)) pars = {3, 2, 1, 0};
  for (int64_t par : pars) {
    Knobs k{{"mi", mi}, {"nv", nv}, {"kt", 0}, {"par", par}};
    if (matmulAnnotationFits(s, k, lanes)) return k;
  }
  return {{"mi", mi}, {"nv", nv}, {"kt", 0}, {"par", 0}};
}

std::optional<Knobs> matmulAnnotationOf(const MatmulShape& s, const Knobs& knobs, int lanes, int budget) {
  if (knobs.count("mi")) return knobs;
  if (!knobs.count("rows") || !knobs.count("cols") || s.n == 1) return std::nullopt;
  Knobs k = matmulDefaultKnobs(s, lanes, budget);
  k["mi"] = knobs.at("rows");
  k["nv"] = knobs.at("cols");
  // The default's parallel loop where it fits the record's tile, else the first that does.
  for (int64_t par : {k.at("par"), int64_t{3}, int64_t{2}, int64_t{1}, int64_t{0}}) {
    k["par"] = par;
    if (matmulAnnotationFits(s, k, lanes)) return k;
  }
  return std::nullopt;
}

bool matmulTraceIsStale(const Trace& trace) {
  for (const TraceStep& step : trace.steps())
    for (const std::string& loop : step.loops)
      if (loop == "zb" || loop == "zi" || loop == "zj" || loop.rfind("zj_", 0) == 0) return true;
  return false;
}

namespace {

/// Loops of `sched` that are not in `before` and not in `except`, outer first.
std::vector<std::string> newLoops(const Schedule& sched, const std::vector<std::string>& before,
                                  const std::vector<std::string>& except) {
  std::vector<std::string> out;
  for (const std::string& name : sched.loopNames())
    if (std::find(before.begin(), before.end(), name) == before.end() &&
        std::find(except.begin(), except.end(), name) == except.end())
      out.push_back(name);
  return out;
}

/// A dot-product tile (dense, the one-column matmul) on `k` (extent `reduction`), `rows` (extent
/// `height`), `cols` (extent `width`) perfectly
/// nested in that order (k outermost): the sums in registers from the bias, vectors of `lanes`
/// partial sums per element over the first K - K mod lanes steps, folded as a tree, the rest
/// scalar. `bytes` (u8 · i8 products into i32): each partial sum takes four consecutive steps at
/// once (dot4), so the vectors cover the first K - K mod 4·lanes steps.
void dotTile(Schedule& sched, int64_t reduction, const std::string& k, const std::string& rows,
             int64_t height, const std::string& cols, int64_t width, int lanes, bool bytes = false) {
  // The tile's loops and their copies; rfactor makes _init and _fold copies only of the loops
  // that move the element (a loop of one iteration does not).
  auto unrollTile = [&](const std::string& r, const std::string& c) {
    const std::vector<std::string> names = sched.loopNames();
    auto has = [&](const std::string& l) { return std::find(names.begin(), names.end(), l) != names.end(); };
    if (height > 1 && has(r)) sched.unroll(r);
    if (width > 1 && has(c)) sched.unroll(c);
  };
  sched.cacheWrite(k);
  const int64_t span = bytes ? 4 : 1;  // steps of K per partial sum and step
  if (lanes < 2 || reduction < lanes * span) {
    // No vector of the reduction: scalar sums over the tile.
    unrollTile(rows, cols);
    return;
  }
  std::vector<std::string> before = sched.loopNames();
  auto [ko, ki] = sched.split(k, lanes * span, TailStrategy::Loop);
  std::vector<std::string> tail = newLoops(sched, before, {ko, ki});  // k, rows, cols of the scalar steps
  std::string word;                                                   // the four steps of one dot4
  if (bytes) std::tie(ki, word) = sched.split(ki, 4, TailStrategy::Loop);
  sched.reorder(bytes ? std::vector<std::string>{rows, cols, ki, word}
                      : std::vector<std::string>{rows, cols, ki});
  sched.rfactor(ki);
  if (bytes) sched.dot4(word);
  sched.vectorize(ki);
  sched.vectorize(ki + "_init");
  foldPartialsAsTree(sched, ki + "_fold");
  unrollTile(rows, cols);
  unrollTile(rows + "_init", cols + "_init");
  unrollTile(rows + "_fold", cols + "_fold");
  if (tail.size() == 3) unrollTile(tail[1], tail[2]);
}

/// The one-column matmul's sketch (N = 1: b is contiguous along k, as a row of dense's w): rows of
/// `mi` (a tail loop for M mod mi), each tile a dot-product tile over k, and the parallel loop of
/// `par` (1 the row tiles, 2 the batches, 3 both fused).
void applyMatmulDotSketch(Schedule& sched, const MatmulShape& s, const Knobs& knobs, int lanes) {
  const int64_t mi = knobs.at("mi"), par = knobs.at("par");
  int l = std::max(1, lanes);
  while (l > 1 && l > s.k) l /= 2;
  std::vector<std::string> before = sched.loopNames();
  auto [io, ii] = sched.split("i", mi, TailStrategy::Loop);
  std::vector<std::string> tail = newLoops(sched, before, {io, ii});  // rows, j, k of the tail
  sched.reorder({"k", ii, "j"});
  dotTile(sched, s.k, "k", ii, mi, "j", 1, l);
  if (s.m % mi != 0) {
    KILN_ASSERT(tail.size() == 3, "matmul sketch: the row tail is not a three-loop nest");
    sched.reorder({tail[2], tail[0], tail[1]});
    dotTile(sched, s.k, tail[2], tail[0], s.m % mi, tail[1], 1, l);
  }
  if (par == 1) sched.parallel(io);
  if (par == 2) sched.parallel("b");
  if (par == 3) sched.parallel(sched.fuse("b", io));
}

/// The sketch's register tiles on one block of rows: `rows`, `cols` and `k` perfectly nested in
/// that order (k innermost), `rows` of extent `height`. Returns the vector loops to vectorize last
/// (parallel() comes first).
std::vector<std::string> tileRows(Schedule& sched, const MatmulShape& s, const std::string& rows,
                                  int64_t height, const std::string& cols, const std::string& k, int64_t nv,
                                  int64_t kt, int lanes) {
  sched.reorder({cols, rows});
  const int64_t width = nv * lanes, rest = s.n % width;
  std::vector<std::string> before = sched.loopNames();
  auto [jo, ji] = sched.split(cols, width, TailStrategy::Loop);
  std::vector<std::string> tail = newLoops(sched, before, {jo, ji});  // cols, rows, k of the tail
  std::string acc = k;
  if (kt > 0) {
    auto [ko, ki] = sched.split(k, kt, TailStrategy::Guard);
    sched.reorder({ko, jo, ki, rows, ji});
    acc = ki;
  } else {
    sched.reorder({jo, k, rows, ji});
  }
  auto [jv, jl] = sched.split(ji, lanes, TailStrategy::Guard);
  if (nv > 1) sched.unroll(jv);
  if (height > 1) sched.unroll(rows);
  // The register tile accumulates in a local buffer over the (blocked) reduction.
  sched.cacheWrite(acc);
  std::vector<std::string> vectors = {jl, jl + "_r", jl + "_w"};
  if (rest == 0) return vectors;
  // The last N mod (nv·L) columns: one narrower tile, in vectors of halving widths.
  KILN_ASSERT(tail.size() == 3, "matmul sketch: the column tail is not a three-loop nest");
  sched.reorder({tail[2], tail[1], tail[0]});
  if (height > 1) sched.unroll(tail[1]);
  sched.cacheWrite(tail[2]);
  if (rest >= 2)
    for (const char* suffix : {"", "_r", "_w"}) vectors.push_back(tail[0] + suffix);
  return vectors;
}

}  // namespace

void applyMatmulSketch(Schedule& sched, const MatmulShape& s, const Knobs& knobs, int lanes) {
  if (!matmulAnnotationFits(s, knobs, lanes))
    throw Error("matmul sketch: annotation '" + knobsText(knobs) + "' does not fit the shape",
                ErrorKind::InvalidInput);
  if (s.n == 1) return applyMatmulDotSketch(sched, s, knobs, lanes);
  lanes = matmulLanes(s, lanes);
  int64_t mi = knobs.at("mi"), nv = knobs.at("nv"), kt = knob(knobs, "kt", 0), par = knob(knobs, "par", 0);
  std::vector<std::string> before = sched.loopNames();
  auto [io, ii] = sched.split("i", mi, TailStrategy::Loop);
  std::vector<std::string> tail = newLoops(sched, before, {io, ii});  // rows, cols, k of the tail
  std::vector<std::string> vectors = tileRows(sched, s, ii, mi, "j", "k", nv, kt, lanes);
  if (s.m % mi != 0) {
    // The last M mod mi rows: one shorter tile over the whole reduction.
    KILN_ASSERT(tail.size() == 3, "matmul sketch: the row tail is not a three-loop nest");
    std::vector<std::string> more = tileRows(sched, s, tail[0], s.m % mi, tail[1], tail[2], nv, 0, lanes);
    vectors.insert(vectors.end(), more.begin(), more.end());
  }
  if (par == 1) sched.parallel(io);
  if (par == 2) sched.parallel("b");
  if (par == 3) {
    // With tail rows, the batch loop is distributed first: the row tiles of every batch in one
    // parallel loop, then the tail rows of every batch in another.
    if (s.m % mi != 0) {
      std::vector<std::string> parts = sched.fission("b");
      for (size_t p = 1; p < parts.size(); ++p) sched.parallel(parts[p]);
    }
    sched.parallel(sched.fuse("b", io));
  }
  for (const std::string& v : vectors) sched.vectorize(v);
}

Trace matmulTrace(const std::string& key, const Knobs& knobs, int lanes) {
  PrimFunc f = matmulPlainFunc(key);
  MatmulShape s = matmulShapeOfKey(parseTuneKey(key).params, key);
  Schedule sched(f);
  applyMatmulSketch(sched, s, knobs, lanes);
  return sched.trace();
}

std::string densePackedTuneKey(const DensePackedShape& s, DType dtype) {
  return "dense_packed:m=" + std::to_string(s.m) + ",k=" + std::to_string(s.k) + ",n=" + std::to_string(s.n) +
         ",p=" + std::to_string(s.panel) + ",b=" + std::to_string(s.bias ? 1 : 0) + ":" +
         std::string(runtime::dtypeName(dtype));
}

DensePackedShape densePackedShapeOfKey(const Knobs& params, const std::string& key) {
  DensePackedShape s;
  s.m = keyParam(params, "m", key), s.k = keyParam(params, "k", key), s.n = keyParam(params, "n", key);
  s.panel = keyParam(params, "p", key);
  s.bias = keyParam(params, "b", key) != 0;
  if (s.m < 1 || s.k < 1 || s.panel < 1 || s.n < s.panel || s.n % s.panel != 0)
    throw Error("tuning key '" + key + "': the panel width must divide n, all sizes positive", ErrorKind::InvalidInput);
  return s;
}

Stmt densePackedPlainNest(const DensePackedShape& s, const Buffer& x, const Buffer& w, const Buffer& bias,
                          const Buffer& y) {
  Type elem = y->elemType;
  Expr i = Var::make("i"), p = Var::make("p"), j = Var::make("j"), k = Var::make("k");
  Expr col = p * s.panel + j, yOff = i * s.n + col;
  Expr start = bias ? Load::make(bias, col) : literal(elem, 0);
  Expr product = Load::make(x, i * s.k + k) * Load::make(w, (p * s.k + k) * s.panel + j);
  // The first step of the reduction starts from the bias: no separate pass sets y.
  Stmt update = Store::make(y, yOff, Select::make(EQ::make(k, i64(0)), start, Load::make(y, yOff)) + product);
  return serialFor(i, 0, s.m, serialFor(p, 0, s.n / s.panel, serialFor(j, 0, s.panel, serialFor(k, 0, s.k, update))));
}

PrimFunc densePackedPlainFunc(const std::string& key) {
  TuneKeyParts parts = f32KeyOfKind(key, "dense_packed");
  DensePackedShape s = densePackedShapeOfKey(parts.params, key);
  Type elem = Type::f32();
  Buffer x = makeBuffer("x", elem, {s.m, s.k}), w = makeBuffer("w", elem, {s.n / s.panel, s.k, s.panel});
  Buffer b = s.bias ? makeBuffer("b", elem, {s.n}) : nullptr, y = makeBuffer("y", elem, {s.m, s.n});
  return plainFunc("dense_packed", x, w, b, y, densePackedPlainNest(s, x, w, b, y));
}

bool fourRowsWithATail(int64_t m) { return m >= 8 && m % 4 != 0 && m % 3 != 0; }

int densePackedLanes(const DensePackedShape& s, int lanes) {
  int l = std::max(1, lanes);
  while (s.panel % l != 0) l /= 2;
  return l;
}

Knobs densePackedDefaultKnobs(const DensePackedShape& s, int lanes, int registers) {
  const int l = densePackedLanes(s, lanes);
  const int64_t vectors = s.panel / l;
  // The most rows of {4, 3, 2, 1} dividing M, then the most of the panel's vectors that fit. An M
  // that neither 4 nor 3 divides (37 tokens, 2 × a prime) takes 4 rows and a tail loop for the
  // last M mod 4 (a 1- or 2-row tile reloads the weights for every row or two), with row tiles
  // outermost (measured 2.1-2.3x faster than one row at a time on the MLP of 37 tokens); the
  // panel order with a tail, whose parallel loop is proven race-free too, is left to the tuner.
  const bool tailRows = fourRowsWithATail(s.m);
  for (int64_t mi : {4, 3, 2, 1}) {
    if (s.m % mi != 0 && !(tailRows && mi == 4)) continue;
    for (int64_t nv = vectors; nv >= 1; --nv) {
      Knobs k{{"mi", mi}, {"nv", nv}, {"po", s.m % mi == 0 ? 1 : 0}};
      if (vectors % nv == 0 && densePackedAnnotationFits(s, k, l, registers)) return k;
    }
  }
  return {{"mi", 1}, {"nv", 1}, {"po", 1}};
}

bool densePackedAnnotationFits(const DensePackedShape& s, const Knobs& knobs, int lanes, int registers) {
  int64_t mi = knob(knobs, "mi", 0), nv = knob(knobs, "nv", 0), po = knob(knobs, "po", -1);
  if (mi < 1 || mi > s.m || nv < 1 || lanes < 1 || s.panel % (nv * lanes) != 0) return false;
  return (po == 0 || po == 1) && mi * nv + nv + 1 <= registers;
}

std::vector<Knobs> densePackedAnnotations(const DensePackedShape& s, int lanes, int registers) {
  std::vector<Knobs> out;
  for (int64_t po : {1, 0})
    for (int64_t mi = 1; mi <= 8; ++mi)
      for (int64_t nv = 1; nv <= 8; ++nv) {
        Knobs k{{"mi", mi}, {"nv", nv}, {"po", po}};
        if (densePackedAnnotationFits(s, k, lanes, registers)) out.push_back(std::move(k));
      }
  return out;
}

void applyDensePackedSketch(Schedule& sched, const DensePackedShape& s, const Knobs& knobs, int lanes, int registers) {
  if (!densePackedAnnotationFits(s, knobs, lanes, registers))
    throw Error("dense_packed sketch: annotation '" + knobsText(knobs) + "' does not fit the shape", ErrorKind::InvalidInput);
  int64_t mi = knobs.at("mi"), nv = knobs.at("nv"), po = knobs.at("po");
  // Panels outermost: the row tiles and the tail rows of a panel run in one parallel loop.
  if (po == 1) sched.reorder({"p", "i"});
  auto [io, ii] = sched.split("i", mi, TailStrategy::Loop);
  auto [jo, ji] = sched.split("j", nv * lanes, TailStrategy::Guard);
  if (po == 1)
    sched.reorder({io, jo, "k", ii, ji});
  else
    sched.reorder({io, "p", jo, "k", ii, ji});
  // Scalar panels (pack-dense{lanes=1}) unroll the tile's columns instead of vectorizing them.
  const bool vectors = lanes > 1;
  std::string jl = ji;
  if (vectors) {
    auto [jv, lane] = sched.split(ji, lanes, TailStrategy::Guard);
    if (nv > 1) sched.unroll(jv);
    jl = lane;
  } else if (nv > 1) {
    sched.unroll(ji);
  }
  if (mi > 1) sched.unroll(ii);
  // The register tile accumulates in a local buffer over the whole reduction, starting from the bias.
  sched.cacheWrite("k");
  // The parallel loop, when the product is worth threads (wantParallel, as every kernel): panels ×
  // row tiles fused (many small iterations balance the threads) when the rows divide, else the
  // outermost loop.
  const bool parallel = wantParallel(s.m * s.n, s.k);
  if (parallel && po == 1 && s.m % mi == 0 && s.m / mi >= 2)
    sched.parallel(sched.fuse("p", io));
  else if (parallel && (po == 1 ? s.n / s.panel : s.m / mi) >= 2)
    sched.parallel(po == 1 ? "p" : io);
  if (vectors) {
    sched.vectorize(jl);
    sched.vectorize(jl + "_r");
    sched.vectorize(jl + "_w");
  }
  if (s.m % mi == 0) return;
  // The M mod mi last rows (the tail loop i_t; its inner loops renamed j_t, k_t, and p_t when the
  // row tiles are outermost): one row by a whole panel in registers.
  if (!vectors) {
    if (po == 1)
      sched.reorder({"k_t", "j_t"});
    else
      sched.reorder({"p_t", "i_t", "k_t", "j_t"});
    if (s.panel > 1) sched.unroll("j_t");
    sched.cacheWrite("k_t");
    if (parallel && po == 0 && s.n / s.panel >= 2) sched.parallel("p_t");
    return;
  }
  auto [to, tl] = sched.split("j_t", lanes, TailStrategy::Guard);
  if (po == 1) {
    sched.reorder({"k_t", to, tl});
  } else {
    sched.reorder({"p_t", "i_t", "k_t", to, tl});
  }
  if (s.panel > lanes) sched.unroll(to);
  sched.cacheWrite("k_t");
  if (parallel && po == 0 && s.n / s.panel >= 2) sched.parallel("p_t");
  sched.vectorize(tl);
  sched.vectorize(tl + "_r");
  sched.vectorize(tl + "_w");
}

DenseShape denseShapeOfKey(const Knobs& params, const std::string& key) {
  TuneKeyParts parts = parseTuneKey(key);
  if (parts.kind != "dense")
    throw Error("tuning key '" + key + "' is not a dense key", ErrorKind::InvalidInput);
  std::optional<DType> dtype = runtime::parseDType(parts.dtype);
  if (!dtype || (*dtype != DType::Float32 && *dtype != DType::UInt8))
    throw Error("tuning key '" + key + "': only f32 and u8 (quantized) dense are supported",
                ErrorKind::Unsupported);
  DenseShape s;
  s.m = keyParam(params, "m", key), s.k = keyParam(params, "k", key), s.n = keyParam(params, "n", key);
  if (s.m < 1 || s.k < 1 || s.n < 1)
    throw Error("tuning key '" + key + "': all sizes must be positive", ErrorKind::InvalidInput);
  s.quantized = *dtype == DType::UInt8;
  s.bias = !s.quantized;
  if (s.quantized && s.k % 4 != 0)
    throw Error("tuning key '" + key + "': a quantized dense needs K a multiple of 4",
                ErrorKind::InvalidInput);
  return s;
}

Stmt densePlainNest(const DenseShape& s, const Buffer& x, const Buffer& w, const Buffer& bias,
                    const Buffer& y) {
  Type elem = y->elemType;
  Expr i = Var::make("i"), j = Var::make("j"), k = Var::make("k");
  Expr yOff = i * s.n + j;
  Expr start = bias ? Load::make(bias, j) : literal(elem, 0);
  Expr xv = Load::make(x, i * s.k + k), wv = Load::make(w, j * s.k + k);
  if (s.quantized) xv = cast(Type::i32(), xv), wv = cast(Type::i32(), wv);
  Expr product = xv * wv;
  // The first step of the reduction starts from the bias: no separate pass sets y.
  Stmt update = Store::make(y, yOff, Select::make(EQ::make(k, i64(0)), start, Load::make(y, yOff)) + product);
  return serialFor(i, 0, s.m, serialFor(j, 0, s.n, serialFor(k, 0, s.k, update)));
}

PrimFunc densePlainFunc(const std::string& key) {
  DenseShape s = denseShapeOfKey(parseTuneKey(key).params, key);
  if (s.quantized) {
    Buffer x = makeBuffer("x", Type::u8(), {s.m, s.k}), w = makeBuffer("w", Type::i8(), {s.n, s.k});
    Buffer y = makeBuffer("y", Type::i32(), {s.m, s.n});
    return plainFunc("qnn.dense", x, w, nullptr, y, densePlainNest(s, x, w, nullptr, y));
  }
  Type elem = Type::f32();
  Buffer x = makeBuffer("x", elem, {s.m, s.k}), w = makeBuffer("w", elem, {s.n, s.k});
  Buffer b = makeBuffer("b", elem, {s.n}), y = makeBuffer("y", elem, {s.m, s.n});
  return plainFunc("dense", x, w, b, y, densePlainNest(s, x, w, b, y));
}

int denseLanes(const DenseShape& s, int lanes) {
  int l = std::max(1, lanes);
  const int64_t span = s.quantized ? 4 : 1;
  while (l > 1 && l * span > s.k) l /= 2;
  return l;
}

Knobs denseDefaultKnobs(const DenseShape& s, int registers) {
  // The tile with the most accumulators that fits: mi·nc accumulators, mi vectors of x and one
  // of w in all but two of the registers, mi dividing M, at most 8 rows of w (never more than N).
  const int64_t usable = registers - 2, widest = std::min<int64_t>(8, s.n);
  int64_t mi = 1, most = 1;
  for (int64_t rows : {4, 3, 2, 1}) {
    if (s.m % rows != 0) continue;
    int64_t cols = std::max<int64_t>(1, std::min(widest, (usable - 1 - rows) / rows));
    if (rows * cols > mi * most) mi = rows, most = cols;
  }
  // Fewer rows of w when that leaves no column tail, down to a little over half of the most.
  int64_t nc = most;
  for (int64_t c = most; c * 2 > most; --c)
    if (s.n % c == 0) {
      nc = c;
      break;
    }
  return {{"mi", mi}, {"nc", nc}, {"par", wantParallel(s.m * s.n, s.k) ? 1 : 0}};
}

bool denseAnnotationFits(const DenseShape& s, const Knobs& knobs, int registers) {
  int64_t mi = knob(knobs, "mi", 0), nc = knob(knobs, "nc", 0), par = knob(knobs, "par", -1);
  if (mi < 1 || mi > 8 || s.m % mi != 0 || nc < 1 || nc > std::min<int64_t>(16, s.n)) return false;
  return (par == 0 || par == 1) && mi * nc + mi + 1 <= registers;
}

std::vector<Knobs> denseAnnotations(const DenseShape& s, int registers) {
  std::vector<Knobs> out;
  for (int64_t par : {1, 0})
    for (int64_t mi = 1; mi <= 8; ++mi)
      for (int64_t nc = 1; nc <= 16; ++nc) {
        Knobs k{{"mi", mi}, {"nc", nc}, {"par", par}};
        if (denseAnnotationFits(s, k, registers)) out.push_back(std::move(k));
      }
  return out;
}

std::optional<Knobs> denseAnnotationOf(const DenseShape& s, const Knobs& knobs, int registers) {
  if (!knobs.count("rows") || !knobs.count("cols")) return std::nullopt;
  Knobs k{
      {"mi", knobs.at("rows")}, {"nc", knobs.at("cols")}, {"par", denseDefaultKnobs(s, registers).at("par")}};
  if (!denseAnnotationFits(s, k, registers)) return std::nullopt;
  return k;
}

void applyDenseSketch(Schedule& sched, const DenseShape& s, const Knobs& knobs, int lanes, int registers) {
  if (!denseAnnotationFits(s, knobs, registers))
    throw Error("dense sketch: annotation '" + knobsText(knobs) + "' does not fit the shape",
                ErrorKind::InvalidInput);
  const int64_t mi = knobs.at("mi"), nc = knobs.at("nc"), par = knobs.at("par");
  // One tile of rows (a classifier at batch 1) splits nothing off: the loop over rows of w is
  // then outermost.
  std::string io, ii = "i";
  if (mi < s.m) std::tie(io, ii) = sched.split("i", mi, TailStrategy::Loop);
  sched.reorder({"j", ii});
  std::vector<std::string> before = sched.loopNames();
  auto [jo, ji] = sched.split("j", nc, TailStrategy::Loop);
  std::vector<std::string> tail = newLoops(sched, before, {jo, ji});  // cols, rows, k of the column tail
  sched.reorder({"k", ii, ji});
  dotTile(sched, s.k, "k", ii, mi, ji, nc, lanes, s.quantized);
  if (s.n % nc != 0) {
    KILN_ASSERT(tail.size() == 3, "dense sketch: the column tail is not a three-loop nest");
    sched.reorder({tail[2], tail[1], tail[0]});
    dotTile(sched, s.k, tail[2], tail[1], mi, tail[0], s.n % nc, lanes, s.quantized);
  }
  if (par == 0) return;
  const int64_t rowTiles = s.m / mi, colTiles = s.n / nc;
  if (s.n % nc == 0 && rowTiles * colTiles >= 2)
    sched.parallel(rowTiles == 1 ? jo : colTiles == 1 ? io : sched.fuse(io, jo));
  else if (rowTiles >= 2)
    sched.parallel(io);
  else if (colTiles >= 2)
    sched.parallel(jo);
}

Trace sketchTrace(const std::string& key, const Knobs& knobs, int lanes, int registers) {
  TuneKeyParts parts = parseTuneKey(key);
  if (parts.kind == "matmul") return matmulTrace(key, knobs, lanes);
  if (parts.kind == "pool") return poolSketchTrace(key, knobs, registers);
  if (parts.kind == "nest" || parts.kind == "reduce" || parts.kind == "window")
    return nestSketchTrace(key, knobs, lanes, registers);
  if (parts.kind == "conv2d") return convSketchTrace(key, knobs, lanes, registers);
  if (parts.kind == "conv2d_nchwc")
    return knob(knobs, "algo", 0) != 0 ? winogradSketchTrace(key, knobs, lanes, registers)
                                       : convSketchTrace(key, knobs, lanes, registers);
  if (parts.kind == "dense") {
    Schedule sched(densePlainFunc(key));
    DenseShape s = denseShapeOfKey(parts.params, key);
    applyDenseSketch(sched, s, knobs, denseLanes(s, lanes), registers);
    return sched.trace();
  }
  if (parts.kind != "dense_packed") throw Error("tuning key '" + key + "' has no sketch", ErrorKind::InvalidInput);
  Schedule sched(densePackedPlainFunc(key));
  applyDensePackedSketch(sched, densePackedShapeOfKey(parts.params, key), knobs, lanes, registers);
  return sched.trace();
}

}  // namespace kiln::core::lower
