// The loop-IR verifier; see verify.h.
#include "core/tir/verify.h"

#include <set>

#include "core/tir/functor.h"
#include "runtime/error.h"

namespace kiln::core::tir {
namespace {

class Verifier : public IRVisitor {
 public:
  explicit Verifier(const PrimFunc& f) {
    for (size_t i = 0; i < f.params.size(); ++i) {
      m_buffers.insert(f.params[i].get());
      if (static_cast<int>(i) < static_cast<int>(f.params.size()) - f.numOutputs) m_inputs.insert(f.params[i].get());
    }
  }

  std::vector<std::string> problems;

  void visitExpr(const Expr& e) override {
    if (e.defined()) checkBinary(e);
    IRVisitor::visitExpr(e);
  }

 protected:
  void visit(const Var* op) override {
    if (!m_bound.count(op)) problem("variable '" + op->name + "' is used outside the loop or let that binds it");
  }

  void visit(const Load* op) override {
    checkBuffer(op->buffer, "load");
    if (op->buffer && op->type.element() != op->buffer->elemType)
      problem("load of " + op->type.str() + " from " + op->buffer->elemType.str() + " buffer '" + op->buffer->name + "'");
    checkIndex(op->buffer, op->index, op->type.lanes, "load");
    IRVisitor::visit(op);
  }

  void visit(const Select* op) override {
    if (op->cond.defined() && !op->cond->type.isBool()) problem("select condition of type " + op->cond->type.str());
    IRVisitor::visit(op);
  }

  void visit(const Ramp* op) override {
    if (op->base.defined() && !op->base->type.isInt()) problem("ramp base of type " + op->base->type.str());
    IRVisitor::visit(op);
  }

  void visit(const For* op) override {
    const Var* var = op->var.as<Var>();
    if (!var) {
      problem("a loop whose variable is not a Var");
      IRVisitor::visit(op);
      return;
    }
    visitExpr(op->min);
    visitExpr(op->extent);
    if (op->min.defined() && !op->min->type.isInt()) problem("loop '" + var->name + "' has a non-integer min");
    if (op->extent.defined() && !op->extent->type.isInt()) problem("loop '" + var->name + "' has a non-integer extent");
    const int64_t* extent = asConstInt(op->extent);
    if (extent && *extent < 0) problem("loop '" + var->name + "' has extent " + std::to_string(*extent));
    if (!extent && (op->forKind == ForKind::Unrolled || op->forKind == ForKind::Vectorized))
      problem(std::string(forKindName(op->forKind)) + " loop '" + var->name + "' needs a constant extent");
    bind(var, [&] { visitStmt(op->body); });
  }

  void visit(const LetStmt* op) override {
    const Var* var = op->var.as<Var>();
    visitExpr(op->value);
    if (!var) {
      problem("a let whose name is not a Var");
      return;
    }
    if (op->value.defined() && op->var->type != op->value->type)
      problem("let '" + var->name + "' of type " + op->var->type.str() + " bound to a " + op->value->type.str());
    bind(var, [&] { visitStmt(op->body); });
  }

  void visit(const Store* op) override {
    checkBuffer(op->buffer, "store");
    if (op->buffer && m_inputs.count(op->buffer.get()))
      problem("store to input buffer '" + op->buffer->name + "' (kernels write only outputs and local buffers)");
    int lanes = op->value.defined() ? op->value->type.lanes : 1;
    if (op->buffer && op->value.defined() && op->value->type.element() != op->buffer->elemType)
      problem("store of " + op->value->type.str() + " to " + op->buffer->elemType.str() + " buffer '" +
              op->buffer->name + "'");
    checkIndex(op->buffer, op->index, lanes, "store");
    IRVisitor::visit(op);
  }

  void visit(const IfThenElse* op) override {
    if (op->cond.defined() && !op->cond->type.isBool()) problem("if condition of type " + op->cond->type.str());
    IRVisitor::visit(op);
  }

  void visit(const Allocate* op) override {
    if (!op->buffer) {
      problem("an allocation without a buffer");
      return;
    }
    if (m_buffers.count(op->buffer.get())) problem("buffer '" + op->buffer->name + "' is allocated inside its own scope");
    m_buffers.insert(op->buffer.get());
    visitStmt(op->body);
    m_buffers.erase(op->buffer.get());
  }

 private:
  std::set<const Var*> m_bound;
  std::set<const BufferNode*> m_buffers;  // parameters and the enclosing allocations
  std::set<const BufferNode*> m_inputs;

  void problem(std::string text) {
    if (problems.size() < 20) problems.push_back(std::move(text));
  }

  template <typename Body>
  void bind(const Var* var, Body body) {
    if (!m_bound.insert(var).second) {
      problem("variable '" + var->name + "' is bound again inside its own scope");
      body();
      return;
    }
    body();
    m_bound.erase(var);
  }

  void checkBuffer(const Buffer& b, const char* what) {
    if (!b) {
      problem(std::string(what) + " without a buffer");
      return;
    }
    if (!m_buffers.count(b.get()))
      problem(std::string(what) + " of buffer '" + b->name + "', which is neither a parameter nor allocated around it");
  }

  void checkIndex(const Buffer& b, const Expr& index, int lanes, const char* what) {
    if (!index.defined()) return;
    if (!index->type.isInt()) problem(std::string(what) + " index of type " + index->type.str());
    if (index->type.lanes != lanes)
      problem(std::string(what) + " of " + std::to_string(lanes) + " lanes with an index of " +
              std::to_string(index->type.lanes));
    if (!b) return;
    // Constant indices are checked against the buffer here; others are bounds-check's (at run time).
    int64_t first = 0, last = 0;
    if (const int64_t* c = asConstInt(index)) {
      first = last = *c;
    } else if (const Ramp* r = index.as<Ramp>()) {
      const int64_t* base = asConstInt(r->base);
      const int64_t* stride = asConstInt(r->stride);
      if (!base || !stride) return;
      first = std::min(*base, *base + *stride * (r->lanes - 1));
      last = std::max(*base, *base + *stride * (r->lanes - 1));
    } else {
      return;
    }
    if (first < 0 || last >= b->numel())
      problem(std::string(what) + " at " + std::to_string(first) +
              (first == last ? "" : ".." + std::to_string(last)) + " outside buffer '" + b->name + "' of " +
              std::to_string(b->numel()) + " elements");
  }

  template <ExprKind K>
  bool checkOne(const Expr& e) {
    const auto* op = e.as<BinaryNode<K>>();
    if (!op) return false;
    if (op->a.defined() && op->b.defined() && op->a->type != op->b->type)
      problem(std::string(exprKindName(K)) + " of " + op->a->type.str() + " and " + op->b->type.str());
    return true;
  }

  void checkBinary(const Expr& e) {
    checkOne<ExprKind::Add>(e) || checkOne<ExprKind::Sub>(e) || checkOne<ExprKind::Mul>(e) ||
        checkOne<ExprKind::Div>(e) || checkOne<ExprKind::Mod>(e) || checkOne<ExprKind::Min>(e) ||
        checkOne<ExprKind::Max>(e) || checkOne<ExprKind::EQ>(e) || checkOne<ExprKind::NE>(e) ||
        checkOne<ExprKind::LT>(e) || checkOne<ExprKind::LE>(e) || checkOne<ExprKind::GT>(e) ||
        checkOne<ExprKind::GE>(e) || checkOne<ExprKind::And>(e) || checkOne<ExprKind::Or>(e);
  }
};

}  // namespace

std::vector<std::string> verifyPrimFunc(const PrimFunc& f) {
  Verifier v(f);
  if (f.numOutputs < 0 || f.numOutputs > static_cast<int>(f.params.size()))
    v.problems.push_back(std::to_string(f.numOutputs) + " outputs of " + std::to_string(f.params.size()) + " parameters");
  v.visitStmt(f.body);
  return v.problems;
}

void verifyPrimFuncOrThrow(const PrimFunc& f, const std::string& when) {
  std::vector<std::string> problems = verifyPrimFunc(f);
  if (problems.empty()) return;
  std::string text = "loop-IR verifier, " + when + ", kernel " + f.name + ": " + problems.front();
  if (problems.size() > 1) text += " (and " + std::to_string(problems.size() - 1) + " more)";
  throw InternalError(text);
}

}  // namespace kiln::core::tir
