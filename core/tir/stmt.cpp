#include "core/tir/stmt.h"

#include "runtime/error.h"

namespace kiln::core::tir {

const char* forKindName(ForKind kind) {
  switch (kind) {
    case ForKind::Serial: return "for";
    case ForKind::Parallel: return "parallel";
    case ForKind::Vectorized: return "vectorized";
    case ForKind::Unrolled: return "unrolled";
  }
  return "?";
}

Stmt For::make(Expr var, Expr min, Expr extent, ForKind kind, Stmt body) {
  KILN_ASSERT(var.as<Var>() != nullptr, "For needs a Var");
  KILN_ASSERT(min.defined() && extent.defined() && body.defined(), "For needs min, extent and body");
  KILN_ASSERT(min.type() == var.type() && extent.type() == var.type(), "For bounds must have the var's type");
  if (kind == ForKind::Unrolled) KILN_ASSERT(asConstInt(extent) != nullptr, "unrolled loops need a constant extent");
  return Stmt(std::make_shared<const For>(std::move(var), std::move(min), std::move(extent), kind, std::move(body)));
}

Stmt Store::make(Buffer buffer, Expr index, Expr value) {
  KILN_ASSERT(buffer && index.defined() && value.defined(), "Store needs buffer, index and value");
  KILN_ASSERT(index.type().isInt(), "Store index must be an integer");
  KILN_ASSERT(value.type() == buffer->elemType.withLanes(index.type().lanes),
              "Store of " + value.type().str() + " into " + buffer->name + " (" + buffer->elemType.str() + ")");
  return Stmt(std::make_shared<const Store>(std::move(buffer), std::move(index), std::move(value)));
}

Stmt Seq::make(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (Stmt& s : stmts) {
    if (!s.defined()) continue;
    if (const auto* seq = s.as<Seq>()) {
      flat.insert(flat.end(), seq->stmts.begin(), seq->stmts.end());
    } else {
      flat.push_back(std::move(s));
    }
  }
  if (flat.size() == 1) return flat[0];
  return Stmt(std::make_shared<const Seq>(std::move(flat)));
}

Stmt IfThenElse::make(Expr cond, Stmt thenCase, Stmt elseCase) {
  KILN_ASSERT(cond.defined() && cond.type() == Type::boolean(), "IfThenElse needs a scalar bool condition");
  KILN_ASSERT(thenCase.defined(), "IfThenElse needs a then case");
  return Stmt(std::make_shared<const IfThenElse>(std::move(cond), std::move(thenCase), std::move(elseCase)));
}

Stmt Allocate::make(Buffer buffer, Stmt body) {
  KILN_ASSERT(buffer && body.defined(), "Allocate needs a buffer and a body");
  return Stmt(std::make_shared<const Allocate>(std::move(buffer), std::move(body)));
}

Stmt LetStmt::make(Expr var, Expr value, Stmt body) {
  KILN_ASSERT(var.as<Var>() && value.defined() && body.defined(), "LetStmt needs var, value, body");
  KILN_ASSERT(var.type() == value.type(), "LetStmt value type differs from its var");
  return Stmt(std::make_shared<const LetStmt>(std::move(var), std::move(value), std::move(body)));
}

Stmt Evaluate::make(Expr value) {
  KILN_ASSERT(value.defined(), "Evaluate of undefined expression");
  return Stmt(std::make_shared<const Evaluate>(std::move(value)));
}

}  // namespace kiln::core::tir
