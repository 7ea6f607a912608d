// Tests of the TIR interpreter on hand-built functions: vector lanes, integer semantics, locals,
// let bindings, conditionals and error reporting.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/lower/interpreter.h"
#include "runtime/error.h"

namespace kiln::core::lower {
namespace {

using namespace tir;

PrimFunc makeFunc(std::vector<Buffer> params, int numOutputs, Stmt body) {
  PrimFunc f;
  f.name = "t";
  f.params = std::move(params);
  f.numOutputs = numOutputs;
  f.body = std::move(body);
  return f;
}

TEST(TirInterpreter, VectorRampBroadcastLoadStore) {
  // for (i, 0, 3): y[ramp(i*4, 1, 4)] = x[ramp(i*4, 1, 4)] * x4(2) + x4(f32(i))
  Buffer x = makeBuffer("x", Type::f32(), {12}), y = makeBuffer("y", Type::f32(), {12});
  Expr i = Var::make("i");
  Expr idx = Ramp::make(i * 4, i64(1), 4);
  Expr value = Load::make(x, idx) * Broadcast::make(f32(2), 4) + Broadcast::make(cast(Type::f32(), i), 4);
  PrimFunc f = makeFunc({x, y}, 1, For::make(i, i64(0), i64(3), ForKind::Vectorized, Store::make(y, idx, value)));
  std::vector<float> xs(12), ys(12, 0);
  for (int k = 0; k < 12; ++k) xs[k] = static_cast<float>(k) * 0.5f;
  interpret(f, {xs.data(), ys.data()});
  for (int k = 0; k < 12; ++k) EXPECT_FLOAT_EQ(ys[k], xs[k] * 2 + static_cast<float>(k / 4));
}

TEST(TirInterpreter, StridedRampGatherAndVectorSelect) {
  // y[ramp(0,1,4)] = select(x[ramp(0,2,4)] > x4(0), x[ramp(0,2,4)], x[ramp(1,2,4)])
  Buffer x = makeBuffer("x", Type::f32(), {8}), y = makeBuffer("y", Type::f32(), {4});
  Expr even = Load::make(x, Ramp::make(i64(0), i64(2), 4)), odd = Load::make(x, Ramp::make(i64(1), i64(2), 4));
  Expr cond = GT::make(even, Broadcast::make(f32(0), 4));
  PrimFunc f = makeFunc({x, y}, 1, Store::make(y, Ramp::make(i64(0), i64(1), 4), select(cond, even, odd)));
  std::vector<float> xs = {1, 10, -2, 20, 3, 30, -4, 40}, ys(4);
  interpret(f, {xs.data(), ys.data()});
  EXPECT_EQ(ys, (std::vector<float>{1, 20, 3, 40}));
}

TEST(TirInterpreter, IntegerSemantics) {
  // Division truncates toward zero; i32 arithmetic wraps; casts truncate floats.
  Buffer y = makeBuffer("y", Type::i64(), {5});
  Expr big = IntImm::make(Type::i32(), 2147483647);
  std::vector<Stmt> stores = {
      Store::make(y, i64(0), i64(-7) / i64(2)),
      Store::make(y, i64(1), i64(-7) % i64(2)),
      Store::make(y, i64(2), cast(Type::i64(), Add::make(big, IntImm::make(Type::i32(), 1)))),
      Store::make(y, i64(3), cast(Type::i64(), f32(-2.75))),
      Store::make(y, i64(4), cast(Type::i64(), cast(Type::u8(), i64(300)))),
  };
  PrimFunc f = makeFunc({y}, 1, Seq::make(stores));
  std::vector<int64_t> ys(5, 0);
  interpret(f, {ys.data()});
  EXPECT_EQ(ys, (std::vector<int64_t>{-3, -1, -2147483648LL, -2, 44}));
}

TEST(TirInterpreter, AllocateLetIfAndIntrinsics) {
  // acc = 0; for i: let e = exp(x[i]); if (e > 1) acc += e; y[0] = acc; y[1] = sqrt(16) + pow(2, 3)
  Buffer x = makeBuffer("x", Type::f32(), {4}), y = makeBuffer("y", Type::f32(), {2});
  Buffer acc = makeBuffer("acc", Type::f32(), {1});
  Expr i = Var::make("i"), e = Var::make("e", Type::f32());
  Stmt loop = For::make(i, i64(0), i64(4), ForKind::Parallel,
                        LetStmt::make(e, call("exp", {Load::make(x, i)}),
                                      IfThenElse::make(e > 1, Store::make(acc, i64(0), Load::make(acc, i64(0)) + e))));
  Stmt body = Allocate::make(acc, Seq::make({Store::make(acc, i64(0), f32(0)), loop,
                                             Store::make(y, i64(0), Load::make(acc, i64(0))),
                                             Store::make(y, i64(1), call("sqrt", {f32(16)}) + call("pow", {f32(2), f32(3)}))}));
  std::vector<float> xs = {-1, 0.5f, 2, -3}, ys(2);
  interpret(makeFunc({x, y}, 1, body), {xs.data(), ys.data()});
  EXPECT_FLOAT_EQ(ys[0], std::exp(0.5f) + std::exp(2.0f));
  EXPECT_FLOAT_EQ(ys[1], 12.0f);
}

TEST(TirInterpreter, SinglePrecisionRounding) {
  // 1e8f + 1 == 1e8f in single precision.
  Buffer y = makeBuffer("y", Type::f32(), {1});
  PrimFunc f = makeFunc({y}, 1, Store::make(y, i64(0), (f32(1e8) + f32(1)) - f32(1e8)));
  std::vector<float> ys(1, -1);
  interpret(f, {ys.data()});
  EXPECT_EQ(ys[0], 0.0f);
}

TEST(TirInterpreter, UninitializedLocalReadsAsNaN) {
  Buffer y = makeBuffer("y", Type::f32(), {1}), tmp = makeBuffer("tmp", Type::f32(), {1});
  PrimFunc f = makeFunc({y}, 1, Allocate::make(tmp, Store::make(y, i64(0), Load::make(tmp, i64(0)))));
  std::vector<float> ys(1, 0);
  interpret(f, {ys.data()});
  EXPECT_TRUE(std::isnan(ys[0]));
}

TEST(TirInterpreter, ErrorsAreReported) {
  Buffer x = makeBuffer("x", Type::f32(), {4}), y = makeBuffer("y", Type::f32(), {4});
  Expr i = Var::make("i");
  PrimFunc oob = makeFunc({x, y}, 1, For::make(i, i64(0), i64(5), ForKind::Serial, Store::make(y, i, Load::make(x, i))));
  std::vector<float> xs(4, 1), ys(4);
  try {
    interpret(oob, {xs.data(), ys.data()});
    FAIL() << "expected an out-of-bounds error";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("x[4]"), std::string::npos) << e.what();
  }
  Buffer yi = makeBuffer("y", Type::i64(), {1});
  PrimFunc div = makeFunc({yi}, 1, Store::make(yi, i64(0), i64(1) / (i64(1) - Load::make(yi, i64(0)))));
  std::vector<int64_t> one = {1};
  EXPECT_THROW(interpret(div, {one.data()}), InternalError);
  EXPECT_THROW(interpret(oob, {xs.data()}), InternalError);
  PrimFunc unbound = makeFunc({y}, 1, Store::make(y, i64(0), cast(Type::f32(), Var::make("free"))));
  EXPECT_THROW(interpret(unbound, {ys.data()}), InternalError);
}

}  // namespace
}  // namespace kiln::core::lower
