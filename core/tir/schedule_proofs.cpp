// Static dependence proofs behind the schedule primitives' checks (schedule_analysis.h): exact
// shortcuts that prove iterations independent from the indices' affine forms, so that the
// replay of checkIterations, sharingOf and checkMerge runs only where no proof applies.
#include "core/tir/schedule_analysis.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <tuple>

#include "core/tir/functor.h"

namespace kiln::core::tir::schedule_detail {

namespace {

/// The constant offsets of a buffer's accesses as axes (step, count) whose sums from the
/// smallest offset include them all: taken apart as a sum of progressions when they are one
/// (the offsets i·W + j of an unrolled i × j tile: steps 1 and W), else one progression of their
/// gcd over their span.
std::vector<std::pair<int64_t, int64_t>> offsetAxes(const std::set<int64_t>& offsets) {
  if (offsets.size() <= 1) return {};
  std::set<int64_t> rest;
  for (int64_t c : offsets) rest.insert(c - *offsets.begin());
  std::vector<std::pair<int64_t, int64_t>> axes;
  while (rest.size() > 1) {
    // The smallest step and how many of its multiples start the set; every member must then
    // start such a run, and the runs' starts are the rest.
    const int64_t step = *std::next(rest.begin());
    int64_t count = 1;
    while (rest.count(count * step)) ++count;
    std::set<int64_t> starts;
    for (int64_t c : rest) {
      bool start = true;
      for (int64_t k = 1; k < count && start; ++k) start = rest.count(c - k * step) == 0;
      if (!start) continue;
      for (int64_t k = 0; k < count; ++k)
        if (!rest.count(c + k * step)) starts.clear(), start = false;
      if (!start) break;
      starts.insert(c);
    }
    if (starts.empty() || static_cast<int64_t>(starts.size()) * count != static_cast<int64_t>(rest.size())) {
      int64_t g = 0;
      for (int64_t c : offsets) g = std::gcd(g, c - *offsets.begin());
      return {{g, (*offsets.rbegin() - *offsets.begin()) / g + 1}};
    }
    axes.emplace_back(step, count);
    rest = std::move(starts);
  }
  return axes;
}

/// One access of a buffer inside a loop's body, for windowWrittenFirst.
struct BodyAccess {
  size_t child = 0;                 // which statement of the body's sequence holds it
  std::vector<const For*> loops;    // the loops around it inside the body
  bool conditional = false;         // under an if
  bool write = false;
  Expr index;
};

/// The elements an access reaches as its loops (constant bounds) and lanes run: `outer` (the
/// part that the loops outside decide) + base + Σ coefficient · digit over the axes (positive
/// coefficients, digit in [0, extent − 1]; a negative coefficient is flipped into the base).
struct Reach {
  std::map<std::string, int64_t> outer;
  int64_t base = 0;
  std::vector<std::pair<int64_t, int64_t>> axes;  // coefficient, extent (> 1), ascending
  int64_t lo() const { return base; }
  int64_t hi() const {
    int64_t h = base;
    for (const auto& [c, e] : axes) h += c * (e - 1);
    return h;
  }
};

std::optional<Reach> reachOf(const BodyAccess& a) {
  Expr base = a.index;
  std::vector<std::pair<int64_t, int64_t>> axes;
  if (const auto* ramp = a.index.as<Ramp>()) {
    const int64_t* stride = asConstInt(ramp->stride);
    if (!stride) return std::nullopt;
    base = ramp->base;
    axes.emplace_back(*stride, ramp->lanes);
  }
  std::set<const Var*> inner;
  std::map<const Var*, int64_t> extents;
  for (const For* l : a.loops) {
    const int64_t *mn = asConstInt(l->min), *ext = asConstInt(l->extent);
    if (!mn || *mn != 0 || !ext || *ext < 1) return std::nullopt;
    inner.insert(l->var.as<Var>());
    extents[l->var.as<Var>()] = *ext;
  }
  std::optional<Affine> form = affineForm(base, inner);
  if (!form) return std::nullopt;
  Reach r;
  r.base = form->constant;
  for (const auto& [text, term] : form->terms) {
    const Var* v = term.first.as<Var>();
    if (v && extents.count(v)) axes.emplace_back(term.second, extents.at(v));
    else if (term.second != 0) r.outer[text] = term.second;
  }
  for (const auto& [coef, ext] : axes) {
    if (coef == 0 || ext <= 1) continue;
    if (coef < 0) r.base += coef * (ext - 1);
    r.axes.emplace_back(std::abs(coef), ext);
  }
  std::sort(r.axes.begin(), r.axes.end());
  return r;
}

/// Whether every element `read` reaches is one `written` reaches, given `written` maps distinct
/// digits to distinct elements (mixed radix). Either `written` covers [lo, hi] without gaps and
/// `read` stays inside, or each read axis is a written axis (the same coefficient) and the
/// digits of read's offset from written's base (taken greedily from the largest coefficient)
/// plus the read digits stay within the written extents.
bool reachesWithin(const Reach& read, const Reach& written) {
  if (read.outer != written.outer) return false;
  int64_t reach = 0;
  bool dense = true;
  for (const auto& [c, e] : written.axes) {
    if (c <= reach) return false;  // not injective
    dense = dense && c == reach + 1;
    reach += c * (e - 1);
  }
  if (dense && read.lo() >= written.lo() && read.hi() <= written.hi()) return true;
  std::vector<int64_t> digits(written.axes.size(), 0);
  for (const auto& [c, e] : read.axes) {
    size_t k = 0;
    while (k < written.axes.size() && written.axes[k].first != c) ++k;
    if (k == written.axes.size()) return false;
    digits[k] += e - 1;
  }
  int64_t offset = read.base - written.base;
  if (offset < 0) return false;
  for (size_t k = written.axes.size(); k-- > 0;) {
    const auto& [c, e] = written.axes[k];
    const int64_t d = offset / c;
    offset -= d * c;
    if (digits[k] + d > e - 1) return false;
  }
  return offset == 0;
}

}  // namespace

/// Whether the iterations of `loop` provably touch disjoint elements of every buffer they write,
/// without replaying them: every index in the body is affine in the loop variable v and the
/// variables of inner loops (constant bounds, no integer lets), all accesses of a buffer share
/// v's coefficient c and the part outside the loop. The inner terms split into a low part (terms
/// with coefficients below |c|, and the constant) spanning [lo, hi] with hi − lo < |c|, and a
/// high part whose coefficients are all multiples of g (mixed radix, as a row index above a
/// column block: y[i·N + p·P + j] with p the loop). Then iteration t's elements are t·c + low +
/// a multiple of g; when g exceeds the span of t·c + low over the loop, two iterations that meet
/// have equal high parts, and then equal t because the low part spans fewer than |c|. The
/// constants of |c| or more may instead count as high coefficients (each is a multiple of the
/// gcd that includes it): a tail loop's rows, y[(M − r + i)·N + p·P + j], sit far from the
/// main rows' constant 0, which the low part alone cannot span. Either view proves it. A vector
/// access (a ramp of constant stride) counts its lane as one more inner term. With `among`, only
/// those buffers are checked (the others' accesses are ignored).
bool disjointIterations(const For* loop, const std::set<const BufferNode*>* among) {
  const Var* lv = loop->var.as<Var>();
  struct Ranges : IRVisitor {
    std::map<const Var*, Interval> ranges;
    std::set<const Var*> inner;
    bool ok = true;
    using IRVisitor::visit;
    void visit(const For* op) override {
      const int64_t *mn = asConstInt(op->min), *ext = asConstInt(op->extent);
      if (!mn || !ext || *ext <= 0) ok = false;
      else ranges[op->var.as<Var>()] = {*mn, *mn + *ext - 1};
      inner.insert(op->var.as<Var>());
      IRVisitor::visit(op);
    }
    void visit(const LetStmt* op) override {
      if (!op->value.type().isFloat()) ok = false;
      inner.insert(op->var.as<Var>());
      IRVisitor::visit(op);
    }
    std::set<const BufferNode*> local;  // allocated inside the body: private to an iteration
    void visit(const Allocate* op) override {
      local.insert(op->buffer.get());
      IRVisitor::visit(op);
    }
  } ranges;
  ranges.visitStmt(loop->body);
  if (!ranges.ok) return false;
  ranges.inner.insert(lv);
  struct Parts {
    int64_t lo = 0, hi = 0;  // the low part's span
    int64_t radix = 0;       // gcd of the high part's coefficients (0: no high part)
    void merge(const Parts& o) { lo = std::min(lo, o.lo), hi = std::max(hi, o.hi), radix = std::gcd(radix, o.radix); }
  };
  struct Footprint {
    int64_t coef = 0;
    Parts low, high;  // the constant in the low part; constants of |c| or more in the high part
    std::map<std::string, int64_t> outer;
    bool written = false;
  };
  struct Accesses : IRVisitor {
    const Var* lv = nullptr;
    const Ranges* ranges = nullptr;
    const std::set<const BufferNode*>* among = nullptr;
    std::map<const BufferNode*, Footprint> buffers;
    bool ok = true;
    void access(const BufferNode* buffer, const Expr& index, bool write) {
      if (!ok || ranges->local.count(buffer) || (among && !among->count(buffer))) return;
      Expr base = index;
      int64_t laneStride = 0, lanes = 1;
      if (const auto* ramp = index.as<Ramp>()) {
        const int64_t* stride = asConstInt(ramp->stride);
        if (!stride) {
          ok = false;
          return;
        }
        base = ramp->base, laneStride = *stride, lanes = ramp->lanes;
      }
      std::optional<Affine> form = affineForm(base, ranges->inner);
      if (!form) {
        ok = false;
        return;
      }
      Footprint f;
      f.written = write;
      for (const auto& [text, term] : form->terms)
        if (term.first.as<Var>() == lv) f.coef = term.second;
      Affine innerPart;
      innerPart.constant = form->constant;
      for (const auto& [text, term] : form->terms) {
        const Var* v = term.first.as<Var>();
        if (v == lv) continue;
        if (!v || !ranges->inner.count(v)) f.outer[text] = term.second;
        else if (f.coef != 0 && std::abs(term.second) >= std::abs(f.coef) && ranges->ranges.at(v).lo != ranges->ranges.at(v).hi)
          f.low.radix = std::gcd(f.low.radix, std::abs(term.second));
        else innerPart.terms[text] = term;
      }
      // The lane: an inner term of coefficient laneStride over [0, lanes − 1].
      const int64_t laneReach = laneStride * (lanes - 1);
      const bool laneHigh = f.coef != 0 && lanes > 1 && std::abs(laneStride) >= std::abs(f.coef);
      if (laneHigh) f.low.radix = std::gcd(f.low.radix, std::abs(laneStride));
      std::optional<Interval> span = boundsOf(innerPart.toExpr(Type::i64()), ranges->ranges);
      if (!span) {
        ok = false;
        return;
      }
      if (!laneHigh) span->lo += std::min<int64_t>(0, laneReach), span->hi += std::max<int64_t>(0, laneReach);
      f.high = f.low;
      f.low.lo = span->lo, f.low.hi = span->hi;
      const int64_t constant = innerPart.constant;
      const bool big = f.coef != 0 && std::abs(constant) >= std::abs(f.coef);
      f.high.lo = span->lo - (big ? constant : 0), f.high.hi = span->hi - (big ? constant : 0);
      if (big) f.high.radix = std::gcd(f.high.radix, std::abs(constant));
      auto [it, fresh] = buffers.emplace(buffer, f);
      if (fresh) return;
      Footprint& b = it->second;
      if (b.coef != f.coef || b.outer != f.outer) {
        ok = false;
        return;
      }
      b.low.merge(f.low);
      b.high.merge(f.high);
      b.written = b.written || write;
    }
    using IRVisitor::visit;
    void visit(const Load* op) override {
      access(op->buffer.get(), op->index, false);
      IRVisitor::visit(op);
    }
    void visit(const Store* op) override {
      access(op->buffer.get(), op->index, true);
      IRVisitor::visit(op);
    }
  } accesses;
  accesses.lv = lv;
  accesses.ranges = &ranges;
  accesses.among = among;
  accesses.visitStmt(loop->body);
  if (!accesses.ok) return false;
  const int64_t* extent = asConstInt(loop->extent);
  auto proves = [&](int64_t coef, const Parts& p) {
    if (coef == 0 || std::abs(coef) <= p.hi - p.lo) return false;
    // The high part must step over everything t·c + low reaches.
    return p.radix == 0 || (extent && p.radix > std::abs(coef) * (*extent - 1) + (p.hi - p.lo));
  };
  for (const auto& [buffer, f] : accesses.buffers)
    if (f.written && !proves(f.coef, f.low) && !proves(f.coef, f.high)) return false;
  return true;
}

namespace {

/// Whether axes (|coefficient|, extent) form a mixed radix above a low part that spans `reach`:
/// sorted by coefficient, each exceeds what the low part and the smaller axes reach, so a value
/// determines every axis's digit.
bool mixedRadix(std::vector<std::pair<int64_t, int64_t>> axes, int64_t reach) {
  std::sort(axes.begin(), axes.end());
  for (const auto& [coef, e] : axes) {
    if (e <= 1) continue;
    if (coef <= reach) return false;
    reach += coef * (e - 1);
  }
  return true;
}

}  // namespace

/// Whether the iterations of `loop` provably touch disjoint elements of every buffer they write,
/// where loop variables enter the indices divided or recombined: f / E and f % E (fuse's form),
/// those again (a flat tile index taken apart into image, row and column: t / P, (t % P) / W,
/// t % W), and v · K + w with w a loop of extent K (split's form, as a merged loop's tile
/// index). Each such term becomes a variable of its own, with the extent its values span:
/// f / E (⌈F/E⌉), f % E (E), v · K + w (V · K); the actual tuples of values are a subset of
/// the tuples of these variables, so an index injective in all of them is injective in fact. A
/// variable derived from the iteration's stands for it: distinct iterations differ in every
/// derivation's result. Two views, either proves it. (1) Divisions only: the iteration's variables
/// are the high digits of a mixed radix over the span of the rest (inner loops, lanes,
/// constants, over all accesses of the buffer, which share the digits' coefficients): a main
/// tile's stores and its tail loop's agree there. (2) Recombined too: every access of a written
/// buffer must be affine in the variables and its lanes, all with the same coefficients
/// (constant offsets may differ: one more axis, their gcd apart); the index must move with every
/// iteration variable that was not replaced, and be injective in all the axes (mixed radix, as
/// injectiveIn). Distinct iterations then touch distinct elements; the inner loops an index does
/// not move with (a reduction's) stay in one iteration.
bool disjointDividedIterations(const For* loop) {
  struct Info {
    int64_t min = 0, extent = 1;
    bool iteration = false;  // the loop's variable or derived from it
  };
  std::map<const Var*, Info> known;
  {
    const int64_t *mn = asConstInt(loop->min), *ext = asConstInt(loop->extent);
    if (!mn || !ext || *ext < 1) return false;
    known[loop->var.as<Var>()] = {*mn, *ext, true};
  }
  // The inner loops (constant bounds) and the accesses of written, non-local buffers.
  struct Nest : IRVisitor {
    std::map<const Var*, Info>* known;
    std::set<const BufferNode*> local, written;
    std::vector<std::pair<const BufferNode*, Expr>> accesses;
    bool ok = true;
    using IRVisitor::visit;
    void visit(const For* op) override {
      const int64_t *m = asConstInt(op->min), *e = asConstInt(op->extent);
      if (!m || !e || *e < 1) ok = false;
      else (*known)[op->var.as<Var>()] = {*m, *e, false};
      IRVisitor::visit(op);
    }
    void visit(const LetStmt* op) override {
      if (!op->value.type().isFloat()) ok = false;
      IRVisitor::visit(op);
    }
    void visit(const Allocate* op) override {
      local.insert(op->buffer.get());
      IRVisitor::visit(op);
    }
    void visit(const Load* op) override {
      accesses.emplace_back(op->buffer.get(), op->index);
      IRVisitor::visit(op);
    }
    void visit(const Store* op) override {
      written.insert(op->buffer.get());
      accesses.emplace_back(op->buffer.get(), op->index);
      IRVisitor::visit(op);
    }
  } nest;
  nest.known = &known;
  nest.visitStmt(loop->body);
  if (!nest.ok) return false;
  struct Index {
    const BufferNode* buffer;
    Expr base;
    int64_t stride = 0, lanes = 1;
  };
  std::vector<Index> indices;
  for (const auto& [buffer, index] : nest.accesses) {
    if (!nest.written.count(buffer) || nest.local.count(buffer)) continue;
    Index ix{buffer, index};
    if (const auto* ramp = index.as<Ramp>()) {
      const int64_t* stride = asConstInt(ramp->stride);
      if (!stride) return false;
      ix.base = ramp->base, ix.stride = *stride, ix.lanes = ramp->lanes;
    } else if (index.type().isVector()) {
      return false;
    }
    indices.push_back(ix);
  }
  // Replace divided and recombined variables until the indices hold none.
  struct Derive : IRMutator {
    std::map<const Var*, Info>* known;
    std::set<const Var*>* replaced;
    std::map<std::tuple<const Var*, int64_t, const Var*>, Expr> made;  // (v, K, w): w null for v / K
    std::map<std::pair<const Var*, int64_t>, Expr> rems;               // v % K
    bool changed = false;
    bool recombine = true;  // also v · K + w
    const Info* zeroBased(const Expr& e) const {
      const Var* v = e.as<Var>();
      auto it = v ? known->find(v) : known->end();
      return it != known->end() && it->second.min == 0 ? &it->second : nullptr;
    }
    Expr fresh(const Var* from, const std::string& suffix, int64_t extent, bool iteration) {
      Expr n = Var::make(from->name + suffix, from->type);
      (*known)[n.as<Var>()] = {0, extent, iteration};
      changed = true;
      return n;
    }
    /// v / K and v % K, both made at once: only the pair stands for v.
    std::pair<Expr, Expr> parts(const Var* v, const Info& info, int64_t k) {
      Expr& q = made[{v, k, nullptr}];
      Expr& r = rems[{v, k}];
      if (!q.defined()) {
        q = fresh(v, "/" + std::to_string(k), (info.extent + k - 1) / k, info.iteration);
        r = fresh(v, "%" + std::to_string(k), std::min(k, info.extent), info.iteration);
      }
      replaced->insert(v);
      return {q, r};
    }
    using IRMutator::visit;
    Expr visit(const Div* op, const Expr& self) override {
      const Info* info = zeroBased(op->a);
      const int64_t* k = asConstInt(op->b);
      if (!info || !k || *k < 1) return IRMutator::visit(op, self);
      return parts(op->a.as<Var>(), *info, *k).first;
    }
    Expr visit(const Mod* op, const Expr& self) override {
      const Info* info = zeroBased(op->a);
      const int64_t* k = asConstInt(op->b);
      if (!info || !k || *k < 1) return IRMutator::visit(op, self);
      return parts(op->a.as<Var>(), *info, *k).second;
    }
    Expr visit(const Add* op, const Expr& self) override {
      // v · K + w (either order), w zero-based with extent K.
      for (int side = 0; side < 2 && recombine; ++side) {
        const Expr& product = side == 0 ? op->a : op->b;
        const Expr& rest = side == 0 ? op->b : op->a;
        const auto* mul = product.as<Mul>();
        const Info *vi = mul ? zeroBased(mul->a) : nullptr, *wi = zeroBased(rest);
        const int64_t* k = mul ? asConstInt(mul->b) : nullptr;
        if (!vi || !wi || !k || wi->extent != *k || wi->iteration) continue;
        const Var *v = mul->a.as<Var>(), *w = rest.as<Var>();
        Expr& t = made[{v, *k, w}];
        if (!t.defined())
          t = fresh(v, "*" + std::to_string(*k) + "+" + w->name, vi->extent * *k, vi->iteration);
        replaced->insert(v);
        return t;
      }
      return IRMutator::visit(op, self);
    }
  };
  // Derived variables (and the ones they replace) of `indices`, rewritten in place.
  auto deriveAll = [](std::vector<Index>& ixs, std::map<const Var*, Info>& kn, std::set<const Var*>& rep,
                      bool recombine) {
    Derive derive;
    derive.known = &kn;
    derive.replaced = &rep;
    derive.recombine = recombine;
    for (int round = 0; round < 8; ++round) {
      derive.changed = false;
      for (Index& ix : ixs) ix.base = derive.mutate(ix.base);
      if (!derive.changed) break;
    }
  };
  // First view: the iteration's variables (the loop's and those derived from it by division) as
  // the high digits of a mixed radix over the span of everything else. All accesses of a written
  // buffer share the digits' coefficients and the outer terms; the inner loops' terms, the lanes
  // and the constants span [lo, hi] (over all its accesses). When each digit's coefficient exceeds
  // what the span and the smaller digits reach, an element determines every digit, and the digits
  // determine the iteration. (A tail loop's store and the main tile's agree on the digits but not
  // on their inner terms, which the second view below needs; a digit is not recombined with an
  // inner loop, whose variable differs between the two.)
  auto digitsOverSpan = [&]() {
    std::map<const Var*, Info> known1 = known;
    std::set<const Var*> replaced;
    std::vector<Index> indices1 = indices;
    deriveAll(indices1, known1, replaced, false);
    std::set<const Var*> vars;
    for (const auto& [v, info] : known1) vars.insert(v);
    std::map<const Var*, Interval> ranges;
    for (const auto& [v, info] : known1)
      if (!info.iteration) ranges[v] = {info.min, info.min + info.extent - 1};
    struct Digits {
      std::map<const Var*, int64_t> coefs;
      std::map<std::string, int64_t> outer;
      int64_t lo = 0, hi = 0;
    };
    std::map<const BufferNode*, Digits> per;
    for (const Index& ix : indices1) {
      std::optional<Affine> form = affineForm(ix.base, vars);
      if (!form) return false;
      Digits one;
      Affine low;
      low.constant = form->constant;
      for (const auto& [text, term] : form->terms) {
        if (term.second == 0) continue;
        const Var* v = term.first.as<Var>();
        if (!v || !vars.count(v))
          one.outer[text] = term.second;
        else if (known1.at(v).iteration)
          one.coefs[v] = term.second;
        else
          low.terms[text] = term;
      }
      std::optional<Interval> span = boundsOf(low.toExpr(Type::i64()), ranges);
      if (!span) return false;
      const int64_t laneReach = ix.stride * (ix.lanes - 1);
      one.lo = span->lo + std::min<int64_t>(0, laneReach),
      one.hi = span->hi + std::max<int64_t>(0, laneReach);
      auto [it, fresh] = per.emplace(ix.buffer, one);
      if (fresh) continue;
      if (it->second.coefs != one.coefs || it->second.outer != one.outer) return false;
      it->second.lo = std::min(it->second.lo, one.lo), it->second.hi = std::max(it->second.hi, one.hi);
    }
    for (const auto& [buffer, d] : per) {
      for (const auto& [v, info] : known1)
        if (info.iteration && info.extent > 1 && !replaced.count(v) && !d.coefs.count(v)) return false;
      std::vector<std::pair<int64_t, int64_t>> axes;  // |coefficient|, extent
      for (const auto& [v, coef] : d.coefs) axes.emplace_back(std::abs(coef), known1.at(v).extent);
      if (!mixedRadix(std::move(axes), d.hi - d.lo)) return false;
    }
    return true;
  };
  if (digitsOverSpan()) return true;
  // Second view: every access of a written buffer injective in all the variables, its lanes and
  // its constant offsets (the same coefficients everywhere).
  std::set<const Var*> replaced;
  deriveAll(indices, known, replaced, true);
  std::set<const Var*> vars;
  for (const auto& [v, info] : known) vars.insert(v);
  struct Shape {
    std::map<std::string, int64_t> coefs;  // every term (variables and outer atoms)
    std::map<const Var*, int64_t> moving;  // the variables' coefficients
    std::set<int64_t> constants;
    int64_t stride = 0, lanes = 1;
  };
  std::map<const BufferNode*, Shape> shapes;
  for (const Index& ix : indices) {
    std::optional<Affine> form = affineForm(ix.base, vars);
    if (!form) return false;
    Shape one;
    one.stride = ix.stride, one.lanes = ix.lanes;
    for (const auto& [text, term] : form->terms) {
      if (term.second == 0) continue;
      one.coefs[text] = term.second;
      if (const Var* v = term.first.as<Var>(); v && vars.count(v)) one.moving[v] = term.second;
    }
    auto [it, fresh] = shapes.emplace(ix.buffer, one);
    Shape& shape = it->second;
    if (!fresh && (shape.coefs != one.coefs || shape.stride != one.stride || shape.lanes != one.lanes))
      return false;
    shape.constants.insert(form->constant);
  }
  for (const auto& [buffer, shape] : shapes) {
    for (const auto& [v, info] : known)
      if (info.iteration && info.extent > 1 && !replaced.count(v) && !shape.moving.count(v))
        return false;  // iterations that differ only in v would meet
    std::vector<std::pair<int64_t, int64_t>> axes;  // |coefficient|, extent
    for (const auto& [v, coef] : shape.moving) axes.emplace_back(std::abs(coef), known.at(v).extent);
    if (shape.lanes > 1) axes.emplace_back(std::abs(shape.stride), shape.lanes);
    for (const auto& axis : offsetAxes(shape.constants)) axes.push_back(axis);
    if (!mixedRadix(std::move(axes), 0)) return false;
  }
  return true;
}

/// Whether the iterations of the perfect chain of loops from `scope` down to `unit` (each loop's
/// body exactly the next) provably touch disjoint elements: every loop of the chain has disjoint
/// iterations (a single or a fused loop). Two distinct iterations of the chain first differ at
/// some loop, within one iteration of the loops above it, so they touch disjoint elements. (No
/// buffer is allocated between the loops of a perfect chain, so none is shared that a loop's own
/// check took as private.)
bool disjointChain(const For* scope, const For* unit) {
  for (const For* loop = scope;;) {
    if (!disjointIterations(loop) && !disjointDividedIterations(loop)) return false;
    if (loop == unit) return true;
    loop = loop->body.as<For>();
    if (loop == nullptr) return false;
  }
}

/// Whether every read of `buffer` in an iteration of `loop` provably reads an element that the
/// same iteration wrote before, without replaying: the first statement of the body's sequence
/// that touches the buffer writes it unconditionally, in loops of constant bounds, and reads
/// nothing of it; every later read reaches only elements that store reaches (reachesWithin).
bool windowWrittenFirst(const For* loop, const BufferNode* buffer) {
  Stmt body = loop->body;
  while (const auto* a = body.as<Allocate>()) body = a->body;
  std::vector<Stmt> children;
  if (const auto* seq = body.as<Seq>()) children = seq->stmts;
  else children = {body};
  struct Collect : IRVisitor {
    const BufferNode* buffer = nullptr;
    size_t child = 0;
    int conditional = 0;
    std::vector<const For*> loops;
    std::vector<BodyAccess> out;
    using IRVisitor::visit;
    void visit(const For* op) override {
      loops.push_back(op);
      IRVisitor::visit(op);
      loops.pop_back();
    }
    void visit(const IfThenElse* op) override {
      ++conditional;
      IRVisitor::visit(op);
      --conditional;
    }
    void visit(const Select* op) override {
      ++conditional;
      IRVisitor::visit(op);
      --conditional;
    }
    void visit(const Load* op) override {
      if (op->buffer.get() == buffer) out.push_back({child, loops, conditional > 0, false, op->index});
      IRVisitor::visit(op);
    }
    void visit(const Store* op) override {
      if (op->buffer.get() == buffer) out.push_back({child, loops, conditional > 0, true, op->index});
      IRVisitor::visit(op);
    }
  } collect;
  collect.buffer = buffer;
  for (size_t k = 0; k < children.size(); ++k) {
    collect.child = k;
    collect.visitStmt(children[k]);
  }
  if (collect.out.empty()) return true;
  const size_t first = collect.out.front().child;
  std::optional<Reach> written;
  for (const BodyAccess& a : collect.out) {
    if (a.child != first) continue;
    if (!a.write || a.conditional || written) return false;  // one unconditional store, no read
    written = reachOf(a);
    if (!written) return false;
  }
  for (const BodyAccess& a : collect.out) {
    if (a.child == first || a.write) continue;
    std::optional<Reach> read = reachOf(a);
    if (!read || !reachesWithin(*read, *written)) return false;
  }
  return true;
}

}  // namespace kiln::core::tir::schedule_detail
