#include "core/tir/functor.h"

#include "runtime/error.h"

namespace kiln::core::tir {

#define KILN_TIR_BINARY_KINDS(X) \
  X(Add) X(Sub) X(Mul) X(Div) X(Mod) X(Min) X(Max) X(EQ) X(NE) X(LT) X(LE) X(GT) X(GE) X(And) X(Or)

// ---- IRVisitor -----------------------------------------------------------------------------

void IRVisitor::visitExpr(const Expr& e) {
  if (!e.defined()) return;
  switch (e.kind()) {
#define KILN_X(name) \
  case ExprKind::name: visit(e.as<name>()); return;
    KILN_TIR_EXPR_KINDS(KILN_X)
#undef KILN_X
  }
}

void IRVisitor::visitStmt(const Stmt& s) {
  if (!s.defined()) return;
  switch (s.kind()) {
#define KILN_X(name) \
  case StmtKind::name: visit(s.as<name>()); return;
    KILN_TIR_STMT_KINDS(KILN_X)
#undef KILN_X
  }
}

void IRVisitor::visit(const Cast* op) { visitExpr(op->value); }
#define KILN_X(name)                         \
  void IRVisitor::visit(const name* op) {    \
    visitExpr(op->a);                        \
    visitExpr(op->b);                        \
  }
KILN_TIR_BINARY_KINDS(KILN_X)
#undef KILN_X
void IRVisitor::visit(const Not* op) { visitExpr(op->a); }
void IRVisitor::visit(const Select* op) {
  visitExpr(op->cond);
  visitExpr(op->trueValue);
  visitExpr(op->falseValue);
}
void IRVisitor::visit(const Load* op) { visitExpr(op->index); }
void IRVisitor::visit(const Ramp* op) {
  visitExpr(op->base);
  visitExpr(op->stride);
}
void IRVisitor::visit(const Broadcast* op) { visitExpr(op->value); }
void IRVisitor::visit(const Call* op) {
  for (const Expr& a : op->args) visitExpr(a);
}
void IRVisitor::visit(const For* op) {
  visitExpr(op->var);
  visitExpr(op->min);
  visitExpr(op->extent);
  visitStmt(op->body);
}
void IRVisitor::visit(const Store* op) {
  visitExpr(op->index);
  visitExpr(op->value);
}
void IRVisitor::visit(const Seq* op) {
  for (const Stmt& s : op->stmts) visitStmt(s);
}
void IRVisitor::visit(const IfThenElse* op) {
  visitExpr(op->cond);
  visitStmt(op->thenCase);
  visitStmt(op->elseCase);
}
void IRVisitor::visit(const Allocate* op) { visitStmt(op->body); }
void IRVisitor::visit(const LetStmt* op) {
  visitExpr(op->var);
  visitExpr(op->value);
  visitStmt(op->body);
}
void IRVisitor::visit(const Evaluate* op) { visitExpr(op->value); }

// ---- IRMutator -----------------------------------------------------------------------------

Expr IRMutator::mutate(const Expr& e) {
  if (!e.defined()) return e;
  switch (e.kind()) {
#define KILN_X(name) \
  case ExprKind::name: return visit(e.as<name>(), e);
    KILN_TIR_EXPR_KINDS(KILN_X)
#undef KILN_X
  }
  return e;
}

Stmt IRMutator::mutate(const Stmt& s) {
  if (!s.defined()) return s;
  switch (s.kind()) {
#define KILN_X(name) \
  case StmtKind::name: return visit(s.as<name>(), s);
    KILN_TIR_STMT_KINDS(KILN_X)
#undef KILN_X
  }
  return s;
}

Expr IRMutator::visit(const Cast* op, const Expr& self) {
  Expr v = mutate(op->value);
  return v.same(op->value) ? self : Cast::make(op->type, v);
}
#define KILN_X(name)                                              \
  Expr IRMutator::visit(const name* op, const Expr& self) {       \
    Expr a = mutate(op->a), b = mutate(op->b);                    \
    if (a.same(op->a) && b.same(op->b)) return self;              \
    return name::make(a, b);                                      \
  }
KILN_TIR_BINARY_KINDS(KILN_X)
#undef KILN_X
Expr IRMutator::visit(const Not* op, const Expr& self) {
  Expr a = mutate(op->a);
  return a.same(op->a) ? self : Not::make(a);
}
Expr IRMutator::visit(const Select* op, const Expr& self) {
  Expr c = mutate(op->cond), t = mutate(op->trueValue), f = mutate(op->falseValue);
  if (c.same(op->cond) && t.same(op->trueValue) && f.same(op->falseValue)) return self;
  return Select::make(c, t, f);
}
Expr IRMutator::visit(const Load* op, const Expr& self) {
  Expr i = mutate(op->index);
  return i.same(op->index) ? self : Load::make(op->buffer, i);
}
Expr IRMutator::visit(const Ramp* op, const Expr& self) {
  Expr b = mutate(op->base), s = mutate(op->stride);
  if (b.same(op->base) && s.same(op->stride)) return self;
  return Ramp::make(b, s, op->lanes);
}
Expr IRMutator::visit(const Broadcast* op, const Expr& self) {
  Expr v = mutate(op->value);
  return v.same(op->value) ? self : Broadcast::make(v, op->lanes);
}
Expr IRMutator::visit(const Call* op, const Expr& self) {
  std::vector<Expr> args;
  bool changed = false;
  for (const Expr& a : op->args) {
    args.push_back(mutate(a));
    changed |= !args.back().same(a);
  }
  return changed ? Call::make(op->name, std::move(args)) : self;
}

Stmt IRMutator::visit(const For* op, const Stmt& self) {
  Expr mn = mutate(op->min), ext = mutate(op->extent);
  Stmt body = mutate(op->body);
  if (mn.same(op->min) && ext.same(op->extent) && body.same(op->body)) return self;
  return For::make(op->var, mn, ext, op->forKind, body);
}
Stmt IRMutator::visit(const Store* op, const Stmt& self) {
  Expr i = mutate(op->index), v = mutate(op->value);
  if (i.same(op->index) && v.same(op->value)) return self;
  return Store::make(op->buffer, i, v);
}
Stmt IRMutator::visit(const Seq* op, const Stmt& self) {
  std::vector<Stmt> stmts;
  bool changed = false;
  for (const Stmt& s : op->stmts) {
    stmts.push_back(mutate(s));
    changed |= !stmts.back().same(s);
  }
  return changed ? Seq::make(std::move(stmts)) : self;
}
Stmt IRMutator::visit(const IfThenElse* op, const Stmt& self) {
  Expr c = mutate(op->cond);
  Stmt t = mutate(op->thenCase), e = mutate(op->elseCase);
  if (c.same(op->cond) && t.same(op->thenCase) && e.same(op->elseCase)) return self;
  return IfThenElse::make(c, t, e);
}
Stmt IRMutator::visit(const Allocate* op, const Stmt& self) {
  Stmt b = mutate(op->body);
  return b.same(op->body) ? self : Allocate::make(op->buffer, b);
}
Stmt IRMutator::visit(const LetStmt* op, const Stmt& self) {
  Expr v = mutate(op->value);
  Stmt b = mutate(op->body);
  if (v.same(op->value) && b.same(op->body)) return self;
  return LetStmt::make(op->var, v, b);
}
Stmt IRMutator::visit(const Evaluate* op, const Stmt& self) {
  Expr v = mutate(op->value);
  return v.same(op->value) ? self : Evaluate::make(v);
}

// ---- substitute ----------------------------------------------------------------------------

namespace {
class Substituter : public IRMutator {
 public:
  explicit Substituter(const std::vector<std::pair<Expr, Expr>>& map) : m_map(map) {}

 protected:
  Expr visit(const Var* op, const Expr& self) override {
    for (const auto& [from, to] : m_map) {
      if (from.get() == op) return to;
    }
    return self;
  }
  using IRMutator::visit;

 private:
  const std::vector<std::pair<Expr, Expr>>& m_map;
};
}  // namespace

Expr substitute(const Expr& e, const std::vector<std::pair<Expr, Expr>>& map) {
  Substituter s(map);
  return s.mutate(e);
}

Stmt substitute(const Stmt& st, const std::vector<std::pair<Expr, Expr>>& map) {
  Substituter s(map);
  return s.mutate(st);
}

}  // namespace kiln::core::tir
