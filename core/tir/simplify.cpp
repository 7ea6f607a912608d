#include "core/tir/simplify.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "core/tir/functor.h"
#include "core/tir/schedule_analysis.h"

namespace kiln::core::tir {
namespace {

const double* asConstFloat(const Expr& e) {
  const auto* f = e.as<FloatImm>();
  return f ? &f->value : nullptr;
}

bool isConst(const Expr& e, int64_t v) {
  if (const int64_t* i = asConstInt(e)) return *i == v;
  if (const double* f = asConstFloat(e)) return *f == static_cast<double>(v);
  return false;
}

Expr boolImm(bool v) { return IntImm::make(Type::boolean(), v ? 1 : 0); }

class Simplifier : public IRMutator {
 public:
  /// A loop around the statement to simplify: its range holds for the divisions inside.
  void enclose(const For* loop) {
    const int64_t *lo = asConstInt(loop->min), *n = asConstInt(loop->extent);
    const Var* var = loop->var.as<Var>();
    if (lo && n && var) m_ranges[var] = schedule_detail::Interval{*lo, *lo + *n - 1};
  }

 protected:
  using IRMutator::visit;

  Expr visit(const Add* op, const Expr& self) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    const int64_t *ia = asConstInt(a), *ib = asConstInt(b);
    if (ia && ib) return IntImm::make(op->type, *ia + *ib);
    if (const double *fa = asConstFloat(a), *fb = asConstFloat(b); fa && fb) return foldFloat(op->type, *fa + *fb);
    if (ia && !ib) std::swap(a, b), std::swap(ia, ib);  // constant to the right
    if (isConst(b, 0) && op->type.isInt()) return a;
    // (x + c1) + c2 → x + (c1 + c2)
    if (ib) {
      if (const auto* inner = a.as<Add>()) {
        if (const int64_t* c1 = asConstInt(inner->b)) return simplifyAdd(inner->a, *c1 + *ib, op->type);
      }
      if (const auto* inner = a.as<Sub>()) {
        if (const int64_t* c1 = asConstInt(inner->b)) return simplifyAdd(inner->a, *ib - *c1, op->type);
      }
    }
    return rebuild<Add>(op, self, a, b);
  }

  Expr visit(const Sub* op, const Expr& self) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    const int64_t *ia = asConstInt(a), *ib = asConstInt(b);
    if (ia && ib) return IntImm::make(op->type, *ia - *ib);
    if (const double *fa = asConstFloat(a), *fb = asConstFloat(b); fa && fb) return foldFloat(op->type, *fa - *fb);
    if (isConst(b, 0) && op->type.isInt()) return a;
    if (op->type.isInt() && a.same(b)) return IntImm::make(op->type, 0);
    if (ib) {
      if (const auto* inner = a.as<Add>()) {
        if (const int64_t* c1 = asConstInt(inner->b)) return simplifyAdd(inner->a, *c1 - *ib, op->type);
      }
    }
    return rebuild<Sub>(op, self, a, b);
  }

  Expr visit(const Mul* op, const Expr& self) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    const int64_t *ia = asConstInt(a), *ib = asConstInt(b);
    if (ia && ib) return IntImm::make(op->type, *ia * *ib);
    if (const double *fa = asConstFloat(a), *fb = asConstFloat(b); fa && fb) return foldFloat(op->type, *fa * *fb);
    if (ia && !ib) std::swap(a, b), std::swap(ia, ib);
    if (op->type.isInt()) {
      if (isConst(b, 1)) return a;
      if (isConst(b, 0)) return b;
      // (x * c1) * c2 → x * (c1 * c2)
      if (ib) {
        if (const auto* inner = a.as<Mul>()) {
          if (const int64_t* c1 = asConstInt(inner->b)) return Mul::make(inner->a, IntImm::make(op->type, *c1 * *ib));
        }
      }
    } else if (op->type.isFloat() && isConst(b, 1)) {
      return a;  // x * 1.0 == x exactly in IEEE arithmetic
    }
    return rebuild<Mul>(op, self, a, b);
  }

  Expr visit(const Div* op, const Expr& self) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    const int64_t *ia = asConstInt(a), *ib = asConstInt(b);
    if (ia && ib && *ib != 0) return IntImm::make(op->type, *ia / *ib);
    if (const double *fa = asConstFloat(a), *fb = asConstFloat(b); fa && fb) return foldFloat(op->type, *fa / *fb);
    if (isConst(b, 1)) return a;
    if (auto qr = divideByLoopRanges(a, ib)) return qr->first;
    return rebuild<Div>(op, self, a, b);
  }

  Expr visit(const Mod* op, const Expr& self) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    const int64_t *ia = asConstInt(a), *ib = asConstInt(b);
    if (ia && ib && *ib != 0) return IntImm::make(op->type, *ia % *ib);
    if (op->type.isInt() && isConst(b, 1)) return IntImm::make(op->type, 0);
    if (auto qr = divideByLoopRanges(a, ib)) return qr->second;
    return rebuild<Mod>(op, self, a, b);
  }

  Expr visit(const Min* op, const Expr& self) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    const int64_t *ia = asConstInt(a), *ib = asConstInt(b);
    if (ia && ib) return IntImm::make(op->type, std::min(*ia, *ib));
    if (a.same(b)) return a;
    return rebuild<Min>(op, self, a, b);
  }

  Expr visit(const Max* op, const Expr& self) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    const int64_t *ia = asConstInt(a), *ib = asConstInt(b);
    if (ia && ib) return IntImm::make(op->type, std::max(*ia, *ib));
    if (a.same(b)) return a;
    return rebuild<Max>(op, self, a, b);
  }

#define KILN_CMP(Node, opr)                                                  \
  Expr visit(const Node* op, const Expr& self) override {                    \
    Expr a = mutate(op->a), b = mutate(op->b);                               \
    const int64_t *ia = asConstInt(a), *ib = asConstInt(b);                  \
    if (ia && ib && !op->type.isVector()) return boolImm(*ia opr *ib);       \
    return rebuild<Node>(op, self, a, b);                                    \
  }
  KILN_CMP(EQ, ==)
  KILN_CMP(NE, !=)
  KILN_CMP(LT, <)
  KILN_CMP(LE, <=)
  KILN_CMP(GT, >)
  KILN_CMP(GE, >=)
#undef KILN_CMP

  Expr visit(const And* op, const Expr& self) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (const int64_t* ia = asConstInt(a)) return *ia ? b : a;
    if (const int64_t* ib = asConstInt(b)) return *ib ? a : b;
    return rebuild<And>(op, self, a, b);
  }

  Expr visit(const Or* op, const Expr& self) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (const int64_t* ia = asConstInt(a)) return *ia ? a : b;
    if (const int64_t* ib = asConstInt(b)) return *ib ? b : a;
    return rebuild<Or>(op, self, a, b);
  }

  Expr visit(const Not* op, const Expr& self) override {
    Expr a = mutate(op->a);
    if (const int64_t* ia = asConstInt(a)) return boolImm(!*ia);
    return a.same(op->a) ? self : Not::make(a);
  }

  Expr visit(const Select* op, const Expr& self) override {
    Expr c = mutate(op->cond);
    if (const int64_t* ic = asConstInt(c)) return mutate(*ic ? op->trueValue : op->falseValue);
    Expr t = mutate(op->trueValue), f = mutate(op->falseValue);
    if (c.same(op->cond) && t.same(op->trueValue) && f.same(op->falseValue)) return self;
    return Select::make(c, t, f);
  }

  Expr visit(const Cast* op, const Expr& self) override {
    Expr v = mutate(op->value);
    if (v.type() == op->type) return v;
    if (const int64_t* i = asConstInt(v)) {
      if (op->type.isFloat()) return FloatImm::make(op->type, static_cast<double>(*i));
      if (op->type.isInt()) return IntImm::make(op->type, *i);
    }
    return v.same(op->value) ? self : Cast::make(op->type, v);
  }

  Stmt visit(const For* op, const Stmt& self) override {
    Expr mn = mutate(op->min), ext = mutate(op->extent);
    if (const int64_t* e = asConstInt(ext)) {
      if (*e <= 0) return Stmt();
      if (*e == 1) return mutate(substitute(op->body, {{op->var, mn}}));
    }
    // The loop's range, for the divisions and remainders of its body (divideByLoopRanges).
    const int64_t *lo = asConstInt(mn), *n = asConstInt(ext);
    const Var* var = op->var.as<Var>();
    if (lo && n && var) m_ranges[var] = schedule_detail::Interval{*lo, *lo + *n - 1};
    Stmt body = mutate(op->body);
    if (var) m_ranges.erase(var);
    if (!body.defined()) return Stmt();
    if (mn.same(op->min) && ext.same(op->extent) && body.same(op->body)) return self;
    return For::make(op->var, mn, ext, op->forKind, body);
  }

  Stmt visit(const IfThenElse* op, const Stmt& self) override {
    Expr c = mutate(op->cond);
    if (const int64_t* ic = asConstInt(c)) return mutate(*ic ? op->thenCase : op->elseCase);
    Stmt t = mutate(op->thenCase), e = mutate(op->elseCase);
    if (!t.defined() && !e.defined()) return Stmt();
    if (!t.defined()) return IfThenElse::make(Not::make(c), e);
    if (c.same(op->cond) && t.same(op->thenCase) && e.same(op->elseCase)) return self;
    return IfThenElse::make(c, t, e);
  }

  Stmt visit(const Seq* op, const Stmt& self) override {
    std::vector<Stmt> stmts;
    bool changed = false;
    for (const Stmt& s : op->stmts) {
      Stmt m = mutate(s);
      changed |= !m.same(s);
      if (m.defined()) stmts.push_back(m);
    }
    if (!changed) return self;
    if (stmts.empty()) return Stmt();
    return Seq::make(std::move(stmts));
  }

  Stmt visit(const Allocate* op, const Stmt& self) override {
    Stmt b = mutate(op->body);
    if (!b.defined()) return Stmt();
    return b.same(op->body) ? self : Allocate::make(op->buffer, b);
  }

  Stmt visit(const LetStmt* op, const Stmt& self) override {
    Expr v = mutate(op->value);
    // Constants and plain variables are cheaper substituted than bound.
    if (v.as<IntImm>() || v.as<FloatImm>() || v.as<Var>()) return mutate(substitute(op->body, {{op->var, v}}));
    Stmt b = mutate(op->body);
    if (!b.defined()) return Stmt();
    if (v.same(op->value) && b.same(op->body)) return self;
    return LetStmt::make(op->var, v, b);
  }

 private:
  /// {e / d, e % d} without a division when the enclosing loops' ranges allow it
  /// (schedule_detail::divideByRanges).
  std::optional<std::pair<Expr, Expr>> divideByLoopRanges(const Expr& e, const int64_t* d) const {
    if (!d || m_ranges.empty() || asConstInt(e)) return std::nullopt;
    return schedule_detail::divideByRanges(e, *d, m_ranges);
  }

  template <typename Node>
  static Expr rebuild(const Node* op, const Expr& self, const Expr& a, const Expr& b) {
    if (a.same(op->a) && b.same(op->b)) return self;
    return Node::make(a, b);
  }
  static Expr foldFloat(Type t, double v) {
    if (t.bits == 32) v = static_cast<double>(static_cast<float>(v));
    return FloatImm::make(t, v);
  }
  Expr simplifyAdd(const Expr& x, int64_t c, Type t) {
    if (c == 0) return x;
    return Add::make(x, IntImm::make(t, c));
  }

  std::map<const Var*, schedule_detail::Interval> m_ranges;  // the enclosing loops with constant bounds
};

}  // namespace

Expr simplify(const Expr& e) {
  Simplifier s;
  return s.mutate(e);
}

Stmt simplify(const Stmt& st) {
  Simplifier s;
  Stmt out = s.mutate(st);
  return out.defined() ? out : Seq::make({});
}

Stmt simplifyWithin(const Stmt& st, const std::vector<const For*>& enclosing) {
  Simplifier s;
  for (const For* loop : enclosing) s.enclose(loop);
  Stmt out = s.mutate(st);
  return out.defined() ? out : Seq::make({});
}

PrimFunc simplify(const PrimFunc& f) {
  PrimFunc out = f;
  out.body = simplify(f.body);
  return out;
}

}  // namespace kiln::core::tir
