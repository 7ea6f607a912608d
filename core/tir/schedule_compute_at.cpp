// The compute_at and store_at primitives (see schedule.h).
//
// Before:                                   After compute_at(t, j):
//   allocate t: f32[N]                        for (j, ...) {
//   for (p0..pk) t[Σ p·c] = f(p)                allocate t_local: f32[S]
//   for (j, ...) { ... t[e(j, inner)] ... }     for (t_k, 0, S) t_local[t_k] = f(p(base + t_k))
//                                               ... t_local[e - base] ...
//                                             }
//
// The producer stores t at a row-major index of its loop variables, so the flat element index g
// determines the iteration that computes it: p_d = (g / c_d) mod e_d. The consumer's reads of t
// inside j are affine in the loops inside j: each read covers [A + lo, A + hi] where A is the
// same expression of the outer variables for every read and lo, hi are constants. The local
// buffer holds S = max hi − min lo + 1 elements from base = A + min lo, and every read's index
// is rewritten relative to base. Elements outside t (a guarded consumer reads past its end) are
// skipped by a guard unless bounds prove them inside.
#include <algorithm>

#include "core/tir/functor.h"
#include "core/tir/printer.h"
#include "core/tir/schedule.h"
#include "core/tir/schedule_analysis.h"
#include "core/tir/simplify.h"
#include "runtime/error.h"

namespace kiln::core::tir {

using namespace schedule_detail;

namespace {

const char* const kPrim = "compute_at";

/// One read of the buffer inside the consumer loop.
struct Read {
  Affine inner;         // the terms of loop variables inside the consumer loop (and the constant)
  Affine outer;         // the rest: an expression of outer variables
  int64_t lo = 0, hi = 0;  // constant offsets of the first and last element read, relative to outer
};

struct ReadCollector : IRVisitor {
  const BufferNode* buffer = nullptr;
  std::vector<const Load*> loads;
  using IRVisitor::visit;
  void visit(const Load* op) override {
    if (op->buffer.get() == buffer) loads.push_back(op);
    IRVisitor::visit(op);
  }
};

/// Bound loop variables inside `s` with constant ranges; let variables get no range.
struct InnerVars : IRVisitor {
  std::set<const Var*> vars;
  std::map<const Var*, Interval> ranges;
  using IRVisitor::visit;
  void visit(const For* op) override {
    vars.insert(op->var.as<Var>());
    const int64_t *mn = asConstInt(op->min), *ext = asConstInt(op->extent);
    if (mn && ext && *ext > 0) ranges[op->var.as<Var>()] = Interval{*mn, *mn + *ext - 1};
    IRVisitor::visit(op);
  }
  void visit(const LetStmt* op) override {
    vars.insert(op->var.as<Var>());
    IRVisitor::visit(op);
  }
};

/// The elements of a buffer that one iteration of `loop` touches through the accesses at
/// `indices` (inside it): each affine in the loops inside `loop`, all at one outer part.
struct Window {
  std::vector<Read> accesses;  // per index
  int64_t lo = 0, size = 0;    // the inner offsets covered: [lo, lo + size)
  Type type = Type::i64();
  Expr base;                   // the outer part + lo: the first element of the window
};

Window windowIn(const LoopSite& site, const std::vector<Expr>& indices, const std::string& block, const char* prim) {
  const For* loop = site.loop;
  InnerVars innerVars;
  innerVars.visitStmt(loop->body);
  // The loop's own and the enclosing variables are linear terms of the outer part too, so equal
  // outer parts compare equal however their products were grouped.
  std::set<const Var*> linear = innerVars.vars;
  linear.insert(loop->var.as<Var>());
  for (const For* l : site.enclosing) linear.insert(l->var.as<Var>());
  const std::string name = loopName(loop);
  Window w;
  for (const Expr& index : indices) {
    Expr base = index;
    int64_t spanLo = 0, spanHi = 0;
    if (const auto* ramp = index.as<Ramp>()) {
      const int64_t* stride = asConstInt(ramp->stride);
      if (!stride) fail(prim, "a vector access of " + quoted(block) + " has a non-constant stride");
      base = ramp->base;
      spanLo = std::min<int64_t>(0, *stride * (ramp->lanes - 1));
      spanHi = std::max<int64_t>(0, *stride * (ramp->lanes - 1));
    }
    std::optional<Affine> form = affineForm(base, linear);
    if (!form) form = affineForm(base, innerVars.vars);
    if (!form)
      fail(prim, "the index of " + quoted(block) + " in loop " + quoted(name) + " is not affine in the loops inside it (" +
                     print(base) + ")");
    w.type = base.type();
    Read r;
    r.lo = r.hi = form->constant;
    r.inner.constant = form->constant;
    for (const auto& [key, term] : form->terms) {
      const auto* v = term.first.as<Var>();
      if (!v || !innerVars.vars.count(v)) {
        r.outer.terms.emplace(key, term);
        continue;
      }
      auto range = innerVars.ranges.find(v);
      if (range == innerVars.ranges.end())
        fail(prim, "the index of " + quoted(block) + " in loop " + quoted(name) + " uses " + quoted(v->name) +
                       ", which has no constant range");
      r.inner.terms.emplace(key, term);
      r.lo += term.second * (term.second > 0 ? range->second.lo : range->second.hi);
      r.hi += term.second * (term.second > 0 ? range->second.hi : range->second.lo);
    }
    r.lo += spanLo;
    r.hi += spanHi;
    w.accesses.push_back(std::move(r));
  }
  KILN_ASSERT(!w.accesses.empty(), "windowIn: no accesses");
  int64_t lo = w.accesses[0].lo, hi = w.accesses[0].hi;
  const std::string outer = print(w.accesses[0].outer.toExpr(w.type));
  for (const Read& r : w.accesses) {
    if (print(r.outer.toExpr(w.type)) != outer)
      fail(prim, "accesses of " + quoted(block) + " in loop " + quoted(name) + " do not move together (" +
                     print(r.outer.toExpr(w.type)) + " vs " + outer + ")");
    lo = std::min(lo, r.lo);
    hi = std::max(hi, r.hi);
  }
  w.lo = lo;
  w.size = hi - lo + 1;
  Affine baseForm = w.accesses[0].outer;
  baseForm.constant = lo;
  w.base = baseForm.toExpr(w.type);
  return w;
}

/// `index` (a scalar or a Ramp) moved to the window: its inner part − lo.
Expr windowIndex(const Window& w, size_t access, const Expr& index) {
  Affine rel = w.accesses[access].inner;
  rel.constant -= w.lo;
  Expr e = rel.toExpr(w.type);
  if (const auto* ramp = index.as<Ramp>()) e = Ramp::make(e, ramp->stride, ramp->lanes);
  return e;
}

/// A multi-dimensional window of a buffer with shape [d0, ..., dr-1]: each access's index split
/// into one component per dimension (a term with coefficient k·stride goes to the dimension of
/// that stride; constants by mixed radix), the window per dimension spanning what the inner
/// loops reach, the outer components equal across accesses. Nullopt when an index does not split
/// that way (a component could carry into the next dimension, or its outer parts differ).
struct GridWindow {
  std::vector<int64_t> shape;  // the window's extent per dimension
  std::vector<Expr> indices;  // per access, relative to the window (Ramps kept)
};

std::optional<GridWindow> gridWindowIn(const LoopSite& site, const Buffer& t, const std::vector<Expr>& indices) {
  const std::vector<int64_t>& dims = t->shape;
  const size_t rank = dims.size();
  if (rank < 2) return std::nullopt;
  std::vector<int64_t> strides(rank, 1);
  for (size_t d = rank - 1; d-- > 0;) strides[d] = strides[d + 1] * dims[d + 1];
  InnerVars innerVars;
  innerVars.visitStmt(site.loop->body);
  std::map<const Var*, Interval> ranges = innerVars.ranges;
  std::set<const Var*> linear = innerVars.vars;
  std::vector<const For*> around = site.enclosing;
  around.push_back(site.loop);
  for (const For* l : around) {
    const int64_t *mn = asConstInt(l->min), *ext = asConstInt(l->extent);
    if (!mn || !ext || *ext < 1) return std::nullopt;
    ranges[l->var.as<Var>()] = Interval{*mn, *mn + *ext - 1};
    linear.insert(l->var.as<Var>());
  }
  // The dimension whose stride divides `coef` with the largest stride.
  auto dimOf = [&](int64_t coef) -> std::optional<size_t> {
    for (size_t d = 0; d < rank; ++d)
      if (coef % strides[d] == 0) return d;
    return std::nullopt;
  };
  struct Component {
    Affine inner, outer;
    int64_t lo = 0, hi = 0;  // inner range (with the constant)
  };
  std::vector<std::vector<Component>> parts;  // [access][dimension]
  Type it = Type::i64();
  for (const Expr& index : indices) {
    Expr base = index;
    int64_t laneStride = 0, lanes = 1;
    if (const auto* ramp = index.as<Ramp>()) {
      const int64_t* st = asConstInt(ramp->stride);
      if (!st || *st <= 0) return std::nullopt;
      base = ramp->base, laneStride = *st, lanes = ramp->lanes;
    }
    std::optional<Affine> form = affineForm(base, linear);
    if (!form || form->constant < 0) return std::nullopt;
    it = base.type();
    std::vector<Component> comp(rank);
    int64_t c = form->constant;
    for (size_t d = 0; d < rank; ++d) {
      comp[d].inner.constant = (c / strides[d]) % dims[d];
      comp[d].lo = comp[d].hi = comp[d].inner.constant;
    }
    if (c >= strides[0] * dims[0]) return std::nullopt;
    std::vector<Interval> outerRange(rank, Interval{0, 0});
    for (const auto& [key, term] : form->terms) {
      const auto* v = term.first.as<Var>();
      auto range = v ? ranges.find(v) : ranges.end();
      std::optional<size_t> d = dimOf(term.second);
      if (range == ranges.end() || !d) return std::nullopt;
      const int64_t k = term.second / strides[*d];
      const int64_t a = k * range->second.lo, b = k * range->second.hi;
      if (innerVars.vars.count(v)) {
        comp[*d].inner.terms.emplace(key, std::pair{term.first, k});
        comp[*d].lo += std::min(a, b), comp[*d].hi += std::max(a, b);
      } else {
        comp[*d].outer.terms.emplace(key, std::pair{term.first, k});
        outerRange[*d].lo += std::min(a, b), outerRange[*d].hi += std::max(a, b);
      }
    }
    if (lanes > 1) {
      std::optional<size_t> d = dimOf(laneStride);
      if (!d) return std::nullopt;
      comp[*d].hi += laneStride / strides[*d] * (lanes - 1);
    }
    for (size_t d = 0; d < rank; ++d)
      if (outerRange[d].lo + comp[d].lo < 0 || outerRange[d].hi + comp[d].hi > dims[d] - 1) return std::nullopt;
    parts.push_back(std::move(comp));
  }
  GridWindow w;
  std::vector<int64_t> lo(rank), hi(rank);
  for (size_t d = 0; d < rank; ++d) {
    lo[d] = parts[0][d].lo, hi[d] = parts[0][d].hi;
    const std::string outer = print(parts[0][d].outer.toExpr(it));
    for (const std::vector<Component>& comp : parts) {
      if (print(comp[d].outer.toExpr(it)) != outer) return std::nullopt;
      lo[d] = std::min(lo[d], comp[d].lo), hi[d] = std::max(hi[d], comp[d].hi);
    }
    w.shape.push_back(hi[d] - lo[d] + 1);
  }
  std::vector<int64_t> newStrides(rank, 1);
  for (size_t d = rank - 1; d-- > 0;) newStrides[d] = newStrides[d + 1] * w.shape[d + 1];
  for (size_t a = 0; a < indices.size(); ++a) {
    Affine rel;
    for (size_t d = 0; d < rank; ++d) {
      rel.constant += (parts[a][d].inner.constant - lo[d]) * newStrides[d];
      for (const auto& [key, term] : parts[a][d].inner.terms)
        rel.terms[key] = {term.first, (rel.terms.count(key) ? rel.terms[key].second : 0) + term.second * newStrides[d]};
    }
    Expr e = rel.toExpr(it);
    if (const auto* ramp = indices[a].as<Ramp>()) {
      const int64_t laneStride = *asConstInt(ramp->stride);
      const size_t d = *dimOf(laneStride);
      e = Ramp::make(e, IntImm::make(ramp->stride.type(), laneStride / strides[d] * newStrides[d]), ramp->lanes);
    }
    w.indices.push_back(e);
  }
  return w;
}

/// `body` without the allocation of `buffer` (its body kept).
Stmt dropAllocate(const Stmt& body, const BufferNode* buffer) {
  struct Drop : IRMutator {
    const BufferNode* target;
    using IRMutator::visit;
    Stmt visit(const Allocate* op, const Stmt& self) override {
      if (op->buffer.get() == target) return mutate(op->body);
      return IRMutator::visit(op, self);
    }
  } drop;
  drop.target = buffer;
  return drop.mutate(body);
}

/// Rewrites reads of `from` as reads of `to` at index − base (base given by the outer part).
class ReadRewriter : public IRMutator {
 public:
  ReadRewriter(const BufferNode* from, Buffer to, std::map<const Load*, Expr> indices)
      : m_from(from), m_to(std::move(to)), m_indices(std::move(indices)) {}

 protected:
  using IRMutator::visit;
  Expr visit(const Load* op, const Expr& self) override {
    if (op->buffer.get() != m_from) return IRMutator::visit(op, self);
    return Load::make(m_to, m_indices.at(op));
  }

 private:
  const BufferNode* m_from;
  Buffer m_to;
  std::map<const Load*, Expr> m_indices;
};

}  // namespace

void Schedule::computeAt(const std::string& block, const std::string& loop) {
  // ---- the producer -------------------------------------------------------------------------
  std::vector<std::string> around;
  try {
    around = tir::getLoops(m_func, block);
  } catch (const Error& e) {
    fail(kPrim, e.what());
  }
  LoopSite consumer = findLoop(m_func, loop, kPrim);
  for (const Buffer& p : m_func.params)
    if (p->name == block) fail(kPrim, quoted(block) + " is a parameter of the function, not a local buffer");
  if (around.empty()) fail(kPrim, "the producer of " + quoted(block) + " is not a loop nest");
  // The innermost loop around the first store, then up while the nest stays perfect.
  LoopSite innermost = findLoop(m_func, around.back(), kPrim);
  const auto* store = innermost.loop->body.as<Store>();
  if (!store || store->buffer->name != block)
    fail(kPrim, "the producer of " + quoted(block) + " must be a loop nest whose body is one store to it");
  const Buffer t = store->buffer;
  std::vector<const For*> chain = {innermost.loop};
  for (size_t k = innermost.enclosing.size(); k-- > 0;) {
    if (innermost.enclosing[k]->body.get() != chain.front()) break;
    chain.insert(chain.begin(), innermost.enclosing[k]);
  }
  LoopSite producer = findLoop(m_func, loopName(chain.front()), kPrim);
  for (const For* l : chain)
    if (l == consumer.loop) fail(kPrim, "loop " + quoted(loop) + " belongs to the producer of " + quoted(block));
  const Allocate* alloc = nullptr;
  {
    std::vector<const StmtNode*> path = pathTo(m_func.body, producer.loop);
    for (const StmtNode* s : path)
      if (s->kind == StmtKind::Allocate && static_cast<const Allocate*>(s)->buffer == t) alloc = static_cast<const Allocate*>(s);
  }
  if (!alloc) fail(kPrim, quoted(block) + " is not a local buffer allocated around its producer");
  if (storedBuffers(replaceStmt(m_func.body, producer.loop, Evaluate::make(i64(0)))).count(t.get()))
    fail(kPrim, quoted(block) + " is stored to outside its producer loop nest");
  if (loadsBuffer(store->value, t.get()) || loadsBuffer(store->index, t.get()))
    fail(kPrim, "the producer of " + quoted(block) + " reads it");

  // The store index must be row-major in the producer's variables: Σ c_d·p_d with the c_d the
  // mixed-radix weights of the extents, covering every element once.
  std::set<const Var*> pvars;
  for (const For* l : chain) pvars.insert(l->var.as<Var>());
  std::optional<Affine> sform = affineForm(store->index, pvars);
  struct Axis {
    const For* loop;
    int64_t coef, extent;
  };
  std::vector<Axis> axes;
  bool rowMajor = sform && sform->constant == 0 && sform->terms.size() == chain.size();
  for (const For* l : chain) {
    const int64_t *mn = asConstInt(l->min), *ext = asConstInt(l->extent);
    if (!rowMajor || !mn || *mn != 0 || !ext) {
      rowMajor = false;
      break;
    }
    auto it = sform->terms.find(loopName(l));
    if (it == sform->terms.end() || !it->second.first.same(l->var)) {
      rowMajor = false;
      break;
    }
    axes.push_back({l, it->second.second, *ext});
  }
  if (rowMajor) {
    std::vector<Axis> sorted = axes;
    std::sort(sorted.begin(), sorted.end(), [](const Axis& a, const Axis& b) { return a.coef < b.coef; });
    int64_t expect = 1;
    for (const Axis& a : sorted) {
      if (a.coef != expect) rowMajor = false;
      expect *= a.extent;
    }
    if (expect != t->numel()) rowMajor = false;
  }
  if (!rowMajor)
    fail(kPrim, "the producer of " + quoted(block) +
                    " must store every element once at the row-major index of its loops (constant bounds from 0)");

  // ---- where the consumer loop sits ---------------------------------------------------------
  std::vector<const StmtNode*> ppath = pathTo(m_func.body, producer.loop);
  const Seq* seq = ppath.size() >= 2 && ppath[ppath.size() - 2]->kind == StmtKind::Seq
                       ? static_cast<const Seq*>(ppath[ppath.size() - 2])
                       : nullptr;
  size_t pIndex = 0, cIndex = 0;
  bool found = false;
  if (seq) {
    for (size_t k = 0; k < seq->stmts.size(); ++k) {
      if (seq->stmts[k].get() == producer.loop) pIndex = k;
      if (!pathTo(seq->stmts[k], consumer.loop).empty()) cIndex = k, found = true;
    }
  }
  if (!found || cIndex <= pIndex)
    fail(kPrim, "loop " + quoted(loop) + " is not in a statement after the producer of " + quoted(block));
  for (size_t k = pIndex + 1; k < seq->stmts.size(); ++k) {
    std::set<const BufferNode*> written = storedBuffers(seq->stmts[k]);
    for (const BufferNode* b : loadedBuffers(producer.stmt))
      if (written.count(b))
        fail(kPrim, quoted(b->name) + ", read by the producer of " + quoted(block) + ", is written after it");
  }
  ReadCollector all;
  all.buffer = t.get();
  all.visitStmt(m_func.body);
  ReadCollector inside;
  inside.buffer = t.get();
  inside.visitStmt(consumer.loop->body);
  if (inside.loads.empty()) fail(kPrim, "loop " + quoted(loop) + " does not read " + quoted(block));
  if (inside.loads.size() != all.loads.size())
    fail(kPrim, quoted(block) + " is also read outside loop " + quoted(loop));

  // ---- the region each iteration of the consumer loop reads ---------------------------------
  std::vector<Expr> readIndices;
  for (const Load* load : inside.loads) readIndices.push_back(load->index);
  const Window window = windowIn(consumer, readIndices, block, kPrim);
  const int64_t size = window.size;
  const Type it = window.type;
  const Expr base = window.base;

  // ---- build ------------------------------------------------------------------------------------
  std::set<std::string> used = usedNames(m_func.body);
  for (const Buffer& p : m_func.params) used.insert(p->name);
  Buffer local = makeBuffer(freshName(block + "_local", used), t->elemType, {size});
  Expr k = Var::make(freshName(block + "_k", used), it);
  Expr g = base + k;
  std::vector<std::pair<Expr, Expr>> subst;
  int64_t largest = 0;
  for (const Axis& a : axes) largest = std::max(largest, a.coef);
  for (const Axis& a : axes) {
    Expr v = a.coef == 1 ? g : g / IntImm::make(it, a.coef);
    if (a.coef != largest) v = v % IntImm::make(it, a.extent);
    subst.emplace_back(a.loop->var, v);
  }
  Stmt compute = Store::make(local, k, simplify(substitute(store->value, subst)));
  // Guard elements outside the buffer unless the outer loops' ranges prove them inside.
  std::map<const Var*, Interval> outerRanges;
  for (const For* l : consumer.enclosing) {
    const int64_t *mn = asConstInt(l->min), *ext = asConstInt(l->extent);
    if (mn && ext && *ext > 0) outerRanges[l->var.as<Var>()] = Interval{*mn, *mn + *ext - 1};
  }
  if (const int64_t *mn = asConstInt(consumer.loop->min), *ext = asConstInt(consumer.loop->extent); mn && ext && *ext > 0)
    outerRanges[consumer.loop->var.as<Var>()] = Interval{*mn, *mn + *ext - 1};
  std::optional<Interval> first = boundsOf(base, outerRanges);
  if (!first || first->lo < 0 || first->hi + size - 1 > t->numel() - 1)
    compute = IfThenElse::make(g >= IntImm::make(it, 0) && g < IntImm::make(it, t->numel()), compute);
  Stmt fill = For::make(k, IntImm::make(it, 0), IntImm::make(it, size), ForKind::Serial, compute);

  std::map<const Load*, Expr> indices;
  for (size_t r = 0; r < inside.loads.size(); ++r)
    indices[inside.loads[r]] = windowIndex(window, r, inside.loads[r]->index);
  Stmt body = ReadRewriter(t.get(), local, indices).mutate(consumer.loop->body);
  const For* c = consumer.loop;
  Stmt newConsumer = For::make(c->var, c->min, c->extent, c->forKind, Allocate::make(local, Seq::make({fill, body})));

  std::vector<Stmt> stmts;
  for (size_t s = 0; s < seq->stmts.size(); ++s) {
    if (s == pIndex) continue;
    stmts.push_back(s == cIndex ? replaceStmt(seq->stmts[s], c, newConsumer) : seq->stmts[s]);
  }
  Stmt result = replaceStmt(m_func.body, seq, Seq::make(std::move(stmts)));
  // The whole buffer is dead now: drop its allocation.
  setBody(dropAllocate(result, t.get()));
  record({"compute_at", {block, loopName(c)}, {}});
}

void Schedule::storeAt(const std::string& block, const std::string& loop) {
  const char* prim = "store_at";
  LoopSite site = findLoop(m_func, loop, prim);
  for (const Buffer& p : m_func.params)
    if (p->name == block) fail(prim, quoted(block) + " is a parameter of the function, not a local buffer");
  struct Allocs : IRVisitor {
    std::string name;
    const Allocate* found = nullptr;
    using IRVisitor::visit;
    void visit(const Allocate* op) override {
      if (op->buffer->name == name && !found) found = op;
      IRVisitor::visit(op);
    }
  } allocs;
  allocs.name = block;
  allocs.visitStmt(m_func.body);
  if (!allocs.found) fail(prim, quoted(block) + " is not a local buffer of the function");
  const Buffer t = allocs.found->buffer;
  if (!pathTo(site.loop->body, allocs.found).empty())
    fail(prim, quoted(block) + " is already allocated inside loop " + quoted(loop));
  // Every access inside the loop.
  struct Accesses : IRVisitor {
    const BufferNode* buffer = nullptr;
    std::vector<const Load*> loads;
    std::vector<const Store*> stores;
    using IRVisitor::visit;
    void visit(const Load* op) override {
      if (op->buffer.get() == buffer) loads.push_back(op);
      IRVisitor::visit(op);
    }
    void visit(const Store* op) override {
      if (op->buffer.get() == buffer) stores.push_back(op);
      IRVisitor::visit(op);
    }
  } all, inside;
  all.buffer = inside.buffer = t.get();
  all.visitStmt(m_func.body);
  inside.visitStmt(site.loop->body);
  if (inside.loads.size() + inside.stores.size() != all.loads.size() + all.stores.size())
    fail(prim, quoted(block) + " is also accessed outside loop " + quoted(loop));
  if (inside.stores.empty()) fail(prim, "loop " + quoted(loop) + " does not write " + quoted(block));
  std::vector<Expr> indices;
  for (const Store* s : inside.stores) indices.push_back(s->index);
  for (const Load* l : inside.loads) indices.push_back(l->index);
  const Window window = windowIn(site, indices, block, prim);
  BufferSharing sharing = sharingOf(m_func, site.loop, t.get(), std::string(prim) + ": loop " + quoted(loop));
  if (sharing.crossIteration || sharing.exposedRead)
    fail(prim, "iterations of loop " + quoted(loop) + " share elements of " + quoted(block));

  // One window per dimension of the buffer's shape where the indices split that way (smaller
  // when the loop touches a slice of an inner dimension), else one flat window.
  std::vector<Expr> moved(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) moved[k] = windowIndex(window, k, indices[k]);
  std::vector<int64_t> shape{window.size};
  if (std::optional<GridWindow> grid = gridWindowIn(site, t, indices)) {
    int64_t cells = 1;
    for (int64_t d : grid->shape) cells *= d;
    if (cells < window.size) shape = grid->shape, moved = grid->indices;
  }
  Buffer local = makeBuffer(t->name, t->elemType, shape);
  struct Rewrite : IRMutator {
    const BufferNode* from = nullptr;
    Buffer to;
    std::map<const StmtNode*, Expr> storeIndex;
    std::map<const ExprNode*, Expr> loadIndex;
    using IRMutator::visit;
    Expr visit(const Load* op, const Expr& self) override {
      if (op->buffer.get() != from) return IRMutator::visit(op, self);
      return Load::make(to, loadIndex.at(op));
    }
    Stmt visit(const Store* op, const Stmt& self) override {
      if (op->buffer.get() != from) return IRMutator::visit(op, self);
      return Store::make(to, storeIndex.at(op), mutate(op->value));
    }
  } rewrite;
  rewrite.from = t.get();
  rewrite.to = local;
  for (size_t k = 0; k < inside.stores.size(); ++k) rewrite.storeIndex[inside.stores[k]] = moved[k];
  for (size_t k = 0; k < inside.loads.size(); ++k) rewrite.loadIndex[inside.loads[k]] = moved[inside.stores.size() + k];
  const For* l = site.loop;
  Stmt inner = For::make(l->var, l->min, l->extent, l->forKind, Allocate::make(local, rewrite.mutate(l->body)));
  Stmt result = replaceStmt(m_func.body, l, inner);
  setBody(dropAllocate(result, t.get()));
  record({"store_at", {block, loopName(l)}, {}});
}

}  // namespace kiln::core::tir
