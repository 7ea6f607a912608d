// The vectorize primitive (see vectorize.h).
//
// Vectorizing `body` for lanes [b, b + w) substitutes i := Ramp(b, 1, w) and pushes vectors
// outward: an expression that does not depend on i stays scalar (and is broadcast where it meets
// a vector), integer index arithmetic keeps the Ramp form (Ramp ± scalar, Ramp × scalar,
// Ramp ± Ramp), a Load whose index became a Ramp is a vector load (contiguous when its stride is
// 1, a gather otherwise) and one whose index stayed scalar is a scalar load broadcast later.
// Anything that cannot be expressed (i under / or %, a store that is not contiguous in i) makes
// the loop ineligible; it is then left exactly as it was.
#include "core/tir/vectorize.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/tir/functor.h"
#include "core/tir/simplify.h"
#include "runtime/error.h"

namespace kiln::core::tir {


namespace {

struct Ineligible {};

bool sameExpr(const Expr& a, const Expr& b);

template <typename Node>
bool sameBinary(const Expr& a, const Expr& b) {
  const auto *x = a.as<Node>(), *y = b.as<Node>();
  return sameExpr(x->a, y->a) && sameExpr(x->b, y->b);
}

/// Structural equality (Vars and buffers by identity).
bool sameExpr(const Expr& a, const Expr& b) {
  if (a.same(b)) return true;
  if (!a.defined() || !b.defined() || a.kind() != b.kind() || !(a.type() == b.type())) return false;
  switch (a.kind()) {
    case ExprKind::IntImm: return a.as<IntImm>()->value == b.as<IntImm>()->value;
    case ExprKind::FloatImm: return a.as<FloatImm>()->value == b.as<FloatImm>()->value;
    case ExprKind::Var: return false;  // distinct nodes
    case ExprKind::Cast: return sameExpr(a.as<Cast>()->value, b.as<Cast>()->value);
#define KILN_X(name) \
  case ExprKind::name: return sameBinary<name>(a, b);
      KILN_X(Add) KILN_X(Sub) KILN_X(Mul) KILN_X(Div) KILN_X(Mod) KILN_X(Min) KILN_X(Max) KILN_X(EQ) KILN_X(NE)
      KILN_X(LT) KILN_X(LE) KILN_X(GT) KILN_X(GE) KILN_X(And) KILN_X(Or)
#undef KILN_X
    case ExprKind::Not: return sameExpr(a.as<Not>()->a, b.as<Not>()->a);
    case ExprKind::Select: {
      const auto *x = a.as<Select>(), *y = b.as<Select>();
      return sameExpr(x->cond, y->cond) && sameExpr(x->trueValue, y->trueValue) && sameExpr(x->falseValue, y->falseValue);
    }
    case ExprKind::Load:
      return a.as<Load>()->buffer == b.as<Load>()->buffer && sameExpr(a.as<Load>()->index, b.as<Load>()->index);
    case ExprKind::Ramp: {
      const auto *x = a.as<Ramp>(), *y = b.as<Ramp>();
      return x->lanes == y->lanes && sameExpr(x->base, y->base) && sameExpr(x->stride, y->stride);
    }
    case ExprKind::Broadcast:
      return a.as<Broadcast>()->lanes == b.as<Broadcast>()->lanes && sameExpr(a.as<Broadcast>()->value, b.as<Broadcast>()->value);
    case ExprKind::Call: {
      const auto *x = a.as<Call>(), *y = b.as<Call>();
      if (x->name != y->name || x->args.size() != y->args.size()) return false;
      for (size_t i = 0; i < x->args.size(); ++i)
        if (!sameExpr(x->args[i], y->args[i])) return false;
      return true;
    }
  }
  return false;
}

/// Checks that a loop body is straight-line scalar code and collects its stores.
class BodyCheck : public IRVisitor {
 public:
  bool ok = true;
  std::vector<const Store*> stores;
  std::vector<const Load*> loads;
  int maxBits = 8;

 protected:
  using IRVisitor::visit;
  void visit(const For*) override { ok = false; }
  void visit(const IfThenElse*) override { ok = false; }
  void visit(const Allocate*) override { ok = false; }
  void visit(const Evaluate*) override { ok = false; }
  void visit(const Ramp*) override { ok = false; }
  void visit(const Broadcast*) override { ok = false; }
  void visit(const Call* op) override {
    if (op->name != "dot4_u8i8") return IRVisitor::visit(op);
    // Its byte operands are 4-lane loads (schedule.h dot4): only their indices' bases are scalar code.
    visitExpr(op->args[0]);
    for (size_t i = 1; i < 3; ++i) {
      const auto* load = op->args[i].as<Load>();
      const auto* ramp = load ? load->index.as<Ramp>() : nullptr;
      const int64_t* stride = ramp ? asConstInt(ramp->stride) : nullptr;
      if (!ramp || ramp->lanes != 4 || !stride || *stride != 1) {
        ok = false;
        return;
      }
      loads.push_back(load);
      visitExpr(ramp->base);
    }
  }
  void visit(const Store* op) override {
    if (op->value.type().isVector()) ok = false;
    stores.push_back(op);
    maxBits = std::max<int>(maxBits, op->buffer->elemType.bits);
    IRVisitor::visit(op);
  }
  void visit(const Load* op) override {
    loads.push_back(op);
    maxBits = std::max<int>(maxBits, op->buffer->elemType.bits);
    IRVisitor::visit(op);
  }
};

/// Rewrites a straight-line body for lanes [base, base + lanes) of loop variable `iv`.
class BodyVectorizer {
 public:
  BodyVectorizer(const Var* iv, Expr base, int lanes) : m_iv(iv), m_base(std::move(base)), m_lanes(lanes) {}

  Stmt stmt(const Stmt& s) {
    if (const auto* seq = s.as<Seq>()) {
      std::vector<Stmt> out;
      for (const Stmt& x : seq->stmts) out.push_back(stmt(x));
      return Seq::make(std::move(out));
    }
    if (const auto* let = s.as<LetStmt>()) {
      // A fresh Var per copy of the body (every binding has its own Var).
      Expr v = expr(let->value);
      Expr var = Var::make(let->var.as<Var>()->name, v.type());
      m_vars[let->var.as<Var>()] = var;
      return LetStmt::make(var, v, stmt(let->body));
    }
    if (const auto* store = s.as<Store>()) {
      Expr index = expr(store->index);
      const auto* ramp = index.as<Ramp>();
      const int64_t* stride = ramp ? asConstInt(ramp->stride) : nullptr;
      if (!stride || *stride != 1) throw Ineligible{};
      Expr value = widen(expr(store->value));
      return Store::make(store->buffer, index, value);
    }
    throw Ineligible{};
  }

  Expr expr(const Expr& e) {
    switch (e.kind()) {
      case ExprKind::IntImm:
      case ExprKind::FloatImm: return e;
      case ExprKind::Var: {
        const auto* v = e.as<Var>();
        if (v == m_iv) return Ramp::make(m_base, IntImm::make(m_base.type(), 1), m_lanes);
        auto it = m_vars.find(v);
        return it == m_vars.end() ? e : it->second;
      }
      case ExprKind::Cast: {
        Expr v = expr(e.as<Cast>()->value);
        return v.type().isVector() ? Cast::make(e.type().withLanes(static_cast<uint16_t>(m_lanes)), widen(v))
                                   : (v.same(e.as<Cast>()->value) ? e : Cast::make(e.type(), v));
      }
      case ExprKind::Add: return addSub<Add>(e, true);
      case ExprKind::Sub: return addSub<Sub>(e, false);
      case ExprKind::Mul: return mul(e);
#define KILN_X(name) \
  case ExprKind::name: return binary<name>(e);
        KILN_X(Min) KILN_X(Max) KILN_X(EQ) KILN_X(NE) KILN_X(LT) KILN_X(LE) KILN_X(GT) KILN_X(GE) KILN_X(And) KILN_X(Or)
#undef KILN_X
      case ExprKind::Div:
      case ExprKind::Mod: return divMod(e);
      case ExprKind::Not: {
        Expr a = expr(e.as<Not>()->a);
        return Not::make(a);
      }
      case ExprKind::Select: {
        const auto* s = e.as<Select>();
        Expr c = expr(s->cond), t = expr(s->trueValue), f = expr(s->falseValue);
        if (!c.type().isVector() && !t.type().isVector() && !f.type().isVector()) return Select::make(c, t, f);
        return Select::make(c, widen(t), widen(f));
      }
      case ExprKind::Load: {
        const auto* load = e.as<Load>();
        Expr index = expr(load->index);
        return Load::make(load->buffer, index);
      }
      case ExprKind::Call: {
        const auto* c = e.as<Call>();
        if (c->name == "dot4_u8i8") return dot4(c);
        std::vector<Expr> args;
        bool vector = false;
        for (const Expr& a : c->args) {
          args.push_back(expr(a));
          vector |= args.back().type().isVector();
        }
        if (vector)
          for (Expr& a : args) a = widen(a);
        return Call::make(c->name, std::move(args));
      }
      case ExprKind::Ramp:
      case ExprKind::Broadcast: break;
    }
    throw Ineligible{};
  }

 private:
  Expr widen(const Expr& v) const { return v.type().isVector() ? v : Broadcast::make(v, m_lanes); }

  template <typename Node>
  Expr binary(const Expr& e) {
    const auto* n = e.as<Node>();
    Expr a = expr(n->a), b = expr(n->b);
    if (!a.type().isVector() && !b.type().isVector()) return a.same(n->a) && b.same(n->b) ? e : Node::make(a, b);
    return Node::make(widen(a), widen(b));
  }

  template <typename Node>
  Expr addSub(const Expr& e, bool isAdd) {
    const auto* n = e.as<Node>();
    Expr a = expr(n->a), b = expr(n->b);
    const auto *ra = a.as<Ramp>(), *rb = b.as<Ramp>();
    if ((!ra && a.type().isVector()) || (!rb && b.type().isVector())) return binaryOf<Node>(a, b);
    if (e.type().isInt() && (ra || rb)) {
      Expr base = isAdd ? (ra ? ra->base : a) + (rb ? rb->base : b) : (ra ? ra->base : a) - (rb ? rb->base : b);
      Expr zero = IntImm::make(e.type(), 0);
      Expr sa = ra ? ra->stride : zero, sb = rb ? rb->stride : zero;
      if ((ra && ra->lanes != m_lanes) || (rb && rb->lanes != m_lanes)) throw Ineligible{};
      return Ramp::make(simplify(base), simplify(isAdd ? sa + sb : sa - sb), m_lanes);
    }
    return binaryOf<Node>(a, b);
  }

  template <typename Node>
  Expr binaryOf(const Expr& a, const Expr& b) {
    if (!a.type().isVector() && !b.type().isVector()) return Node::make(a, b);
    return Node::make(widen(a), widen(b));
  }

  Expr mul(const Expr& e) {
    const auto* n = e.as<Mul>();
    Expr a = expr(n->a), b = expr(n->b);
    if (e.type().isInt()) {
      if (const auto* ra = a.as<Ramp>(); ra && !b.type().isVector())
        return Ramp::make(simplify(ra->base * b), simplify(ra->stride * b), m_lanes);
      if (const auto* rb = b.as<Ramp>(); rb && !a.type().isVector())
        return Ramp::make(simplify(a * rb->base), simplify(a * rb->stride), m_lanes);
    }
    return binaryOf<Mul>(a, b);
  }

  /// dot4_u8i8(acc, a[A : 4], b[B : 4]) for every lane: a vector of accumulators; a word whose
  /// index does not move with the lanes stays one 4-byte load (the call repeats it for every
  /// lane), words of consecutive lanes that are adjacent (A or B stepping by 4) one contiguous
  /// load. Anything else (b the same for every lane, words apart) is not vectorized.
  Expr dot4(const Call* c) {
    Expr acc = widen(expr(c->args[0]));
    Expr a = wordLoad(c->args[1], true), b = wordLoad(c->args[2], false);
    return call("dot4_u8i8", {acc, a, b});
  }

  Expr wordLoad(const Expr& e, bool mayRepeat) {
    const auto* load = e.as<Load>();
    const auto* ramp = load->index.as<Ramp>();
    Expr base = expr(ramp->base);
    if (!base.type().isVector()) {
      if (!mayRepeat) throw Ineligible{};
      return Load::make(load->buffer, Ramp::make(base, ramp->stride, 4));
    }
    const auto* lanes = base.as<Ramp>();
    const int64_t* step = lanes ? asConstInt(lanes->stride) : nullptr;
    if (!step || *step != 4) throw Ineligible{};
    return Load::make(load->buffer,
                      Ramp::make(lanes->base, IntImm::make(lanes->base.type(), 1), 4 * m_lanes));
  }

  Expr divMod(const Expr& e) {
    Expr a = e.kind() == ExprKind::Div ? e.as<Div>()->a : e.as<Mod>()->a;
    Expr b = e.kind() == ExprKind::Div ? e.as<Div>()->b : e.as<Mod>()->b;
    Expr va = expr(a), vb = expr(b);
    if (va.type().isVector() || vb.type().isVector()) {
      if (e.type().isInt()) throw Ineligible{};  // integer division per lane: not worth it
      return e.kind() == ExprKind::Div ? Div::make(widen(va), widen(vb)) : Mod::make(widen(va), widen(vb));
    }
    if (va.same(a) && vb.same(b)) return e;
    return e.kind() == ExprKind::Div ? Div::make(va, vb) : Mod::make(va, vb);
  }

  const Var* m_iv;
  Expr m_base;
  int m_lanes;
  std::map<const Var*, Expr> m_vars;
};

int floorPow2(int64_t n) {
  int p = 1;
  while (int64_t{p} * 2 <= n) p *= 2;
  return p;
}

class InnermostVectorizer : public IRMutator {
 public:
  explicit InnermostVectorizer(int lanes32) : m_lanes32(lanes32) {}

 protected:
  using IRMutator::visit;

  Stmt visit(const For* op, const Stmt& self) override {
    Stmt inner = IRMutator::visit(op, self);
    const auto* loop = inner.as<For>();
    if (!loop || loop->forKind == ForKind::Unrolled) return inner;
    Stmt vectorized = tryVectorize(loop);
    return vectorized.defined() ? vectorized : inner;
  }

 private:
  Stmt tryVectorize(const For* op) {
    const int64_t* extent = asConstInt(op->extent);
    if (!extent || *extent < 2 || op->var.type() != Type::i64()) return Stmt();
    BodyCheck check;
    check.visitStmt(op->body);
    if (!check.ok || check.stores.empty()) return Stmt();
    // A stored buffer may only be read where it is written.
    for (const Load* load : check.loads)
      for (const Store* store : check.stores)
        if (load->buffer == store->buffer && !sameExpr(load->index, store->index)) return Stmt();
    int lanes = std::max(2, m_lanes32 * 32 / std::max(8, check.maxBits));
    int width = std::min(lanes, floorPow2(*extent));
    if (width < 2) return Stmt();
    const Var* iv = op->var.as<Var>();
    int64_t chunks = *extent / width, rest = *extent % width;
    try {
      std::vector<Stmt> parts;
      Expr io = Var::make(iv->name + "_v");
      Expr base = simplify(op->min + io * width);
      Stmt main = BodyVectorizer(iv, base, width).stmt(op->body);
      ForKind kind = op->forKind == ForKind::Parallel && chunks >= 2 ? ForKind::Parallel : ForKind::Serial;
      parts.push_back(For::make(io, i64(0), i64(chunks), kind, main));
      Expr start = simplify(op->min + chunks * width);
      for (int w = width / 2; w >= 2; w /= 2) {
        if (rest < w) continue;
        parts.push_back(BodyVectorizer(iv, start, w).stmt(op->body));
        start = simplify(start + w);
        rest -= w;
      }
      if (rest == 1) parts.push_back(substitute(op->body, {{op->var, start}}));
      return Seq::make(std::move(parts));
    } catch (const Ineligible&) {
      return Stmt();
    }
  }

  int m_lanes32;
};

}  // namespace

Stmt vectorizeInnermostLoops(const Stmt& body, int lanes) {
  if (lanes < 2) return body;
  return InnermostVectorizer(lanes).mutate(body);
}

}  // namespace kiln::core::tir
