// Lowerings of elementwise operators: unary math, broadcasting binary operators and inference
// batch normalization.
//
// The per-element expression of each operator (unaryExpr, binaryExpr, batchNormExpr) is shared
// with fused-group lowering (core/lower/fused.cpp), which inlines chains of them.
//
// Unary operators run one flat loop over the elements. Binary operators run one loop per output
// axis and read each operand through broadcast strides (0 along broadcast axes); operands that
// already have the output's shape are read with the flat loop too.
#include <cmath>
#include <numbers>

#include "core/lower/lower_internal.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

namespace {

/// Unary operators that are exact on integers too.
bool worksOnIntegers(const std::string& op) { return op == "relu" || op == "neg" || op == "abs" || op == "clamp"; }

}  // namespace

std::vector<int64_t> broadcastStrides(const Shape& in, const Shape& out) {
  std::vector<int64_t> inStrides = contiguousStrides(in);
  std::vector<int64_t> strides(out.size(), 0);
  size_t lead = out.size() - in.size();
  for (size_t d = lead; d < out.size(); ++d) {
    size_t id = d - lead;
    strides[d] = in[id] == 1 ? 0 : inStrides[id];
  }
  return strides;
}

void checkUnary(const OpContext& ctx) {
  DType dtype = ctx.inTypes[0].dtype;
  if (dtype == DType::Bool) ctx.unsupported("dtype bool");
  if (dtype != DType::Float32 && dtype != DType::Float64 && !worksOnIntegers(ctx.op))
    ctx.unsupported("dtype " + std::string(runtime::dtypeName(dtype)));
}

void checkBinary(const OpContext& ctx) {
  DType dtype = ctx.outTypes[0].dtype;
  bool isFloat = dtype == DType::Float32 || dtype == DType::Float64;
  if (dtype == DType::Bool) ctx.unsupported("dtype bool");
  if (!isFloat && (ctx.op == "div" || ctx.op == "pow"))
    ctx.unsupported("integer " + ctx.op + " (dtype " + std::string(runtime::dtypeName(dtype)) + ")");
}

Expr unaryExpr(const OpContext& ctx, const Expr& x) {
  const std::string& op = ctx.op;
  Type t = x.type();
  auto relu6 = [&](const Expr& v) { return min(max(v + 3, 0), 6); };
  if (op == "relu") return max(x, 0);
  if (op == "sigmoid") return call("sigmoid", {x});
  if (op == "tanh") return call("tanh", {x});
  if (op == "silu") return x * call("sigmoid", {x});
  if (op == "hardswish") return x * relu6(x) / 6;
  if (op == "hardsigmoid") return relu6(x) / 6;
  if (op == "exp") return call("exp", {x});
  if (op == "log") return call("log", {x});
  if (op == "sqrt") return call("sqrt", {x});
  if (op == "rsqrt") return 1 / call("sqrt", {x});
  if (op == "erf") return call("erf", {x});
  if (op == "neg") return t.isFloat() ? x * literal(t, -1.0) : 0 - x;
  if (op == "abs") return t.isFloat() ? call("fabs", {x}) : select(x < 0, 0 - x, x);
  if (op == "leaky_relu") {
    double alpha = ctx.attrs.getFloat("alpha", 0.01);
    return select(x > 0, x, x * literal(t, alpha));
  }
  if (op == "clamp") {
    Expr r = x;
    if (ctx.attrs.has("min")) r = max(r, literal(t, ctx.attrs.getFloat("min")));
    if (ctx.attrs.has("max")) r = min(r, literal(t, ctx.attrs.getFloat("max")));
    return r;
  }
  if (op == "gelu") {
    std::string approx = ctx.attrs.has("approximate") ? ctx.attrs.getString("approximate") : "none";
    if (approx == "none") return literal(t, 0.5) * x * (1 + call("erf", {x * literal(t, 1.0 / std::numbers::sqrt2)}));
    if (approx == "tanh") {
      Expr inner = literal(t, std::sqrt(2.0 / std::numbers::pi)) * (x + literal(t, 0.044715) * x * x * x);
      return literal(t, 0.5) * x * (1 + call("tanh", {inner}));
    }
    ctx.unsupported("approximate=\"" + approx + "\"");
  }
  KILN_ASSERT(false, "lowerUnary called for '" + op + "'");
  return x;
}

Expr binaryExpr(const std::string& op, const Expr& a, const Expr& b) {
  if (op == "add") return a + b;
  if (op == "sub") return a - b;
  if (op == "mul") return a * b;
  if (op == "div") return a / b;
  if (op == "maximum") return max(a, b);
  if (op == "minimum") return min(a, b);
  if (op == "pow") return call("pow", {a, b});
  // PyTorch's remainder takes the divisor's sign: the C remainder shifted into its range. An
  // integer divisor of 0 (an error in PyTorch) gives 0 here instead of a trap.
  if (op == "remainder") {
    if (a.type().isFloat()) return ((a % b) + b) % b;
    Expr divisor = select(eq(b, 0), 1, b);
    return select(eq(b, 0), 0, ((a % divisor) + divisor) % divisor);
  }
  KILN_ASSERT(false, "lowerBinary called for '" + op + "'");
  return a;
}

Expr batchNormScale(const Expr& gamma, const Expr& var, double epsilon) {
  return gamma / call("sqrt", {var + literal(var.type(), epsilon)});
}

Expr batchNormExpr(const Expr& x, const Expr& gamma, const Expr& beta, const Expr& mean, const Expr& var,
                   double epsilon) {
  return (x - mean) * batchNormScale(gamma, var, epsilon) + beta;
}

Stmt lowerUnary(const OpContext& ctx) {
  checkUnary(ctx);
  int64_t numel = ctx.outTypes[0].numel();
  LoopNest nest({numel}, {"i"}, wantParallel(numel));
  Expr x = Load::make(ctx.in[0], nest.offset({1}));
  return nest.wrap(Store::make(ctx.out[0], nest.offset({1}), unaryExpr(ctx, x)));
}

Stmt lowerBinary(const OpContext& ctx) {
  checkBinary(ctx);
  const Shape& outShape = ctx.outTypes[0].shape;
  int64_t numel = ctx.outTypes[0].numel();
  bool parallel = wantParallel(numel);
  Expr a, b;
  if (ctx.inTypes[0].shape == outShape && ctx.inTypes[1].shape == outShape) {
    LoopNest nest({numel}, {"i"}, parallel);
    a = Load::make(ctx.in[0], nest.offset({1}));
    b = Load::make(ctx.in[1], nest.offset({1}));
    return nest.wrap(Store::make(ctx.out[0], nest.offset({1}), binaryExpr(ctx.op, a, b)));
  }
  LoopNest nest(outShape, {}, parallel);
  a = Load::make(ctx.in[0], nest.offset(broadcastStrides(ctx.inTypes[0].shape, outShape)));
  b = Load::make(ctx.in[1], nest.offset(broadcastStrides(ctx.inTypes[1].shape, outShape)));
  Expr outIndex = nest.offset(contiguousStrides(outShape));
  return nest.wrap(Store::make(ctx.out[0], outIndex, binaryExpr(ctx.op, a, b)));
}

// y = (x - mean[c]) * (gamma[c] / sqrt(var[c] + eps)) + beta[c] over channel axis 1. The scale
// is computed once per (n, c) and bound with a LetStmt around the loop over the other axes.
Stmt lowerBatchNorm(const OpContext& ctx) {
  ctx.requireFloat();
  const Shape& shape = ctx.inTypes[0].shape;
  int64_t n = shape[0], c = shape[1];
  int64_t inner = 1;
  for (size_t d = 2; d < shape.size(); ++d) inner *= shape[d];
  const Buffer &x = ctx.in[0], &gamma = ctx.in[1], &beta = ctx.in[2], &mean = ctx.in[3], &var = ctx.in[4];
  Type t = x->elemType;
  double eps = ctx.attrs.getFloat("epsilon", 1e-5);

  LoopNest outer({n, c}, {"n", "c"}, wantParallel(ctx.outTypes[0].numel()), ParallelPolicy::FuseAll);
  Expr ch = outer[1];
  Expr scale = Var::make("scale", t);
  Expr scaleValue = batchNormScale(Load::make(gamma, ch), Load::make(var, ch), eps);
  Expr i = Var::make("i");
  Expr index = outer.offset({c * inner, inner}) + i;
  Expr y = (Load::make(x, index) - Load::make(mean, ch)) * scale + Load::make(beta, ch);
  Stmt body = serialFor(i, 0, inner, Store::make(ctx.out[0], index, y));
  return outer.wrap(LetStmt::make(scale, scaleValue, body));
}

}  // namespace kiln::core::lower
