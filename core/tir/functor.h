// Visitors and mutators over the loop IR, generated from the node-kind lists.
//
// IRVisitor walks every node (override a visit() to inspect, call the base to recurse).
// IRMutator rebuilds a node only when one of its children changed, so `mutated.same(original)`
// tells whether a pass changed anything.
#pragma once

#include "core/tir/stmt.h"

namespace kiln::core::tir {

class IRVisitor {
 public:
  virtual ~IRVisitor() = default;
  virtual void visitExpr(const Expr& e);
  virtual void visitStmt(const Stmt& s);

 protected:
  virtual void visit(const IntImm*) {}
  virtual void visit(const FloatImm*) {}
  virtual void visit(const Var*) {}
  virtual void visit(const Cast* op);
  virtual void visit(const Add* op);
  virtual void visit(const Sub* op);
  virtual void visit(const Mul* op);
  virtual void visit(const Div* op);
  virtual void visit(const Mod* op);
  virtual void visit(const Min* op);
  virtual void visit(const Max* op);
  virtual void visit(const EQ* op);
  virtual void visit(const NE* op);
  virtual void visit(const LT* op);
  virtual void visit(const LE* op);
  virtual void visit(const GT* op);
  virtual void visit(const GE* op);
  virtual void visit(const And* op);
  virtual void visit(const Or* op);
  virtual void visit(const Not* op);
  virtual void visit(const Select* op);
  virtual void visit(const Load* op);
  virtual void visit(const Ramp* op);
  virtual void visit(const Broadcast* op);
  virtual void visit(const Call* op);

  virtual void visit(const For* op);
  virtual void visit(const Store* op);
  virtual void visit(const Seq* op);
  virtual void visit(const IfThenElse* op);
  virtual void visit(const Allocate* op);
  virtual void visit(const LetStmt* op);
  virtual void visit(const Evaluate* op);
};

class IRMutator {
 public:
  virtual ~IRMutator() = default;
  virtual Expr mutate(const Expr& e);
  virtual Stmt mutate(const Stmt& s);

 protected:
  // Each receives the node and its handle (return `self` to keep it).
  virtual Expr visit(const IntImm*, const Expr& self) { return self; }
  virtual Expr visit(const FloatImm*, const Expr& self) { return self; }
  virtual Expr visit(const Var*, const Expr& self) { return self; }
  virtual Expr visit(const Cast* op, const Expr& self);
  virtual Expr visit(const Add* op, const Expr& self);
  virtual Expr visit(const Sub* op, const Expr& self);
  virtual Expr visit(const Mul* op, const Expr& self);
  virtual Expr visit(const Div* op, const Expr& self);
  virtual Expr visit(const Mod* op, const Expr& self);
  virtual Expr visit(const Min* op, const Expr& self);
  virtual Expr visit(const Max* op, const Expr& self);
  virtual Expr visit(const EQ* op, const Expr& self);
  virtual Expr visit(const NE* op, const Expr& self);
  virtual Expr visit(const LT* op, const Expr& self);
  virtual Expr visit(const LE* op, const Expr& self);
  virtual Expr visit(const GT* op, const Expr& self);
  virtual Expr visit(const GE* op, const Expr& self);
  virtual Expr visit(const And* op, const Expr& self);
  virtual Expr visit(const Or* op, const Expr& self);
  virtual Expr visit(const Not* op, const Expr& self);
  virtual Expr visit(const Select* op, const Expr& self);
  virtual Expr visit(const Load* op, const Expr& self);
  virtual Expr visit(const Ramp* op, const Expr& self);
  virtual Expr visit(const Broadcast* op, const Expr& self);
  virtual Expr visit(const Call* op, const Expr& self);

  virtual Stmt visit(const For* op, const Stmt& self);
  virtual Stmt visit(const Store* op, const Stmt& self);
  virtual Stmt visit(const Seq* op, const Stmt& self);
  virtual Stmt visit(const IfThenElse* op, const Stmt& self);
  virtual Stmt visit(const Allocate* op, const Stmt& self);
  virtual Stmt visit(const LetStmt* op, const Stmt& self);
  virtual Stmt visit(const Evaluate* op, const Stmt& self);
};

/// Replaces every occurrence of the Var nodes in `map` (by identity).
Expr substitute(const Expr& e, const std::vector<std::pair<Expr, Expr>>& map);
Stmt substitute(const Stmt& s, const std::vector<std::pair<Expr, Expr>>& map);

}  // namespace kiln::core::tir
