// The loop-IR interpreter: a tree walk over statements and expressions with a small value type
// holding one or more lanes.
#include "core/lower/interpreter.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "core/tir/bounds_check.h"
#include "runtime/error.h"
#include "runtime/kernel_abi.h"

namespace kiln::core::lower {

using namespace tir;

namespace {

[[noreturn]] void fail(const std::string& msg) { throw InternalError("interpret: " + msg); }

union Lane {
  int64_t i;
  double f;
};

/// A scalar or vector value; lane storage is inline for scalars.
struct Value {
  Type type;
  Lane one{};
  std::vector<Lane> many;

  explicit Value(Type t) : type(t) {
    if (t.lanes > 1) many.resize(t.lanes);
  }
  int lanes() const { return type.lanes; }
  Lane& operator[](int k) { return type.lanes > 1 ? many[k] : one; }
  const Lane& operator[](int k) const { return type.lanes > 1 ? many[k] : one; }
};

int64_t wrapInt(Type t, int64_t v) {
  if (t.isBool()) return v != 0;
  bool u = t.code == Type::Code::UInt;
  switch (t.bits) {
    case 8: return u ? static_cast<int64_t>(static_cast<uint8_t>(v)) : static_cast<int64_t>(static_cast<int8_t>(v));
    case 16: return u ? static_cast<int64_t>(static_cast<uint16_t>(v)) : static_cast<int64_t>(static_cast<int16_t>(v));
    case 32: return u ? static_cast<int64_t>(static_cast<uint32_t>(v)) : static_cast<int64_t>(static_cast<int32_t>(v));
    default: return v;
  }
}

double roundFloat(Type t, double v) { return t.bits == 32 ? static_cast<double>(static_cast<float>(v)) : v; }

size_t elemBytes(Type t) { return t.isBool() ? 1 : t.bits / 8; }

Lane readElement(const uint8_t* p, Type t) {
  Lane l{};
  if (t.isFloat()) {
    if (t.bits == 32) {
      float v;
      std::memcpy(&v, p, 4);
      l.f = v;
    } else {
      std::memcpy(&l.f, p, 8);
    }
    return l;
  }
  bool u = t.code == Type::Code::UInt || t.isBool();
  switch (elemBytes(t)) {
    case 1: l.i = u ? int64_t{*p} : int64_t{static_cast<int8_t>(*p)}; break;
    case 2: { int16_t v; std::memcpy(&v, p, 2); l.i = u ? int64_t{static_cast<uint16_t>(v)} : int64_t{v}; break; }
    case 4: { int32_t v; std::memcpy(&v, p, 4); l.i = u ? int64_t{static_cast<uint32_t>(v)} : int64_t{v}; break; }
    default: std::memcpy(&l.i, p, 8); break;
  }
  if (t.isBool()) l.i = l.i != 0;
  return l;
}

void writeElement(uint8_t* p, Type t, Lane l) {
  if (t.isFloat()) {
    if (t.bits == 32) {
      float v = static_cast<float>(l.f);
      std::memcpy(p, &v, 4);
    } else {
      std::memcpy(p, &l.f, 8);
    }
    return;
  }
  int64_t v = t.isBool() ? (l.i != 0) : l.i;
  switch (elemBytes(t)) {
    case 1: { uint8_t b = static_cast<uint8_t>(v); *p = b; break; }
    case 2: { int16_t s = static_cast<int16_t>(v); std::memcpy(p, &s, 2); break; }
    case 4: { int32_t s = static_cast<int32_t>(v); std::memcpy(p, &s, 4); break; }
    default: std::memcpy(p, &v, 8); break;
  }
}

double callIntrinsic(const std::string& name, Type t, double a, double b) {
  bool single = t.bits == 32;
  auto fa = static_cast<float>(a), fb = static_cast<float>(b);
  if (name == "exp") return single ? std::exp(fa) : std::exp(a);
  if (name == "log") return single ? std::log(fa) : std::log(a);
  if (name == "sqrt") return single ? std::sqrt(fa) : std::sqrt(a);
  if (name == "tanh") return single ? std::tanh(fa) : std::tanh(a);
  if (name == "erf") return single ? std::erf(fa) : std::erf(a);
  if (name == "sigmoid") return single ? 1.0f / (1.0f + std::exp(-fa)) : 1.0 / (1.0 + std::exp(-a));
  if (name == "fabs") return std::fabs(a);
  if (name == "floor") return std::floor(a);
  if (name == "ceil") return std::ceil(a);
  if (name == "round") return std::round(a);
  if (name == "roundeven") return single ? std::nearbyint(fa) : std::nearbyint(a);
  if (name == "pow") return single ? std::pow(fa, fb) : std::pow(a, b);
  fail("unknown intrinsic '" + name + "'");
}

struct BufferBinding {
  const BufferNode* node;
  uint8_t* data;
};

class Interpreter {
 public:
  void run(const PrimFunc& func, const std::vector<void*>& args) {
    if (args.size() != func.params.size())
      fail(func.name + " takes " + std::to_string(func.params.size()) + " buffers, got " + std::to_string(args.size()));
    for (size_t i = 0; i < args.size(); ++i) {
      if (!args[i] && func.params[i]->numel() > 0) fail("null argument for " + func.params[i]->name);
      m_buffers.push_back({func.params[i].get(), static_cast<uint8_t*>(args[i])});
    }
    m_func = &func;
    if (func.body.defined()) exec(func.body);
  }

 private:
  // ---- expressions ---------------------------------------------------------------------------

  Value eval(const Expr& e) {
    switch (e.kind()) {
      case ExprKind::IntImm: {
        Value v(e.type());
        v.one.i = wrapInt(e.type(), e.as<IntImm>()->value);
        return v;
      }
      case ExprKind::FloatImm: {
        Value v(e.type());
        v.one.f = roundFloat(e.type(), e.as<FloatImm>()->value);
        return v;
      }
      case ExprKind::Var: return lookup(e.as<Var>());
      case ExprKind::Cast: return evalCast(e.as<Cast>());
      case ExprKind::Add:
      case ExprKind::Sub:
      case ExprKind::Mul:
      case ExprKind::Div:
      case ExprKind::Mod:
      case ExprKind::Min:
      case ExprKind::Max:
      case ExprKind::EQ:
      case ExprKind::NE:
      case ExprKind::LT:
      case ExprKind::LE:
      case ExprKind::GT:
      case ExprKind::GE:
      case ExprKind::And:
      case ExprKind::Or: return evalBinary(e);
      case ExprKind::Not: {
        Value v = eval(e.as<Not>()->a);
        for (int k = 0; k < v.lanes(); ++k) v[k].i = !v[k].i;
        return v;
      }
      case ExprKind::Select: return evalSelect(e.as<Select>());
      case ExprKind::Load: return evalLoad(e.as<Load>());
      case ExprKind::Ramp: {
        const auto* r = e.as<Ramp>();
        Value base = eval(r->base), stride = eval(r->stride);
        Value v(e.type());
        for (int k = 0; k < r->lanes; ++k) {
          if (e.type().isFloat()) v[k].f = roundFloat(e.type(), base.one.f + k * stride.one.f);
          else v[k].i = wrapInt(e.type(), base.one.i + k * stride.one.i);
        }
        return v;
      }
      case ExprKind::Broadcast: {
        const auto* b = e.as<Broadcast>();
        Value s = eval(b->value);
        Value v(e.type());
        for (int k = 0; k < b->lanes; ++k) v[k] = s.one;
        return v;
      }
      case ExprKind::Call: {
        const auto* c = e.as<Call>();
        std::vector<Value> args;
        for (const Expr& a : c->args) args.push_back(eval(a));
        if (c->name == "bounds_check") return boundsCheck(args);
        if (c->name == "dot4_u8i8") return dot4(e.type(), args);
        Value v(e.type());
        for (int k = 0; k < v.lanes(); ++k) {
          double b = args.size() > 1 ? args[1][k].f : 0.0;
          v[k].f = roundFloat(e.type(), callIntrinsic(c->name, e.type(), args[0][k].f, b));
        }
        return v;
      }
    }
    fail(std::string("unknown expression kind ") + exprKindName(e.kind()));
  }

  // dot4_u8i8(acc, a, b): lane k adds Σ_j a[4k + j] · b[4k + j] (a of 4 lanes: a[j] for every k).
  Value dot4(const Type& type, const std::vector<Value>& args) {
    Value v(type);
    const bool repeat = args[1].lanes() == 4;
    for (int k = 0; k < v.lanes(); ++k) {
      int64_t sum = args[0][k].i;
      for (int j = 0; j < 4; ++j) sum += args[1][repeat ? j : 4 * k + j].i * args[2][4 * k + j].i;
      v[k].i = wrapInt(type, sum);
    }
    return v;
  }

  // bounds_check(x, lowOffset, highOffset, extent, site) → x (core/tir/bounds_check.h).
  Value boundsCheck(const std::vector<Value>& args) {
    if (args.size() != 5) fail("bounds_check takes five arguments");
    int64_t x = args[0].one.i, extent = args[3].one.i;
    int64_t low = x + args[1].one.i, high = x + args[2].one.i;
    if (low < 0 || high >= extent) {
      std::string buffer = boundsCheckBufferName(*m_func, args[4].one.i);
      throw InternalError(boundsFailureMessage(m_func->name, buffer, low < 0 ? low : high, extent));
    }
    return args[0];
  }

  Value lookup(const Var* var) {
    for (size_t i = m_vars.size(); i-- > 0;) {
      if (m_vars[i].first == var) return m_vars[i].second;
    }
    fail("unbound variable '" + var->name + "'");
  }

  Value evalCast(const Cast* op) {
    Value in = eval(op->value);
    Type from = op->value.type(), to = op->type;
    Value v(to);
    for (int k = 0; k < v.lanes(); ++k) {
      if (to.isFloat()) {
        double x = from.isFloat() ? in[k].f : static_cast<double>(in[k].i);
        v[k].f = roundFloat(to, x);
      } else if (from.isFloat()) {
        double x = in[k].f;
        if (to.isBool()) {
          v[k].i = x != 0.0;
          continue;
        }
        if (!std::isfinite(x) || std::fabs(x) >= 9.2e18) fail("cast of " + std::to_string(x) + " to " + to.str());
        v[k].i = wrapInt(to, static_cast<int64_t>(x));
      } else {
        v[k].i = wrapInt(to, in[k].i);
      }
    }
    return v;
  }

  static std::pair<const Expr*, const Expr*> operands(const Expr& e) {
    switch (e.kind()) {
#define KILN_OPERANDS(K)       \
  case ExprKind::K: {          \
    const auto* n = e.as<K>(); \
    return {&n->a, &n->b};     \
  }
      KILN_OPERANDS(Add) KILN_OPERANDS(Sub) KILN_OPERANDS(Mul) KILN_OPERANDS(Div) KILN_OPERANDS(Mod)
      KILN_OPERANDS(Min) KILN_OPERANDS(Max) KILN_OPERANDS(EQ) KILN_OPERANDS(NE) KILN_OPERANDS(LT)
      KILN_OPERANDS(LE) KILN_OPERANDS(GT) KILN_OPERANDS(GE) KILN_OPERANDS(And) KILN_OPERANDS(Or)
#undef KILN_OPERANDS
      default: fail(std::string("not a binary node: ") + exprKindName(e.kind()));
    }
  }

  Value evalBinary(const Expr& e) {
    auto [lhs, rhs] = operands(e);
    Value a = eval(*lhs), b = eval(*rhs);
    Type operand = lhs->type();
    Value v(e.type());
    ExprKind kind = e.kind();
    for (int k = 0; k < v.lanes(); ++k) {
      if (operand.isFloat()) {
        double x = a[k].f, y = b[k].f;
        switch (kind) {
          case ExprKind::Add: v[k].f = roundFloat(operand, x + y); break;
          case ExprKind::Sub: v[k].f = roundFloat(operand, x - y); break;
          case ExprKind::Mul: v[k].f = roundFloat(operand, x * y); break;
          case ExprKind::Div: v[k].f = roundFloat(operand, x / y); break;
          case ExprKind::Mod: v[k].f = roundFloat(operand, std::fmod(x, y)); break;
          case ExprKind::Min: v[k].f = y < x ? y : x; break;
          case ExprKind::Max: v[k].f = y > x ? y : x; break;
          case ExprKind::EQ: v[k].i = x == y; break;
          case ExprKind::NE: v[k].i = x != y; break;
          case ExprKind::LT: v[k].i = x < y; break;
          case ExprKind::LE: v[k].i = x <= y; break;
          case ExprKind::GT: v[k].i = x > y; break;
          case ExprKind::GE: v[k].i = x >= y; break;
          default: fail(std::string(exprKindName(kind)) + " on floats");
        }
        continue;
      }
      int64_t x = a[k].i, y = b[k].i;
      switch (kind) {
        // Wrapping arithmetic through unsigned to avoid undefined behaviour on overflow.
        case ExprKind::Add: v[k].i = wrapInt(operand, static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y))); break;
        case ExprKind::Sub: v[k].i = wrapInt(operand, static_cast<int64_t>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y))); break;
        case ExprKind::Mul: v[k].i = wrapInt(operand, static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y))); break;
        case ExprKind::Div:
        case ExprKind::Mod:
          if (y == 0) fail("integer division by zero in " + std::string(exprKindName(kind)));
          if (y == -1) v[k].i = kind == ExprKind::Div ? wrapInt(operand, static_cast<int64_t>(0 - static_cast<uint64_t>(x))) : 0;
          else v[k].i = kind == ExprKind::Div ? x / y : x % y;
          break;
        case ExprKind::Min: v[k].i = std::min(x, y); break;
        case ExprKind::Max: v[k].i = std::max(x, y); break;
        case ExprKind::EQ: v[k].i = x == y; break;
        case ExprKind::NE: v[k].i = x != y; break;
        case ExprKind::LT: v[k].i = x < y; break;
        case ExprKind::LE: v[k].i = x <= y; break;
        case ExprKind::GT: v[k].i = x > y; break;
        case ExprKind::GE: v[k].i = x >= y; break;
        case ExprKind::And: v[k].i = x && y; break;
        case ExprKind::Or: v[k].i = x || y; break;
        default: fail(std::string("unexpected binary kind ") + exprKindName(kind));
      }
    }
    return v;
  }

  Value evalSelect(const Select* op) {
    Value c = eval(op->cond), t = eval(op->trueValue), f = eval(op->falseValue);
    Value v(op->type);
    for (int k = 0; k < v.lanes(); ++k) v[k] = c[c.lanes() > 1 ? k : 0].i ? t[k] : f[k];
    return v;
  }

  uint8_t* address(const Buffer& buffer, int64_t index, const char* what) {
    int64_t numel = buffer->numel();
    if (index < 0 || index >= numel)
      fail(std::string(what) + " out of bounds: " + buffer->name + "[" + std::to_string(index) + "] (" +
           std::to_string(numel) + " elements)");
    for (size_t i = m_buffers.size(); i-- > 0;) {
      if (m_buffers[i].node == buffer.get()) return m_buffers[i].data + index * elemBytes(buffer->elemType);
    }
    fail("unbound buffer '" + buffer->name + "'");
  }

  Value evalLoad(const Load* op) {
    Value index = eval(op->index);
    Value v(op->type);
    for (int k = 0; k < v.lanes(); ++k) v[k] = readElement(address(op->buffer, index[k].i, "load"), op->buffer->elemType);
    return v;
  }

  // ---- statements ----------------------------------------------------------------------------

  void exec(const Stmt& s) {
    switch (s.kind()) {
      case StmtKind::For: {
        const auto* op = s.as<For>();
        int64_t mn = eval(op->min).one.i, extent = eval(op->extent).one.i;
        size_t slot = m_vars.size();
        m_vars.emplace_back(op->var.as<Var>(), Value(op->var.type()));
        for (int64_t i = mn; i < mn + extent; ++i) {
          m_vars[slot].second.one.i = wrapInt(op->var.type(), i);
          exec(op->body);
        }
        m_vars.pop_back();
        return;
      }
      case StmtKind::Store: {
        const auto* op = s.as<Store>();
        Value index = eval(op->index), value = eval(op->value);
        for (int k = 0; k < index.lanes(); ++k)
          writeElement(address(op->buffer, index[k].i, "store"), op->buffer->elemType, value[k]);
        return;
      }
      case StmtKind::Seq:
        for (const Stmt& child : s.as<Seq>()->stmts) exec(child);
        return;
      case StmtKind::IfThenElse: {
        const auto* op = s.as<IfThenElse>();
        if (eval(op->cond).one.i) exec(op->thenCase);
        else if (op->elseCase.defined()) exec(op->elseCase);
        return;
      }
      case StmtKind::Allocate: {
        const auto* op = s.as<Allocate>();
        size_t bytes = static_cast<size_t>(op->buffer->numel()) * elemBytes(op->buffer->elemType);
        auto memory = std::make_unique<uint8_t[]>(std::max<size_t>(bytes, 1));
        std::memset(memory.get(), 0xFF, bytes);
        m_buffers.push_back({op->buffer.get(), memory.get()});
        exec(op->body);
        m_buffers.pop_back();
        return;
      }
      case StmtKind::LetStmt: {
        const auto* op = s.as<LetStmt>();
        m_vars.emplace_back(op->var.as<Var>(), eval(op->value));
        exec(op->body);
        m_vars.pop_back();
        return;
      }
      case StmtKind::Evaluate:
        eval(s.as<Evaluate>()->value);
        return;
    }
    fail("unknown statement kind");
  }

  std::vector<std::pair<const Var*, Value>> m_vars;  // innermost binding last
  std::vector<BufferBinding> m_buffers;              // innermost allocation last
  const PrimFunc* m_func = nullptr;
};

}  // namespace

void interpret(const PrimFunc& func, const std::vector<void*>& args) { Interpreter().run(func, args); }

}  // namespace kiln::core::lower
