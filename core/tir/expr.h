// Expressions of Kiln's loop IR (TIR).
//
// Semantics
// - Nodes are immutable and shared (Expr is a cheap handle). Build them with the checked
//   `Kind::make` constructors or the operators in this header; mutators rebuild a node only when
//   a child changed, so pointer identity means "unchanged".
// - Integer arithmetic is on 64-bit (or 32-bit) two's-complement values and must not overflow.
//   Div and Mod on integers truncate toward zero (C semantics); lowering only divides
//   non-negative index values, where this equals floor division.
// - Float arithmetic follows IEEE-754 single/double precision; code generation may contract a*b+c
//   into FMA. No other fast-math rewrites happen unless a function asks for them.
// - Comparisons and And/Or/Not produce Bool. Select evaluates both operands (they must be free of
//   side effects and safe to evaluate); use IfThenElse for guarded loads.
// - Load reads buffer[index] where index counts elements from the buffer start (flat, row-major).
//   A vector Load has a Ramp index (contiguous or strided lanes).
// - Ramp(base, stride, lanes) is the vector [base, base+stride, ...]; Broadcast(v, lanes) repeats
//   a scalar. Binary operands must have equal types (including lanes).
// - Call is a pure math intrinsic by name: exp log sqrt tanh erf sigmoid fabs floor ceil round
//   roundeven (ties to even) pow (2 args). dot4_u8i8(acc i32xN, a u8x4N, b i8x4N) is the int8
//   dot product: lane i of the result is acc[i] + Σ_{k<4} a[4i+k]·b[4i+k] (exact, no saturation;
//   a u8x4 `a` is repeated for every lane) — vpdpbusd where the target has VNNI. Code generation maps each to LLVM intrinsics or libm.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tir/buffer.h"
#include "core/tir/type.h"

namespace kiln::core::tir {

// The single list of expression kinds: generates the kind enum, the visitor hooks and dispatch.
#define KILN_TIR_EXPR_KINDS(X) \
  X(IntImm)                    \
  X(FloatImm)                  \
  X(Var)                       \
  X(Cast)                      \
  X(Add)                       \
  X(Sub)                       \
  X(Mul)                       \
  X(Div)                       \
  X(Mod)                       \
  X(Min)                       \
  X(Max)                       \
  X(EQ)                        \
  X(NE)                        \
  X(LT)                        \
  X(LE)                        \
  X(GT)                        \
  X(GE)                        \
  X(And)                       \
  X(Or)                        \
  X(Not)                       \
  X(Select)                    \
  X(Load)                      \
  X(Ramp)                      \
  X(Broadcast)                 \
  X(Call)

enum class ExprKind : uint8_t {
#define KILN_X(name) name,
  KILN_TIR_EXPR_KINDS(KILN_X)
#undef KILN_X
};

const char* exprKindName(ExprKind kind);

struct ExprNode {
  ExprNode(ExprKind k, Type t) : kind(k), type(t) {}
  virtual ~ExprNode() = default;
  const ExprKind kind;
  const Type type;

  template <typename T>
  const T* as() const {
    return kind == T::kKind ? static_cast<const T*>(this) : nullptr;
  }
};

class Expr {
 public:
  Expr() = default;
  explicit Expr(std::shared_ptr<const ExprNode> node) : m_node(std::move(node)) {}
  /// Integer and float literals convert implicitly (i64 / f32).
  Expr(int64_t v);
  Expr(int v);
  Expr(float v);

  bool defined() const { return m_node != nullptr; }
  const ExprNode* get() const { return m_node.get(); }
  const ExprNode* operator->() const { return m_node.get(); }
  ExprKind kind() const { return m_node->kind; }
  Type type() const { return m_node->type; }
  template <typename T>
  const T* as() const {
    return m_node ? m_node->template as<T>() : nullptr;
  }
  bool same(const Expr& other) const { return m_node == other.m_node; }

 private:
  std::shared_ptr<const ExprNode> m_node;
};

#define KILN_EXPR_NODE(Name)                                   \
  static constexpr ExprKind kKind = ExprKind::Name;

struct IntImm : ExprNode {
  KILN_EXPR_NODE(IntImm)
  IntImm(Type t, int64_t v) : ExprNode(kKind, t), value(v) {}
  int64_t value;
  static Expr make(Type t, int64_t value);
};

struct FloatImm : ExprNode {
  KILN_EXPR_NODE(FloatImm)
  FloatImm(Type t, double v) : ExprNode(kKind, t), value(v) {}
  double value;
  static Expr make(Type t, double value);
};

/// A loop variable or let-bound name. Identity is the node pointer; names are for printing.
struct Var : ExprNode {
  KILN_EXPR_NODE(Var)
  Var(Type t, std::string n) : ExprNode(kKind, t), name(std::move(n)) {}
  std::string name;
  static Expr make(const std::string& name, Type t = Type::i64());
};

struct Cast : ExprNode {
  KILN_EXPR_NODE(Cast)
  Cast(Type t, Expr v) : ExprNode(kKind, t), value(std::move(v)) {}
  Expr value;
  static Expr make(Type t, Expr value);
};

/// Binary nodes share one layout.
template <ExprKind K>
struct BinaryNode : ExprNode {
  static constexpr ExprKind kKind = K;
  BinaryNode(Type t, Expr x, Expr y) : ExprNode(K, t), a(std::move(x)), b(std::move(y)) {}
  Expr a, b;
  static Expr make(Expr a, Expr b);
};
using Add = BinaryNode<ExprKind::Add>;
using Sub = BinaryNode<ExprKind::Sub>;
using Mul = BinaryNode<ExprKind::Mul>;
using Div = BinaryNode<ExprKind::Div>;
using Mod = BinaryNode<ExprKind::Mod>;
using Min = BinaryNode<ExprKind::Min>;
using Max = BinaryNode<ExprKind::Max>;
using EQ = BinaryNode<ExprKind::EQ>;
using NE = BinaryNode<ExprKind::NE>;
using LT = BinaryNode<ExprKind::LT>;
using LE = BinaryNode<ExprKind::LE>;
using GT = BinaryNode<ExprKind::GT>;
using GE = BinaryNode<ExprKind::GE>;
using And = BinaryNode<ExprKind::And>;
using Or = BinaryNode<ExprKind::Or>;

struct Not : ExprNode {
  KILN_EXPR_NODE(Not)
  Not(Type t, Expr v) : ExprNode(kKind, t), a(std::move(v)) {}
  Expr a;
  static Expr make(Expr a);
};

struct Select : ExprNode {
  KILN_EXPR_NODE(Select)
  Select(Type t, Expr c, Expr x, Expr y)
      : ExprNode(kKind, t), cond(std::move(c)), trueValue(std::move(x)), falseValue(std::move(y)) {}
  Expr cond, trueValue, falseValue;
  static Expr make(Expr cond, Expr trueValue, Expr falseValue);
};

struct Load : ExprNode {
  KILN_EXPR_NODE(Load)
  Load(Type t, Buffer b, Expr i) : ExprNode(kKind, t), buffer(std::move(b)), index(std::move(i)) {}
  Buffer buffer;
  Expr index;  // flat element index; a Ramp for vector loads
  static Expr make(Buffer buffer, Expr index);
};

struct Ramp : ExprNode {
  KILN_EXPR_NODE(Ramp)
  Ramp(Type t, Expr b, Expr s, int l) : ExprNode(kKind, t), base(std::move(b)), stride(std::move(s)), lanes(l) {}
  Expr base, stride;
  int lanes;
  static Expr make(Expr base, Expr stride, int lanes);
};

struct Broadcast : ExprNode {
  KILN_EXPR_NODE(Broadcast)
  Broadcast(Type t, Expr v, int l) : ExprNode(kKind, t), value(std::move(v)), lanes(l) {}
  Expr value;
  int lanes;
  static Expr make(Expr value, int lanes);
};

struct Call : ExprNode {
  KILN_EXPR_NODE(Call)
  Call(Type t, std::string n, std::vector<Expr> a) : ExprNode(kKind, t), name(std::move(n)), args(std::move(a)) {}
  std::string name;
  std::vector<Expr> args;
  /// The result type is the first argument's type. Throws InternalError for unknown intrinsics.
  static Expr make(const std::string& name, std::vector<Expr> args);
};

// Builders. Operands of differing types are an internal error (no implicit promotion), except
// that an IntImm/FloatImm literal adopts the other operand's type.
Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);
Expr operator%(Expr a, Expr b);
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
Expr operator&&(Expr a, Expr b);
Expr operator||(Expr a, Expr b);
Expr operator!(Expr a);
Expr eq(Expr a, Expr b);
Expr ne(Expr a, Expr b);
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr select(Expr cond, Expr t, Expr f);
Expr cast(Type t, Expr v);
Expr call(const std::string& name, std::vector<Expr> args);
Expr f32(double v);
Expr i64(int64_t v);
/// The lowest value of scalar type `t` (-inf for floats), the identity of max.
Expr lowestValue(Type t);
/// The highest value of scalar type `t` (+inf for floats), the identity of min.
Expr highestValue(Type t);

/// The constant value when `e` is an IntImm.
const int64_t* asConstInt(const Expr& e);

}  // namespace kiln::core::tir
