// Analyses behind the schedule primitives (see schedule_analysis.h).
#include "core/tir/schedule_analysis.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <unordered_map>

#include "core/tir/functor.h"
#include "core/tir/printer.h"
#include "core/tir/simplify.h"
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

std::optional<Affine> affineForm(const Expr& e, const std::set<const Var*>& inner, NonAffine nonAffine) {
  if (!e.type().isInt() || e.type().isVector()) return std::nullopt;
  if (const int64_t* c = asConstInt(e)) return Affine{{}, *c};
  auto atom = [&e] {
    Affine a;
    a.terms.emplace(print(e), std::make_pair(e, int64_t{1}));
    return a;
  };
  if (!dependsOn(e, inner)) return atom();
  if (const auto* v = e.as<Var>()) {
    Affine a;
    a.terms.emplace(v->name, std::make_pair(e, int64_t{1}));
    return a;
  }
  if (const auto* add = e.as<Add>()) {
    auto a = affineForm(add->a, inner, nonAffine), b = affineForm(add->b, inner, nonAffine);
    if (!a || !b) return std::nullopt;
    return combined(*a, *b, 1);
  }
  if (const auto* sub = e.as<Sub>()) {
    auto a = affineForm(sub->a, inner, nonAffine), b = affineForm(sub->b, inner, nonAffine);
    if (!a || !b) return std::nullopt;
    return combined(*a, *b, -1);
  }
  if (const auto* mul = e.as<Mul>()) {
    auto a = affineForm(mul->a, inner, nonAffine), b = affineForm(mul->b, inner, nonAffine);
    if (!a || !b) return std::nullopt;
    if (b->terms.empty()) return scaled(*a, b->constant);
    if (a->terms.empty()) return scaled(*b, a->constant);
  }
  if (nonAffine == NonAffine::Atom) return atom();
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

std::optional<std::pair<Expr, Expr>> divideByRanges(const Expr& e, int64_t d,
                                                    const std::map<const Var*, Interval>& ranges,
                                                    int64_t span) {
  if (d <= 0 || span < 1 || !e.type().isInt() || e.type().isVector()) return std::nullopt;
  std::optional<Interval> whole = boundsOf(e, ranges);
  if (!whole || whole->lo < 0) return std::nullopt;
  Type t = e.type();
  if (whole->hi + span <= d) return std::make_pair(IntImm::make(t, 0), e);
  std::optional<Affine> form = affineForm(e, varsIn(e), NonAffine::Atom);
  if (!form) return std::nullopt;
  Expr q = IntImm::make(t, form->constant / d), r = IntImm::make(t, form->constant % d);
  for (const auto& [text, term] : form->terms) {
    const auto& [atom, coef] = term;
    if (coef == 0) continue;
    if (coef % d == 0)
      q = q + atom * IntImm::make(t, coef / d);
    else
      r = r + atom * IntImm::make(t, coef);
  }
  std::optional<Interval> rest = boundsOf(r, ranges);
  if (!rest || rest->lo < 0 || rest->hi + span > d) return std::nullopt;
  return std::make_pair(simplify(q), simplify(r));
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
