// Analyses behind the schedule primitives (see schedule_analysis.h).
#include "core/tir/schedule_analysis.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <unordered_map>

#include "core/tir/functor.h"
#include "core/tir/printer.h"
#include "runtime/error.h"

namespace kiln::core::tir::schedule_detail {

namespace {

void collectLoops(const Stmt& s, std::vector<const For*>& stack, std::vector<LoopSite>& out) {
  if (!s.defined()) return;
  switch (s.kind()) {
    case StmtKind::For: {
      const auto* op = s.as<For>();
      out.push_back(LoopSite{op, s, stack});
      stack.push_back(op);
      collectLoops(op->body, stack, out);
      stack.pop_back();
      return;
    }
    case StmtKind::Seq:
      for (const Stmt& x : s.as<Seq>()->stmts) collectLoops(x, stack, out);
      return;
    case StmtKind::IfThenElse:
      collectLoops(s.as<IfThenElse>()->thenCase, stack, out);
      collectLoops(s.as<IfThenElse>()->elseCase, stack, out);
      return;
    case StmtKind::Allocate: collectLoops(s.as<Allocate>()->body, stack, out); return;
    case StmtKind::LetStmt: collectLoops(s.as<LetStmt>()->body, stack, out); return;
    case StmtKind::Store:
    case StmtKind::Evaluate: return;
  }
}

/// Rewrites Vars (uses and binding sites) and buffers (loads, stores, allocations) by identity.
class Renamer : public IRMutator {
 public:
  std::map<const Var*, Expr> vars;
  std::map<const BufferNode*, Buffer> buffers;

 protected:
  using IRMutator::visit;
  Expr var(const Expr& v) {
    auto it = vars.find(v.as<Var>());
    return it == vars.end() ? v : it->second;
  }
  Buffer buffer(const Buffer& b) {
    auto it = buffers.find(b.get());
    return it == buffers.end() ? b : it->second;
  }
  Expr visit(const Var* op, const Expr& self) override {
    auto it = vars.find(op);
    return it == vars.end() ? self : it->second;
  }
  Expr visit(const Load* op, const Expr& self) override {
    Expr index = mutate(op->index);
    Buffer b = buffer(op->buffer);
    if (index.same(op->index) && b == op->buffer) return self;
    return Load::make(b, index);
  }
  Stmt visit(const Store* op, const Stmt& self) override {
    Expr index = mutate(op->index), value = mutate(op->value);
    Buffer b = buffer(op->buffer);
    if (index.same(op->index) && value.same(op->value) && b == op->buffer) return self;
    return Store::make(b, index, value);
  }
  Stmt visit(const Allocate* op, const Stmt& self) override {
    Stmt body = mutate(op->body);
    Buffer b = buffer(op->buffer);
    if (body.same(op->body) && b == op->buffer) return self;
    return Allocate::make(b, body);
  }
  Stmt visit(const For* op, const Stmt& self) override {
    Expr v = var(op->var), mn = mutate(op->min), ext = mutate(op->extent);
    Stmt body = mutate(op->body);
    if (v.same(op->var) && mn.same(op->min) && ext.same(op->extent) && body.same(op->body)) return self;
    return For::make(v, mn, ext, op->forKind, body);
  }
  Stmt visit(const LetStmt* op, const Stmt& self) override {
    Expr v = var(op->var), value = mutate(op->value);
    Stmt body = mutate(op->body);
    if (v.same(op->var) && value.same(op->value) && body.same(op->body)) return self;
    return LetStmt::make(v, value, body);
  }
};

/// Vars in order of first appearance (the printer's order) and buffers by name.
class NameCollector : public IRVisitor {
 public:
  std::vector<Expr> vars;
  std::set<const Var*> seen;
  std::set<std::string> bufferNames;

  void visitExpr(const Expr& e) override {
    if (const auto* v = e.as<Var>(); v && seen.insert(v).second) vars.push_back(e);
    IRVisitor::visitExpr(e);
  }

 protected:
  using IRVisitor::visit;
  void visit(const Load* op) override {
    bufferNames.insert(op->buffer->name);
    IRVisitor::visit(op);
  }
  void visit(const Store* op) override {
    bufferNames.insert(op->buffer->name);
    IRVisitor::visit(op);
  }
  void visit(const Allocate* op) override {
    bufferNames.insert(op->buffer->name);
    IRVisitor::visit(op);
  }
};

/// Bound Vars and allocated buffers inside a statement.
class BindingCollector : public IRVisitor {
 public:
  std::vector<Expr> vars;
  std::vector<Buffer> buffers;

 protected:
  using IRVisitor::visit;
  void visit(const For* op) override {
    vars.push_back(op->var);
    IRVisitor::visit(op);
  }
  void visit(const LetStmt* op) override {
    vars.push_back(op->var);
    IRVisitor::visit(op);
  }
  void visit(const Allocate* op) override {
    buffers.push_back(op->buffer);
    IRVisitor::visit(op);
  }
};

class StmtReplacer : public IRMutator {
 public:
  StmtReplacer(const StmtNode* target, Stmt replacement) : m_target(target), m_replacement(std::move(replacement)) {}
  Stmt mutate(const Stmt& s) override {
    if (s.get() == m_target) return m_replacement;
    return IRMutator::mutate(s);
  }
  Expr mutate(const Expr& e) override { return e; }  // statements only

 private:
  const StmtNode* m_target;
  Stmt m_replacement;
};

class AccessCollector : public IRVisitor {
 public:
  std::set<const BufferNode*> loads, stores;
  bool loop = false;

 protected:
  using IRVisitor::visit;
  void visit(const Load* op) override {
    loads.insert(op->buffer.get());
    IRVisitor::visit(op);
  }
  void visit(const Store* op) override {
    stores.insert(op->buffer.get());
    IRVisitor::visit(op);
  }
  void visit(const For* op) override {
    loop = true;
    IRVisitor::visit(op);
  }
};

}  // namespace

std::vector<LoopSite> allLoops(const Stmt& body) {
  std::vector<LoopSite> out;
  std::vector<const For*> stack;
  collectLoops(body, stack, out);
  return out;
}

const std::string& loopName(const For* loop) { return loop->var.as<Var>()->name; }

Stmt canonicalizeNames(const Stmt& body) {
  NameCollector collector;
  collector.visitStmt(body);
  std::set<std::string> used = collector.bufferNames;
  std::map<std::string, int> count;
  for (const Expr& v : collector.vars) ++count[v.as<Var>()->name];
  for (const auto& [name, n] : count) used.insert(name);
  Renamer renamer;
  std::map<std::string, int> seen;
  for (const Expr& v : collector.vars) {
    const Var* var = v.as<Var>();
    if (seen[var->name]++ == 0) continue;  // the first keeps its name, as in the printer
    renamer.vars[var] = Var::make(freshName(var->name, used), var->type);
  }
  if (renamer.vars.empty()) return body;
  return renamer.mutate(body);
}

std::set<std::string> usedNames(const Stmt& body) {
  NameCollector collector;
  collector.visitStmt(body);
  std::set<std::string> used = collector.bufferNames;
  for (const Expr& v : collector.vars) used.insert(v.as<Var>()->name);
  return used;
}

std::string freshName(const std::string& base, std::set<std::string>& used) {
  std::string name = base;
  for (int i = 1; used.count(name); ++i) name = base + "_" + std::to_string(i);
  used.insert(name);
  return name;
}

Stmt cloneWithFreshVars(const Stmt& s, const std::string& suffix, std::set<std::string>& used) {
  BindingCollector bindings;
  bindings.visitStmt(s);
  Renamer renamer;
  for (const Expr& v : bindings.vars)
    renamer.vars[v.as<Var>()] = Var::make(freshName(v.as<Var>()->name + suffix, used), v.type());
  for (const Buffer& b : bindings.buffers) renamer.buffers[b.get()] = makeBuffer(b->name, b->elemType, b->shape);
  return renamer.mutate(s);
}

Stmt replaceStmt(const Stmt& root, const StmtNode* target, const Stmt& replacement) {
  StmtReplacer replacer(target, replacement);
  return replacer.mutate(root);
}

std::set<const Var*> varsIn(const Expr& e) {
  struct Collector : IRVisitor {
    std::set<const Var*> vars;
    using IRVisitor::visit;
    void visit(const Var* op) override { vars.insert(op); }
  } c;
  c.visitExpr(e);
  return c.vars;
}

bool containsLoop(const Stmt& s) {
  AccessCollector c;
  c.visitStmt(s);
  return c.loop;
}

bool usesBuffer(const Stmt& s, const BufferNode* buffer) {
  AccessCollector c;
  c.visitStmt(s);
  return c.loads.count(buffer) || c.stores.count(buffer);
}

bool loadsBuffer(const Expr& e, const BufferNode* buffer) {
  AccessCollector c;
  c.visitExpr(e);
  return c.loads.count(buffer) != 0;
}

std::set<const BufferNode*> storedBuffers(const Stmt& s) {
  AccessCollector c;
  c.visitStmt(s);
  return c.stores;
}

std::set<const BufferNode*> loadedBuffers(const Stmt& s) {
  AccessCollector c;
  c.visitStmt(s);
  return c.loads;
}

// ---- affine forms ----------------------------------------------------------------------------

Expr Affine::toExpr(Type t) const {
  Expr sum;
  for (const auto& [key, term] : terms) {
    if (term.second == 0) continue;
    Expr x = term.second == 1 ? term.first : term.first * IntImm::make(t, term.second);
    sum = sum.defined() ? sum + x : x;
  }
  if (!sum.defined()) return IntImm::make(t, constant);
  return constant == 0 ? sum : sum + IntImm::make(t, constant);
}

namespace {

bool dependsOn(const Expr& e, const std::set<const Var*>& inner) {
  for (const Var* v : varsIn(e))
    if (inner.count(v)) return true;
  return false;
}

Affine scaled(Affine a, int64_t k) {
  for (auto& [key, term] : a.terms) term.second *= k;
  a.constant *= k;
  return a;
}

Affine combined(Affine a, const Affine& b, int64_t sign) {
  for (const auto& [key, term] : b.terms) {
    auto it = a.terms.find(key);
    if (it == a.terms.end()) a.terms.emplace(key, std::make_pair(term.first, sign * term.second));
    else it->second.second += sign * term.second;
  }
  a.constant += sign * b.constant;
  return a;
}

}  // namespace

std::optional<Affine> affineForm(const Expr& e, const std::set<const Var*>& inner) {
  if (!e.type().isInt() || e.type().isVector()) return std::nullopt;
  if (const int64_t* c = asConstInt(e)) return Affine{{}, *c};
  if (!dependsOn(e, inner)) {
    Affine a;
    a.terms.emplace(print(e), std::make_pair(e, int64_t{1}));
    return a;
  }
  if (const auto* v = e.as<Var>()) {
    Affine a;
    a.terms.emplace(v->name, std::make_pair(e, int64_t{1}));
    return a;
  }
  if (const auto* add = e.as<Add>()) {
    auto a = affineForm(add->a, inner), b = affineForm(add->b, inner);
    if (!a || !b) return std::nullopt;
    return combined(*a, *b, 1);
  }
  if (const auto* sub = e.as<Sub>()) {
    auto a = affineForm(sub->a, inner), b = affineForm(sub->b, inner);
    if (!a || !b) return std::nullopt;
    return combined(*a, *b, -1);
  }
  if (const auto* mul = e.as<Mul>()) {
    auto a = affineForm(mul->a, inner), b = affineForm(mul->b, inner);
    if (!a || !b) return std::nullopt;
    if (b->terms.empty()) return scaled(*a, b->constant);
    if (a->terms.empty()) return scaled(*b, a->constant);
  }
  return std::nullopt;
}

// ---- numeric bounds --------------------------------------------------------------------------

std::optional<Interval> boundsOf(const Expr& e, const std::map<const Var*, Interval>& ranges) {
  if (const int64_t* c = asConstInt(e)) return Interval{*c, *c};
  if (const auto* v = e.as<Var>()) {
    auto it = ranges.find(v);
    if (it == ranges.end()) return std::nullopt;
    return it->second;
  }
  if (const auto* cast = e.as<Cast>()) {
    if (!cast->type.isInt() || !cast->value.type().isInt()) return std::nullopt;
    return boundsOf(cast->value, ranges);
  }
  auto pair = [&](const Expr& a, const Expr& b) -> std::optional<std::pair<Interval, Interval>> {
    auto x = boundsOf(a, ranges), y = boundsOf(b, ranges);
    if (!x || !y) return std::nullopt;
    return std::make_pair(*x, *y);
  };
  if (const auto* op = e.as<Add>()) {
    auto p = pair(op->a, op->b);
    if (!p) return std::nullopt;
    return Interval{p->first.lo + p->second.lo, p->first.hi + p->second.hi};
  }
  if (const auto* op = e.as<Sub>()) {
    auto p = pair(op->a, op->b);
    if (!p) return std::nullopt;
    return Interval{p->first.lo - p->second.hi, p->first.hi - p->second.lo};
  }
  if (const auto* op = e.as<Mul>()) {
    auto p = pair(op->a, op->b);
    if (!p) return std::nullopt;
    int64_t c[4] = {p->first.lo * p->second.lo, p->first.lo * p->second.hi, p->first.hi * p->second.lo,
                    p->first.hi * p->second.hi};
    return Interval{*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
  }
  if (const auto* op = e.as<Div>()) {
    auto x = boundsOf(op->a, ranges);
    const int64_t* d = asConstInt(op->b);
    if (!x || !d || *d <= 0) return std::nullopt;
    return Interval{x->lo / *d, x->hi / *d};  // truncation is monotone for a positive divisor
  }
  if (const auto* op = e.as<Mod>()) {
    auto x = boundsOf(op->a, ranges);
    const int64_t* d = asConstInt(op->b);
    if (!x || !d || *d <= 0) return std::nullopt;
    if (x->lo >= 0 && x->hi / *d == x->lo / *d) return Interval{x->lo % *d, x->hi % *d};
    if (x->lo >= 0) return Interval{0, *d - 1};
    return Interval{-(*d - 1), *d - 1};
  }
  if (const auto* op = e.as<Min>()) {
    auto p = pair(op->a, op->b);
    if (!p) return std::nullopt;
    return Interval{std::min(p->first.lo, p->second.lo), std::min(p->first.hi, p->second.hi)};
  }
  if (const auto* op = e.as<Max>()) {
    auto p = pair(op->a, op->b);
    if (!p) return std::nullopt;
    return Interval{std::max(p->first.lo, p->second.lo), std::max(p->first.hi, p->second.hi)};
  }
  return std::nullopt;
}

// ---- exact dependence check --------------------------------------------------------------------

namespace {

bool findPath(const Stmt& s, const StmtNode* target, std::vector<const StmtNode*>& path) {
  if (!s.defined()) return false;
  path.push_back(s.get());
  if (s.get() == target) return true;
  bool found = false;
  switch (s.kind()) {
    case StmtKind::For: found = findPath(s.as<For>()->body, target, path); break;
    case StmtKind::Seq:
      for (const Stmt& x : s.as<Seq>()->stmts)
        if ((found = findPath(x, target, path))) break;
      break;
    case StmtKind::IfThenElse:
      found = findPath(s.as<IfThenElse>()->thenCase, target, path) ||
              findPath(s.as<IfThenElse>()->elseCase, target, path);
      break;
    case StmtKind::Allocate: found = findPath(s.as<Allocate>()->body, target, path); break;
    case StmtKind::LetStmt: found = findPath(s.as<LetStmt>()->body, target, path); break;
    case StmtKind::Store:
    case StmtKind::Evaluate: break;
  }
  if (!found) path.pop_back();
  return found;
}

/// Whether every execution of `scope` touches the same pattern of elements, each buffer's shifted
/// by an offset that only the loops outside `scope` decide. Then the elements two iterations
/// share are the same in every execution, and tracing the first execution decides them all.
/// Requires: loop bounds, integer lets and conditions inside `scope` use only variables bound
/// inside it; every index is affine in those variables, and all accesses of one buffer have the
/// same part that does not depend on them (the same outer atoms with the same coefficients).
bool shiftInvariant(const For* scope) {
  struct Binder : IRVisitor {
    std::set<const Var*> bound;
    using IRVisitor::visit;
    void visit(const For* op) override {
      bound.insert(op->var.as<Var>());
      IRVisitor::visit(op);
    }
    void visit(const LetStmt* op) override {
      bound.insert(op->var.as<Var>());
      IRVisitor::visit(op);
    }
  } binder;
  binder.visit(scope);
  struct Checker : IRVisitor {
    const std::set<const Var*>* inner = nullptr;
    bool ok = true;
    std::map<const BufferNode*, std::map<std::string, int64_t>> outerPart;
    bool innerOnly(const Expr& e) const {
      for (const Var* v : varsIn(e))
        if (!inner->count(v)) return false;
      return true;
    }
    void access(const BufferNode* buffer, const Expr& index) {
      std::optional<Affine> form = affineForm(index, *inner);
      if (!form) {
        ok = false;
        return;
      }
      std::map<std::string, int64_t> outer;
      for (const auto& [text, term] : form->terms) {
        const Var* v = term.first.as<Var>();
        if (v && inner->count(v)) continue;
        outer[text] = term.second;
      }
      auto [it, fresh] = outerPart.emplace(buffer, outer);
      if (!fresh && it->second != outer) ok = false;
    }
    using IRVisitor::visit;
    void visit(const For* op) override {
      if (!innerOnly(op->min) || !innerOnly(op->extent)) ok = false;
      IRVisitor::visit(op);
    }
    void visit(const LetStmt* op) override {
      if (!op->value.type().isFloat() && !innerOnly(op->value)) ok = false;
      IRVisitor::visit(op);
    }
    void visit(const IfThenElse* op) override {
      if (!innerOnly(op->cond)) ok = false;
      IRVisitor::visit(op);
    }
    void visit(const Select* op) override {
      if (!innerOnly(op->cond)) ok = false;
      IRVisitor::visit(op);
    }
    void visit(const Load* op) override {
      access(op->buffer.get(), op->index);
      IRVisitor::visit(op);
    }
    void visit(const Store* op) override {
      access(op->buffer.get(), op->index);
      IRVisitor::visit(op);
    }
  } checker;
  checker.inner = &binder.bound;
  checker.visit(scope);
  return checker.ok;
}

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
bool disjointIterations(const For* loop, const std::set<const BufferNode*>* among = nullptr) {
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

/// Whether the iterations of `loop` provably touch disjoint elements of every buffer they write,
/// where loop variables enter the indices divided or recombined: f / E and f % E (fuse's form),
/// those again (a flat tile index taken apart into image, row and column: t / P, (t % P) / W,
/// t % W), and v · K + w with w a loop of extent K (split's form, as a merged loop's tile
/// index). Each such term becomes a variable of its own, with the extent its values span:
/// f / E (⌈F/E⌉), f % E (E), v · K + w (V · K); the actual tuples of values are a subset of
/// the tuples of these variables, so an index injective in all of them is injective in fact. A
/// variable derived from the iteration's stands for it: distinct iterations differ in every
/// derivation's result. Every access of a written buffer must then be affine in the variables
/// and its lanes, all with the same coefficients (constant offsets may differ: one more axis,
/// their gcd apart); the index must move with every iteration variable that was not replaced,
/// and be injective in all the axes (mixed radix, as injectiveIn). Distinct iterations then
/// touch distinct elements; the inner loops an index does not move with (a reduction's) stay in
/// one iteration.
bool disjointFusedIterations(const For* loop) {
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
      for (int side = 0; side < 2; ++side) {
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
  std::set<const Var*> replaced;
  Derive derive;
  derive.known = &known;
  derive.replaced = &replaced;
  for (int round = 0; round < 8; ++round) {
    derive.changed = false;
    for (Index& ix : indices) ix.base = derive.mutate(ix.base);
    if (!derive.changed) break;
  }
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
    std::sort(axes.begin(), axes.end());
    int64_t reach = 0;
    for (const auto& [coef, e] : axes) {
      if (e <= 1) continue;
      if (coef <= reach) return false;
      reach += coef * (e - 1);
    }
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
    if (!disjointIterations(loop) && !disjointFusedIterations(loop)) return false;
    if (loop == unit) return true;
    loop = loop->body.as<For>();
    if (loop == nullptr) return false;
  }
}

/// The buffers stored to inside `scope`, except those allocated inside `unit` (private to an
/// iteration).
std::set<const BufferNode*> writtenIn(const For* scope, const For* unit) {
  struct Allocated : IRVisitor {
    std::set<const BufferNode*> buffers;
    using IRVisitor::visit;
    void visit(const Allocate* op) override {
      buffers.insert(op->buffer.get());
      IRVisitor::visit(op);
    }
  } allocated;
  allocated.visitStmt(unit->body);
  std::set<const BufferNode*> written;
  for (const BufferNode* b : storedBuffers(scope->body))
    if (!allocated.buffers.count(b)) written.insert(b);
  return written;
}

/// The loops of `root` (itself included) whose bounds or body access one of `buffers`.
std::set<const For*> loopsAccessing(const For* root, const std::set<const BufferNode*>& buffers) {
  struct Walk : IRVisitor {
    const std::set<const BufferNode*>* buffers = nullptr;
    std::set<const For*> loops;
    std::vector<const For*> open;  // the loops around the current node
    using IRVisitor::visit;
    void mark() {
      for (auto it = open.rbegin(); it != open.rend() && loops.insert(*it).second; ++it) {
      }
    }
    void visit(const For* op) override {
      open.push_back(op);
      IRVisitor::visit(op);
      open.pop_back();
    }
    void visit(const Load* op) override {
      if (buffers->count(op->buffer.get())) mark();
      IRVisitor::visit(op);
    }
    void visit(const Store* op) override {
      if (buffers->count(op->buffer.get())) mark();
      IRVisitor::visit(op);
    }
  } walk;
  walk.buffers = &buffers;
  walk.visit(root);
  return walk.loops;
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

bool gStaticProofs = true;

/// Replays integer control flow; see checkIterations.
class Tracer {
 public:
  Tracer(const For* scope, const For* unit, std::string what, int64_t budget)
      : m_scope(scope), m_unit(unit), m_what(std::move(what)), m_budget(budget) {}

  /// Receives every access instead of the sharing records (checkMerge).
  struct Observer {
    virtual ~Observer() = default;
    virtual void touch(const BufferNode* buffer, int64_t element, bool write, int64_t iteration) = 0;
  };

  /// Traces `loop` next (scope and unit), numbering its iterations from 0 and handing each
  /// access to `observer`.
  void traceLoop(const For* loop, Observer* observer) {
    m_scope = m_unit = loop;
    m_nextIter = 0;
    m_scopeTraced = false;
    m_merge = observer;
  }

  std::set<const StmtNode*> path;  // statements on the way from the root to the scope
  bool scopeOnce = false;          // trace only the first execution of the scope (shiftInvariant)
  /// Loops inside the scope that access a buffer some iteration may write (others are skipped:
  /// they cannot share an element with a write).
  std::set<const For*> relevant;

  void exec(const Stmt& s) {
    if (!s.defined()) return;
    if (!m_inScope && !path.count(s.get())) return;
    switch (s.kind()) {
      case StmtKind::For: execFor(s.as<For>()); return;
      case StmtKind::Store: {
        const auto* op = s.as<Store>();
        reads(op->value);
        reads(op->index);
        access(op->buffer.get(), op->index, true);
        return;
      }
      case StmtKind::Seq:
        for (const Stmt& x : s.as<Seq>()->stmts) exec(x);
        return;
      case StmtKind::IfThenElse: {
        const auto* op = s.as<IfThenElse>();
        reads(op->cond);
        std::optional<int64_t> c = eval(op->cond);
        if (!c || *c) exec(op->thenCase);
        if (!c || !*c) exec(op->elseCase);
        return;
      }
      case StmtKind::Allocate: {
        const auto* op = s.as<Allocate>();
        bool priv = m_inUnit && m_private.insert(op->buffer.get()).second;
        exec(op->body);
        if (priv) m_private.erase(op->buffer.get());
        return;
      }
      case StmtKind::LetStmt: {
        const auto* op = s.as<LetStmt>();
        reads(op->value);
        m_env.emplace_back(op->var.as<Var>(), eval(op->value));
        exec(op->body);
        m_env.pop_back();
        return;
      }
      case StmtKind::Evaluate: reads(s.as<Evaluate>()->value); return;
    }
  }

  std::vector<BufferSharing> results() const {
    std::vector<BufferSharing> out;
    for (const BufferNode* b : m_order) out.push_back(m_result.at(b));
    return out;
  }

 private:
  struct Rec {
    int64_t first = -1;       // the first iteration that touched the element
    int64_t lastWriter = -1;  // the iteration that wrote it last (-1: none)
    bool multi = false;       // touched by more than one iteration
    bool written = false;
  };

  void step() {
    if (++m_steps > m_budget)
      throw Error(m_what + ": too many iterations to check dependences exactly (more than " +
                  std::to_string(m_budget) + " steps)");
  }

  void execFor(const For* op) {
    if (m_inScope && !relevant.count(op)) return;
    bool isScope = op == m_scope, isUnit = op == m_unit;
    if (isScope && scopeOnce && m_scopeTraced) return;
    std::optional<int64_t> mn = eval(op->min), ext = eval(op->extent);
    if (!mn || !ext) throw Error(m_what + ": bounds of loop '" + loopName(op) + "' depend on data");
    if (isScope) {
      m_scopeTraced = true;
      m_inScope = true;
      m_recs.clear();
    }
    for (int64_t i = 0; i < *ext; ++i) {
      step();
      if (isUnit) {
        m_iter = m_nextIter++;
        m_inUnit = true;
      }
      m_env.emplace_back(op->var.as<Var>(), *mn + i);
      exec(op->body);
      m_env.pop_back();
      if (isUnit) m_inUnit = false;
    }
    if (isScope) m_inScope = false;
  }

  /// Records the reads of every Load in `e` (operands before the load itself).
  void reads(const Expr& e) {
    if (!m_inUnit) return;
    struct LoadFinder : IRVisitor {
      std::vector<const Load*> loads;
      using IRVisitor::visit;
      void visit(const Load* op) override {
        IRVisitor::visit(op);
        loads.push_back(op);
      }
    } finder;
    finder.visitExpr(e);
    for (const Load* load : finder.loads) access(load->buffer.get(), load->index, false);
  }

  void access(const BufferNode* buffer, const Expr& index, bool write) {
    if (!m_inUnit || m_private.count(buffer)) return;
    step();
    int64_t stride = 0, lanes = 1;
    Expr baseExpr = index;
    if (const auto* ramp = index.as<Ramp>()) {
      std::optional<int64_t> s = eval(ramp->stride);
      baseExpr = s ? ramp->base : Expr();
      stride = s.value_or(0);
      lanes = ramp->lanes;
    } else if (const auto* bc = index.as<Broadcast>()) {
      baseExpr = bc->value;
    }
    std::optional<int64_t> b = baseExpr.defined() ? eval(baseExpr) : std::nullopt;
    if (!b)
      throw Error(m_what + ": the index of '" + buffer->name + "' is not integer arithmetic of loop variables (" +
                  print(index) + ")");
    int64_t base = *b;
    if (m_merge) {
      for (int64_t l = 0; l < lanes; ++l) m_merge->touch(buffer, base + l * stride, write, m_iter);
      return;
    }
    auto [it, inserted] = m_result.emplace(buffer, BufferSharing{buffer, false, false});
    if (inserted) m_order.push_back(buffer);
    BufferSharing& sharing = it->second;
    auto& recs = m_recs[buffer];
    for (int64_t l = 0; l < lanes; ++l) {
      Rec& r = recs[base + l * stride];
      if (r.first < 0) r.first = m_iter;
      else if (r.first != m_iter) r.multi = true;
      if (write) {
        r.written = true;
        r.lastWriter = m_iter;
      } else if (r.lastWriter != m_iter) {
        sharing.exposedRead = true;
      }
      if (r.multi && r.written) sharing.crossIteration = true;
    }
  }

  std::optional<int64_t> lookup(const Var* v) const {
    for (size_t i = m_env.size(); i-- > 0;)
      if (m_env[i].first == v) return m_env[i].second;
    return std::nullopt;
  }

  std::optional<int64_t> eval(const Expr& e) const {
    if (!e.defined() || e.type().isVector() || e.type().isFloat()) return std::nullopt;
    switch (e.kind()) {
      case ExprKind::IntImm: return e.as<IntImm>()->value;
      case ExprKind::Var: return lookup(e.as<Var>());
      case ExprKind::Cast: {
        const auto* c = e.as<Cast>();
        if (!c->value.type().isInt() && !c->value.type().isBool()) return std::nullopt;
        std::optional<int64_t> v = eval(c->value);
        if (!v) return std::nullopt;
        if (c->type.isBool()) return *v != 0;
        if (c->type.bits == 32) return static_cast<int64_t>(static_cast<int32_t>(*v));
        return v;
      }
#define KILN_BIN(name, expr)                                      \
  case ExprKind::name: {                                          \
    const auto* op = e.as<name>();                                \
    std::optional<int64_t> a = eval(op->a), b = eval(op->b);      \
    if (!a || !b) return std::nullopt;                            \
    int64_t x = *a, y = *b;                                       \
    return expr;                                                  \
  }
        KILN_BIN(Add, x + y)
        KILN_BIN(Sub, x - y)
        KILN_BIN(Mul, x * y)
        KILN_BIN(Min, std::min(x, y))
        KILN_BIN(Max, std::max(x, y))
        KILN_BIN(EQ, int64_t{x == y})
        KILN_BIN(NE, int64_t{x != y})
        KILN_BIN(LT, int64_t{x < y})
        KILN_BIN(LE, int64_t{x <= y})
        KILN_BIN(GT, int64_t{x > y})
        KILN_BIN(GE, int64_t{x >= y})
        KILN_BIN(And, int64_t{x && y})
        KILN_BIN(Or, int64_t{x || y})
#undef KILN_BIN
      case ExprKind::Div:
      case ExprKind::Mod: {
        Expr a = e.kind() == ExprKind::Div ? e.as<Div>()->a : e.as<Mod>()->a;
        Expr b = e.kind() == ExprKind::Div ? e.as<Div>()->b : e.as<Mod>()->b;
        std::optional<int64_t> x = eval(a), y = eval(b);
        if (!x || !y || *y == 0) return std::nullopt;
        return e.kind() == ExprKind::Div ? *x / *y : *x % *y;
      }
      case ExprKind::Not: {
        std::optional<int64_t> a = eval(e.as<Not>()->a);
        if (!a) return std::nullopt;
        return int64_t{!*a};
      }
      case ExprKind::Select: {
        const auto* s = e.as<Select>();
        std::optional<int64_t> c = eval(s->cond);
        if (!c) return std::nullopt;
        return *c ? eval(s->trueValue) : eval(s->falseValue);
      }
      default: return std::nullopt;
    }
  }

  const For* m_scope;
  const For* m_unit;
  Observer* m_merge = nullptr;
  std::string m_what;
  int64_t m_budget;
  int64_t m_steps = 0;
  bool m_inScope = false, m_inUnit = false, m_scopeTraced = false;
  int64_t m_iter = -1, m_nextIter = 0;
  std::vector<std::pair<const Var*, std::optional<int64_t>>> m_env;
  std::set<const BufferNode*> m_private;
  std::map<const BufferNode*, std::unordered_map<int64_t, Rec>> m_recs;
  std::map<const BufferNode*, BufferSharing> m_result;
  std::vector<const BufferNode*> m_order;
};

}  // namespace

void setStaticProofs(bool on) { gStaticProofs = on; }

std::vector<const StmtNode*> pathTo(const Stmt& root, const StmtNode* target) {
  std::vector<const StmtNode*> path;
  if (!findPath(root, target, path)) path.clear();
  return path;
}

std::vector<BufferSharing> checkIterations(const PrimFunc& func, const For* scope, const For* unit,
                                           const std::string& what, int64_t budget) {
  std::vector<const StmtNode*> path;
  KILN_ASSERT(findPath(func.body, scope, path), "checkIterations: the scope loop is not in the function");
  // Iterations that provably touch disjoint elements share none: nothing to replay.
  if (gStaticProofs && disjointChain(scope, unit)) return {};
  Tracer tracer(scope, unit, what, budget);
  tracer.path.insert(path.begin(), path.end());
  tracer.relevant = loopsAccessing(scope, writtenIn(scope, unit));
  tracer.scopeOnce = path.size() > 1 && shiftInvariant(scope);
  tracer.exec(func.body);
  return tracer.results();
}

BufferSharing sharingOf(const PrimFunc& func, const For* loop, const BufferNode* buffer, const std::string& what,
                        int64_t budget) {
  std::vector<const StmtNode*> path;
  KILN_ASSERT(findPath(func.body, loop, path), "sharingOf: the loop is not in the function");
  // Exact without replaying: iterations touch disjoint elements, each reading what it wrote.
  const std::set<const BufferNode*> only{buffer};
  if (gStaticProofs && disjointIterations(loop, &only) && windowWrittenFirst(loop, buffer))
    return BufferSharing{buffer, false, false};
  Tracer tracer(loop, loop, what, budget);
  tracer.path.insert(path.begin(), path.end());
  tracer.relevant = loopsAccessing(loop, {buffer});
  tracer.exec(func.body);
  for (const BufferSharing& s : tracer.results())
    if (s.buffer == buffer) return s;
  return BufferSharing{buffer, false, false};
}

void checkMerge(const PrimFunc& func, const For* first, const For* second, const std::string& what,
                int64_t budget) {
  // What the first loop's iterations did to each element shared with the second loop: the last
  // iteration that accessed it and the last that wrote it.
  struct Last {
    int64_t access = -1, write = -1;
  };
  struct FirstLoop : Tracer::Observer {
    std::map<const BufferNode*, std::unordered_map<int64_t, Last>> last;
    void touch(const BufferNode* buffer, int64_t element, bool write, int64_t iteration) override {
      Last& l = last[buffer][element];
      l.access = iteration;
      if (write) l.write = iteration;
    }
  } firstLoop;
  // Merged, iteration j of the second loop runs before iterations i > j of the first: an element
  // such an iteration wrote (or accessed, when j writes it) would change value.
  struct SecondLoop : Tracer::Observer {
    const FirstLoop* firstLoop = nullptr;
    std::string what, conflict;
    void touch(const BufferNode* buffer, int64_t element, bool write, int64_t iteration) override {
      auto b = firstLoop->last.find(buffer);
      if (!conflict.empty() || b == firstLoop->last.end()) return;
      auto e = b->second.find(element);
      if (e == b->second.end()) return;
      if ((write ? e->second.access : e->second.write) > iteration) conflict = buffer->name;
    }
  } secondLoop;
  secondLoop.firstLoop = &firstLoop;
  std::set<const BufferNode*> shared;
  for (const BufferNode* b : writtenIn(first, first))
    if (usesBuffer(second->body, b)) shared.insert(b);
  for (const BufferNode* b : writtenIn(second, second))
    if (usesBuffer(first->body, b)) shared.insert(b);
  if (shared.empty()) return;
  // Exact without replaying: when the loops run as one (second's variable first's), no element
  // of a shared buffer is touched by two iterations. Then iteration j of the second loop shares
  // elements with iteration j of the first only, which still runs before it.
  Stmt asOne = For::make(first->var, first->min, first->extent, first->forKind,
                         Seq::make({first->body, substitute(second->body, {{second->var, first->var}})}));
  if (gStaticProofs && disjointIterations(asOne.as<For>(), &shared)) return;
  Tracer tracer(first, first, what, budget);
  for (const For* loop : {first, second}) {
    std::vector<const StmtNode*> path;
    KILN_ASSERT(findPath(func.body, loop, path), "checkMerge: the loop is not in the function");
    tracer.path = std::set<const StmtNode*>(path.begin(), path.end());
    tracer.relevant = loopsAccessing(loop, shared);
    tracer.traceLoop(loop, loop == first ? static_cast<Tracer::Observer*>(&firstLoop) : &secondLoop);
    tracer.exec(func.body);
  }
  if (!secondLoop.conflict.empty())
    throw Error(what + ": an iteration of the second loop depends on a later iteration of the first through '" +
                secondLoop.conflict + "'");
}

std::optional<std::pair<Expr, Expr>> reductionOperands(const Expr& e) {
  if (const auto* x = e.as<Add>()) return std::pair{x->a, x->b};
  if (const auto* x = e.as<Mul>()) return std::pair{x->a, x->b};
  if (const auto* x = e.as<Min>()) return std::pair{x->a, x->b};
  if (const auto* x = e.as<Max>()) return std::pair{x->a, x->b};
  return std::nullopt;
}

std::optional<int64_t> InitReduction::firstOf(const Var* v) const {
  for (const auto& [var, first] : firsts)
    if (var == v) return first;
  return std::nullopt;
}

std::optional<InitReduction> initReduction(const Store* store) {
  const Expr& v = store->value;
  std::optional<std::pair<Expr, Expr>> operands = reductionOperands(v);
  if (!operands) return std::nullopt;
  const auto& [a, b] = *operands;
  const BufferNode* y = store->buffer.get();
  std::string at = print(store->index);
  auto match = [&](const Expr& sel, const Expr& rest) -> std::optional<InitReduction> {
    const auto* s = sel.as<Select>();
    if (!s || loadsBuffer(rest, y) || loadsBuffer(s->trueValue, y) || loadsBuffer(store->index, y)) return std::nullopt;
    const auto* old = s->falseValue.as<Load>();
    if (!old || old->buffer.get() != y || print(old->index) != at) return std::nullopt;
    InitReduction r;
    // v == c, c == v, or a conjunction of them over distinct variables.
    std::function<bool(const Expr&)> conditions = [&](const Expr& cond) {
      if (const auto* both = cond.as<And>()) return conditions(both->a) && conditions(both->b);
      const auto* eq = cond.as<EQ>();
      if (!eq) return false;
      const Var* var = eq->a.as<Var>();
      const int64_t* c = asConstInt(eq->b);
      if (!var || !c) {
        var = eq->b.as<Var>();
        c = asConstInt(eq->a);
      }
      if (!var || !c || r.firstOf(var)) return false;
      r.firsts.emplace_back(var, *c);
      return true;
    };
    if (!conditions(s->cond)) return std::nullopt;
    r.init = s->trueValue;
    // The same operation with the select's operand replaced by the old value, operands in place.
    bool left = sel.get() == a.get();
    Expr x = left ? s->falseValue : a, z = left ? b : s->falseValue;
    if (v.as<Add>()) r.reduced = Add::make(x, z);
    else if (v.as<Mul>()) r.reduced = Mul::make(x, z);
    else if (v.as<Min>()) r.reduced = Min::make(x, z);
    else r.reduced = Max::make(x, z);
    return r;
  };
  if (auto r = match(a, b)) return r;
  return match(b, a);
}

bool injectiveIn(const Expr& f, const std::vector<const For*>& loops) {
  std::set<const Var*> vars;
  for (const For* l : loops) vars.insert(l->var.as<Var>());
  std::optional<Affine> form = affineForm(f, vars);
  if (!form) return false;
  std::vector<std::pair<int64_t, int64_t>> axes;  // |coefficient|, extent
  for (const For* l : loops) {
    const int64_t* ext = asConstInt(l->extent);
    if (!ext || !asConstInt(l->min)) return false;
    if (*ext <= 1) continue;
    int64_t coef = 0;
    for (const auto& [text, term] : form->terms)
      if (term.first.as<Var>() == l->var.as<Var>()) coef = term.second;
    if (coef == 0) return false;  // the loop does not move f: its iterations meet
    axes.emplace_back(std::abs(coef), *ext);
  }
  std::sort(axes.begin(), axes.end());
  int64_t reach = 0;
  for (const auto& [coef, ext] : axes) {
    if (coef <= reach) return false;
    reach += coef * (ext - 1);
  }
  return true;
}

}  // namespace kiln::core::tir::schedule_detail
