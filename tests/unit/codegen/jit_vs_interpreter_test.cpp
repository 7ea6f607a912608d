// Differential tests: JIT-compiled code against the TIR reference interpreter (core/lower) on
// (1) random expression trees, scalar and vector, and (2) kernels the real lowering produces.
#include <cstring>
#include <functional>

#include "codegen/llvm/jit.h"
#include "core/ir/parser.h"
#include "core/lower/interpreter.h"
#include "core/lower/lower.h"
#include "core/tir/printer.h"
#include "runtime/error.h"
#include "runtime/thread_pool.h"
#include "tests/unit/codegen/codegen_test_util.h"

namespace kiln::codegen::testing {
namespace {

using namespace core::tir;

/// Random, well-defined expression trees over two f32 buffers and the loop index: no overflow,
/// no division by zero, no NaN, bounded magnitudes.
class ExprFuzzer {
 public:
  ExprFuzzer(unsigned seed, int lanes, int64_t n) : m_rng(seed), m_lanes(lanes), m_n(n) {
    x = makeBuffer("x", Type::f32(), {n});
    y = makeBuffer("y", Type::f32(), {n});
    out = makeBuffer("out", Type::f32(), {n});
    i = Var::make("i");
    index = lanes == 1 ? i : Ramp::make(i * lanes, i64(1), lanes);
    reversed = lanes == 1 ? Expr(i64(n - 1) - i) : Ramp::make(i64(n - 1) - i * lanes, i64(-1), lanes);
  }

  PrimFunc make(const std::string& name) {
    Stmt body =
        For::make(i, i64(0), i64(m_n / m_lanes), ForKind::Serial, Store::make(out, index, floatExpr(4)));
    return makeFunc(name, {x, y, out}, body);
  }

  Buffer x, y, out;
  Expr i, index, reversed;

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(m_rng); }
  Expr splat(Expr scalar) { return m_lanes == 1 ? scalar : Broadcast::make(scalar, m_lanes); }

  Expr floatLeaf() {
    switch (pick(5)) {
      case 0: return Load::make(x, index);
      case 1: return Load::make(y, index);
      case 2: return Load::make(x, reversed);  // a gather for vectors
      case 3: return splat(f32(std::uniform_real_distribution<float>(-2, 2)(m_rng)));
      default: return cast(Type::f32(m_lanes), intExpr(2) % splat(i64(5)));
    }
  }

  Expr floatExpr(int depth) {
    if (depth == 0) return floatLeaf();
    Expr a = floatExpr(depth - 1);
    switch (pick(14)) {
      case 0: return a + floatExpr(depth - 1);
      case 1: return a - floatExpr(depth - 1);
      case 2: return a * floatExpr(depth - 1);
      case 3: return min(a, floatExpr(depth - 1));
      case 4: return max(a, floatExpr(depth - 1));
      case 5: return select(boolExpr(depth - 1), a, floatExpr(depth - 1));
      case 6: return call("fabs", {a});
      case 7: return call("tanh", {a});
      case 8: return call("sigmoid", {a});
      case 9: return call("exp", {min(a, splat(f32(3)))});
      case 10: return call("sqrt", {call("fabs", {a})});
      case 11: return call("floor", {a});
      case 12: return a / (call("fabs", {floatExpr(depth - 1)}) + splat(f32(1)));
      default: return floatLeaf();
    }
  }

  Expr intExpr(int depth) {
    if (depth == 0) return pick(2) == 0 ? index : splat(i64(pick(11) - 5));
    Expr a = intExpr(depth - 1);
    switch (pick(8)) {
      case 0: return a + intExpr(depth - 1);
      case 1: return a - intExpr(depth - 1);
      case 2: return a * intExpr(depth - 1);
      case 3: return a / splat(i64(1 + pick(7)));
      case 4: return a % splat(i64(1 + pick(7)));
      case 5: return min(a, intExpr(depth - 1));
      case 6: return max(a, intExpr(depth - 1));
      default: return select(boolExpr(depth - 1), a, intExpr(depth - 1));
    }
  }

  Expr boolExpr(int depth) {
    if (depth <= 0) return floatLeaf() < floatLeaf();
    switch (pick(7)) {
      case 0: return floatExpr(depth - 1) <= floatExpr(depth - 1);
      case 1: return intExpr(depth - 1) > intExpr(depth - 1);
      case 2: return ne(intExpr(depth - 1), intExpr(depth - 1));
      case 3: return eq(call("floor", {floatExpr(depth - 1)}), splat(f32(0)));
      case 4: return boolExpr(depth - 1) && boolExpr(depth - 1);
      case 5: return boolExpr(depth - 1) || !boolExpr(depth - 1);
      default: return intExpr(depth - 1) >= intExpr(depth - 1);
    }
  }

  std::mt19937 m_rng;
  int m_lanes;
  int64_t m_n;
};

void fuzzAgainstInterpreter(const Target& target, double tol, int lanes, int count) {
  const int64_t n = 64;
  std::vector<PrimFunc> funcs;
  std::vector<ExprFuzzer> fuzzers;
  for (int k = 0; k < count; ++k) {
    fuzzers.emplace_back(1000u * lanes + k, lanes, n);
    funcs.push_back(fuzzers.back().make("fuzz_" + std::to_string(k)));
  }
  auto lib = JitLibrary::compile(funcs, target);
  std::vector<float> x = randomFloats(n, -2, 2, 77), y = randomFloats(n, -2, 2, 78);
  for (int k = 0; k < count; ++k) {
    std::vector<float> expected(n), actual(n);
    core::lower::interpret(funcs[k], {x.data(), y.data(), expected.data()});
    runKernel(*lib, funcs[k].name, {x.data(), y.data(), actual.data()});
    for (int64_t e = 0; e < n; ++e) {
      ASSERT_TRUE(closeRel(expected[e], actual[e], tol)) << "element " << e << " of\n" << print(funcs[k]);
    }
  }
}

TEST(JitVsInterpreter, RandomScalarExpressionsExactWithoutFma) {
  // Without FMA nothing may differ from the interpreter's op-by-op rounding (same libm).
  Target noFma = Target::parse("llvm -mattr=-fma");
  ASSERT_TRUE(noFma.runnable);
  fuzzAgainstInterpreter(noFma, 1e-6, 1, 60);
}

TEST(JitVsInterpreter, RandomVectorExpressionsExactWithoutFma) {
  fuzzAgainstInterpreter(Target::parse("llvm -mattr=-fma"), 1e-6, 8, 60);
}

TEST(JitVsInterpreter, RandomExpressionsOnHostTarget) {
  fuzzAgainstInterpreter(hostTarget(), 1e-3, 1, 30);
  fuzzAgainstInterpreter(hostTarget(), 1e-3, 16, 30);
}

// ---- kernels from the real lowering ---------------------------------------------------------

size_t elementBytes(const Type& t) { return t.isBool() ? 1 : t.bits / 8; }

void fillRandom(std::vector<uint8_t>& bytes, const Type& t, std::mt19937& rng) {
  const size_t n = bytes.size() / elementBytes(t);
  for (size_t k = 0; k < n; ++k) {
    uint8_t* p = bytes.data() + k * elementBytes(t);
    if (t.isFloat() && t.bits == 32) {
      float v = std::uniform_real_distribution<float>(-2, 2)(rng);
      std::memcpy(p, &v, 4);
    } else if (t.isFloat()) {
      double v = std::uniform_real_distribution<double>(-2, 2)(rng);
      std::memcpy(p, &v, 8);
    } else {
      int64_t v = t.isBool() || t.bits == 8 ? rng() % 2 : 1 + rng() % 9;  // never 0: safe divisors
      std::memcpy(p, &v, elementBytes(t));                                // little-endian: the low bytes
    }
  }
}

double readElement(const uint8_t* p, const Type& t) {
  if (t.isFloat() && t.bits == 32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  if (t.isFloat()) {
    double v;
    std::memcpy(&v, p, 8);
    return v;
  }
  int64_t v = 0;
  std::memcpy(&v, p, elementBytes(t));
  if (t.bits == 32) return static_cast<int32_t>(v);
  return static_cast<double>(v);
}

void compareLoweredNode(const std::string& graphText) {
  SCOPED_TRACE(graphText);
  core::Graph graph = core::parseGraph(graphText);
  PrimFunc func = core::lower::lowerNode(graph, 0, "lowered");
  std::mt19937 rng(5);
  std::vector<std::vector<uint8_t>> interp, jitted;
  for (const Buffer& p : func.params) {
    std::vector<uint8_t> bytes(static_cast<size_t>(p->numel()) * elementBytes(p->elemType), 0xAB);
    fillRandom(bytes, p->elemType, rng);
    interp.push_back(bytes);
    jitted.push_back(bytes);
  }
  std::vector<void*> interpArgs, jitArgs;
  for (auto& b : interp) interpArgs.push_back(b.data());
  for (auto& b : jitted) jitArgs.push_back(b.data());
  core::lower::interpret(func, interpArgs);
  auto lib = jit({func});
  runtime::setNumThreads(2);
  runKernel(*lib, "lowered", jitArgs);
  runtime::setNumThreads(0);
  for (size_t k = func.params.size() - func.numOutputs; k < func.params.size(); ++k) {
    const Type t = func.params[k]->elemType;
    for (int64_t e = 0; e < func.params[k]->numel(); ++e) {
      double want = readElement(interp[k].data() + e * elementBytes(t), t);
      double got = readElement(jitted[k].data() + e * elementBytes(t), t);
      ASSERT_TRUE(closeRel(want, got, 1e-4)) << func.params[k]->name << "[" << e << "]\n" << print(func);
    }
  }
}

TEST(JitVsInterpreter, LoweredOperators) {
  const char* graphs[] = {
      R"(graph(%x: f32[1,8,17,19], %w: f32[16,8,3,3], %b: f32[16]) {
        %y = conv2d(%x, %w, %b) {padding=[1,1]} : f32[1,16,17,19]
        return %y })",
      R"(graph(%x: f32[1,6,15,13], %w: f32[4,6,3,3]) {
        %y = conv2d(%x, %w) {padding=[1,1], stride=[2,2]} : f32[1,4,8,7]
        return %y })",
      R"(graph(%x: f32[2,3,7], %w: f32[5,7], %b: f32[5]) {
        %y = dense(%x, %w, %b) : f32[2,3,5]
        return %y })",
      R"(graph(%a: f32[2,40,3], %b: f32[3,70]) {
        %y = matmul(%a, %b) : f32[2,40,70]
        return %y })",
      R"(graph(%x: f32[64,100]) {
        %y = softmax(%x) {axis=-1} : f32[64,100]
        return %y })",
      R"(graph(%x: f32[2,4,5,3]) {
        %y = transpose(%x) {perm=[0,2,3,1]} : f32[2,5,3,4]
        return %y })",
      R"(graph(%x: f32[1,3,9,9]) {
        %y = max_pool2d(%x) {kernel=[3,3], padding=[1,1], stride=[2,2]} : f32[1,3,5,5]
        return %y })",
      R"(graph(%x: f32[2,3,7,5]) {
        %y = adaptive_avg_pool2d(%x) {output_size=[2,3]} : f32[2,3,2,3]
        return %y })",
      R"(graph(%x: f32[1,8,32,32]) {
        %y = relu(%x) : f32[1,8,32,32]
        return %y })",
      R"(graph(%a: i64[2,3], %b: i64[2,3]) {
        %y = add(%a, %b) : i64[2,3]
        return %y })",
      R"(graph(%a: i64[3], %b: i64[3]) {
        %y = div(%a, %b) : i64[3]
        return %y })",
      R"(graph(%x: f32[4,33]) {
        %y = gelu(%x) : f32[4,33]
        return %y })",
      R"(graph(%x: f32[4,33]) {
        %y = silu(%x) : f32[4,33]
        return %y })",
      R"(graph(%x: f32[2,5,6]) {
        %y = sum(%x) {axes=[1], keepdims=1} : f32[2,1,6]
        return %y })",
  };
  int compared = 0;
  for (const char* text : graphs) {
    try {
      compareLoweredNode(text);
      ++compared;
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::Unsupported) continue;  // lowering's business, not codegen's
      ADD_FAILURE() << e.what() << "\nin " << text;
    }
  }
  EXPECT_GE(compared, 12) << "most operators should lower";
}

}  // namespace
}  // namespace kiln::codegen::testing
