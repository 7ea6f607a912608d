#include "core/tir/expr.h"

#include <limits>
#include <set>

#include "runtime/error.h"

namespace kiln::core::tir {

std::string Type::str() const {
  std::string s;
  switch (code) {
    case Code::Int: s = "i" + std::to_string(bits); break;
    case Code::UInt: s = "u" + std::to_string(bits); break;
    case Code::Float: s = "f" + std::to_string(bits); break;
    case Code::Bool: s = "bool"; break;
    case Code::Handle: return "handle";
  }
  if (lanes > 1) s += "x" + std::to_string(lanes);
  return s;
}

Type Type::fromDType(runtime::DType dtype) {
  using runtime::DType;
  switch (dtype) {
    case DType::Float32: return f32();
    case DType::Float64: return f64();
    case DType::Int64: return i64();
    case DType::Int32: return i32();
    case DType::Bool: return u8();  // bools are stored as bytes
    case DType::Int8: return i8();
    case DType::UInt8: return u8();
  }
  return f32();
}

int64_t BufferNode::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<int64_t> BufferNode::strides() const {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

Buffer makeBuffer(const std::string& name, Type elemType, std::vector<int64_t> shape) {
  return std::make_shared<const BufferNode>(BufferNode{name, elemType, std::move(shape)});
}

const char* exprKindName(ExprKind kind) {
  switch (kind) {
#define KILN_X(name) \
  case ExprKind::name: return #name;
    KILN_TIR_EXPR_KINDS(KILN_X)
#undef KILN_X
  }
  return "?";
}

Expr::Expr(int64_t v) : Expr(IntImm::make(Type::i64(), v)) {}
Expr::Expr(int v) : Expr(IntImm::make(Type::i64(), v)) {}
Expr::Expr(float v) : Expr(FloatImm::make(Type::f32(), v)) {}

Expr IntImm::make(Type t, int64_t value) {
  KILN_ASSERT(!t.isVector(), "IntImm must be scalar");
  return Expr(std::make_shared<const IntImm>(t, value));
}

Expr FloatImm::make(Type t, double value) {
  KILN_ASSERT(t.isFloat() && !t.isVector(), "FloatImm must be a scalar float");
  return Expr(std::make_shared<const FloatImm>(t, value));
}

Expr Var::make(const std::string& name, Type t) { return Expr(std::make_shared<const Var>(t, name)); }

Expr Cast::make(Type t, Expr value) {
  KILN_ASSERT(value.defined(), "Cast of undefined value");
  KILN_ASSERT(t.lanes == value.type().lanes, "Cast must keep the lane count");
  return Expr(std::make_shared<const Cast>(t, std::move(value)));
}

namespace {
bool isCompare(ExprKind k) {
  return k == ExprKind::EQ || k == ExprKind::NE || k == ExprKind::LT || k == ExprKind::LE ||
         k == ExprKind::GT || k == ExprKind::GE;
}
}  // namespace

template <ExprKind K>
Expr BinaryNode<K>::make(Expr a, Expr b) {
  KILN_ASSERT(a.defined() && b.defined(), std::string("undefined operand of ") + exprKindName(K));
  KILN_ASSERT(a.type() == b.type(), std::string("operand types differ in ") + exprKindName(K) + ": " +
                                        a.type().str() + " vs " + b.type().str());
  Type t = a.type();
  if (isCompare(K)) t = Type::boolean(a.type().lanes);
  if (K == ExprKind::And || K == ExprKind::Or) KILN_ASSERT(a.type().isBool(), "And/Or need bool operands");
  return Expr(std::make_shared<const BinaryNode<K>>(t, std::move(a), std::move(b)));
}

#define KILN_INSTANTIATE(name) template struct BinaryNode<ExprKind::name>;
KILN_INSTANTIATE(Add)
KILN_INSTANTIATE(Sub)
KILN_INSTANTIATE(Mul)
KILN_INSTANTIATE(Div)
KILN_INSTANTIATE(Mod)
KILN_INSTANTIATE(Min)
KILN_INSTANTIATE(Max)
KILN_INSTANTIATE(EQ)
KILN_INSTANTIATE(NE)
KILN_INSTANTIATE(LT)
KILN_INSTANTIATE(LE)
KILN_INSTANTIATE(GT)
KILN_INSTANTIATE(GE)
KILN_INSTANTIATE(And)
KILN_INSTANTIATE(Or)
#undef KILN_INSTANTIATE

Expr Not::make(Expr a) {
  KILN_ASSERT(a.defined() && a.type().isBool(), "Not needs a bool operand");
  return Expr(std::make_shared<const Not>(a.type(), std::move(a)));
}

Expr Select::make(Expr cond, Expr t, Expr f) {
  KILN_ASSERT(cond.defined() && t.defined() && f.defined(), "undefined operand of Select");
  KILN_ASSERT(cond.type().isBool(), "Select condition must be bool");
  KILN_ASSERT(t.type() == f.type(), "Select branches differ: " + t.type().str() + " vs " + f.type().str());
  KILN_ASSERT(cond.type().lanes == 1 || cond.type().lanes == t.type().lanes, "Select lane mismatch");
  Type type = t.type();
  return Expr(std::make_shared<const Select>(type, std::move(cond), std::move(t), std::move(f)));
}

Expr Load::make(Buffer buffer, Expr index) {
  KILN_ASSERT(buffer && index.defined(), "Load needs a buffer and an index");
  KILN_ASSERT(index.type().isInt(), "Load index must be an integer");
  Type t = buffer->elemType.withLanes(index.type().lanes);
  return Expr(std::make_shared<const Load>(t, std::move(buffer), std::move(index)));
}

Expr Ramp::make(Expr base, Expr stride, int lanes) {
  KILN_ASSERT(base.defined() && stride.defined() && lanes > 1, "Ramp needs lanes > 1");
  KILN_ASSERT(!base.type().isVector() && base.type() == stride.type(), "Ramp base/stride must be equal scalars");
  Type t = base.type().withLanes(static_cast<uint16_t>(lanes));
  return Expr(std::make_shared<const Ramp>(t, std::move(base), std::move(stride), lanes));
}

Expr Broadcast::make(Expr value, int lanes) {
  KILN_ASSERT(value.defined() && !value.type().isVector() && lanes > 1, "Broadcast of a scalar to lanes > 1");
  Type t = value.type().withLanes(static_cast<uint16_t>(lanes));
  return Expr(std::make_shared<const Broadcast>(t, std::move(value), lanes));
}

Expr Call::make(const std::string& name, std::vector<Expr> args) {
  static const std::set<std::string> unary = {"exp", "log", "sqrt", "tanh", "erf", "sigmoid",
                                              "fabs", "floor", "ceil", "round", "roundeven"};
  if (name == "bounds_check") {  // core/tir/bounds_check.h: (index, lowOffset, highOffset, extent, site)
    KILN_ASSERT(args.size() == 5, "bounds_check takes five arguments");
    for (const Expr& a : args)
      KILN_ASSERT(a.type() == args[0].type() && a.type().isInt() && !a.type().isVector(),
                  "bounds_check takes scalar integers of one type");
    KILN_ASSERT(asConstInt(args[4]) != nullptr, "bounds_check's site must be a constant");
    Type t = args[0].type();
    return Expr(std::make_shared<const Call>(t, name, std::move(args)));
  }
  if (name == "dot4_u8i8") {
    KILN_ASSERT(args.size() == 3, "dot4_u8i8 takes (acc, a, b)");
    Type acc = args[0].type(), a = args[1].type(), b = args[2].type();
    KILN_ASSERT(acc.element() == Type::i32() && a.element() == Type::u8() && b.element() == Type::i8() &&
                    b.lanes == 4 * acc.lanes && (a.lanes == 4 || a.lanes == b.lanes),
                "dot4_u8i8 takes i32xN, u8x4 (or u8x4N) and i8x4N");
    return Expr(std::make_shared<const Call>(acc, name, std::move(args)));
  }
  if (name == "pow") {
    KILN_ASSERT(args.size() == 2 && args[0].type() == args[1].type(), "pow takes two equal-typed args");
  } else {
    KILN_ASSERT(unary.count(name) != 0, "unknown intrinsic '" + name + "'");
    KILN_ASSERT(args.size() == 1, name + " takes one argument");
  }
  KILN_ASSERT(args[0].type().isFloat(), name + " takes float arguments");
  Type t = args[0].type();
  return Expr(std::make_shared<const Call>(t, name, std::move(args)));
}

namespace {
// A literal on one side adopts the other side's type (and lanes).
Expr adopt(const Expr& literal, Type t) {
  Expr scalar;
  if (const auto* i = literal.as<IntImm>()) {
    scalar = t.isFloat() ? FloatImm::make(t.element(), static_cast<double>(i->value))
                         : IntImm::make(t.element(), i->value);
  } else if (const auto* f = literal.as<FloatImm>()) {
    if (!t.isFloat()) return literal;
    scalar = FloatImm::make(t.element(), f->value);
  } else {
    return literal;
  }
  return t.isVector() ? Broadcast::make(scalar, t.lanes) : scalar;
}

void unify(Expr& a, Expr& b) {
  if (a.type() == b.type()) return;
  bool aLit = a.as<IntImm>() || a.as<FloatImm>();
  bool bLit = b.as<IntImm>() || b.as<FloatImm>();
  if (bLit) b = adopt(b, a.type());
  else if (aLit) a = adopt(a, b.type());
}
}  // namespace

#define KILN_BINOP(op, Node)        \
  Expr operator op(Expr a, Expr b) { \
    unify(a, b);                     \
    return Node::make(a, b);         \
  }
KILN_BINOP(+, Add)
KILN_BINOP(-, Sub)
KILN_BINOP(*, Mul)
KILN_BINOP(/, Div)
KILN_BINOP(%, Mod)
KILN_BINOP(<, LT)
KILN_BINOP(<=, LE)
KILN_BINOP(>, GT)
KILN_BINOP(>=, GE)
KILN_BINOP(&&, And)
KILN_BINOP(||, Or)
#undef KILN_BINOP

Expr operator!(Expr a) { return Not::make(std::move(a)); }
Expr eq(Expr a, Expr b) { unify(a, b); return EQ::make(a, b); }
Expr ne(Expr a, Expr b) { unify(a, b); return NE::make(a, b); }
Expr min(Expr a, Expr b) { unify(a, b); return Min::make(a, b); }
Expr max(Expr a, Expr b) { unify(a, b); return Max::make(a, b); }
Expr select(Expr cond, Expr t, Expr f) { unify(t, f); return Select::make(cond, t, f); }
Expr cast(Type t, Expr v) { return v.type() == t ? v : Cast::make(t, std::move(v)); }
Expr call(const std::string& name, std::vector<Expr> args) { return Call::make(name, std::move(args)); }
Expr f32(double v) { return FloatImm::make(Type::f32(), v); }
Expr i64(int64_t v) { return IntImm::make(Type::i64(), v); }

Expr lowestValue(Type t) {
  if (t.isFloat()) return FloatImm::make(t.element(), -std::numeric_limits<double>::infinity());
  if (t.code == Type::Code::UInt || t.isBool()) return IntImm::make(t.element(), 0);
  return IntImm::make(t.element(),
                      t.bits >= 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (t.bits - 1)));
}

Expr highestValue(Type t) {
  if (t.isFloat()) return FloatImm::make(t.element(), std::numeric_limits<double>::infinity());
  if (t.code == Type::Code::UInt)
    return IntImm::make(t.element(), t.bits >= 64 ? -1 : (int64_t{1} << t.bits) - 1);
  return IntImm::make(t.element(),
                      t.bits >= 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (t.bits - 1)) - 1);
}

const int64_t* asConstInt(const Expr& e) {
  const auto* imm = e.as<IntImm>();
  return imm ? &imm->value : nullptr;
}

}  // namespace kiln::core::tir
