#include <gtest/gtest.h>

#include "core/tir/functor.h"
#include "core/tir/printer.h"
#include "core/tir/simplify.h"
#include "runtime/error.h"

using namespace kiln::core::tir;

TEST(Tir, SimplifierFoldsConstantsAndIdentities) {
  Expr x = Var::make("x");
  EXPECT_EQ(print(simplify((x + 0) * 1)), "x");
  EXPECT_EQ(print(simplify((x + 2) + 3)), "(x + 5)");
  EXPECT_EQ(print(simplify(Expr(2) * 3 + x * 0)), "6");
  EXPECT_EQ(print(simplify((x * 4) * 2)), "(x * 8)");
  EXPECT_EQ(print(simplify(min(Expr(3), Expr(7)) + max(Expr(3), Expr(7)))), "10");
  EXPECT_EQ(print(simplify(select(Expr(1) < Expr(2), x, x + 1))), "x");
  EXPECT_EQ(print(simplify(Expr(7) / 2 + Expr(7) % 2)), "4");
  EXPECT_EQ(print(simplify(x - x)), "0");
  // Float x + 0.0 is not folded (it would change -0.0), x * 1.0 is exact.
  Expr f = Var::make("f", Type::f32());
  EXPECT_EQ(print(simplify(f * 1.0f)), "f");
  EXPECT_EQ(print(simplify(f + 0.0f)), "(f + 0.0f)");
}

TEST(Tir, SimplifierRemovesTrivialLoopsAndBranches) {
  Buffer out = makeBuffer("out", Type::f32(), {4});
  Expr i = Var::make("i"), j = Var::make("j");
  Stmt body = Store::make(out, i + j, f32(1.0));
  Stmt loops = For::make(i, 0, 4, ForKind::Serial, For::make(j, 0, 1, ForKind::Serial, body));
  EXPECT_EQ(print(simplify(loops)), "for (i, 0, 4) {\n  out[i] = 1.0f\n}\n");
  Stmt dead = For::make(i, 0, 0, ForKind::Serial, body);
  Stmt guarded = IfThenElse::make(Expr(3) > Expr(4), Store::make(out, 0, f32(2.0)), Store::make(out, 1, f32(3.0)));
  EXPECT_EQ(print(simplify(Seq::make({dead, guarded}))), "out[1] = 3.0f\n");
}

// Inside loops with constant bounds, a division or remainder whose remainder part stays within
// the divisor goes away: a reshape's flat index read inside the loops over its axes.
TEST(Tir, SimplifierResolvesDivisionsByLoopRanges) {
  Buffer in = makeBuffer("in", Type::f32(), {128 * 256}), out = makeBuffer("out", Type::f32(), {128 * 256});
  Expr i = Var::make("i"), j = Var::make("j"), k = Var::make("k");
  Expr flat = i * 256 + j * 64 + k;
  auto nest = [&](int64_t jExtent, int64_t kExtent) {
    Stmt store = Store::make(out, flat, Load::make(in, (flat / 256) % 128 * 256 + flat % 256));
    return For::make(
        i, 0, 128, ForKind::Serial,
        For::make(j, 0, jExtent, ForKind::Serial, For::make(k, 0, kExtent, ForKind::Serial, store)));
  };
  EXPECT_EQ(print(simplify(nest(4, 64))), R"(for (i, 0, 128) {
  for (j, 0, 4) {
    for (k, 0, 64) {
      out[(((i * 256) + (j * 64)) + k)] = in[((i * 256) + ((j * 64) + k))]
    }
  }
}
)");
  // k reaches 64 · 4 + 64 > 256: the remainder could overflow into i, so the division stays.
  std::string wider = print(simplify(nest(4, 65)));
  EXPECT_NE(wider.find(" / 256)"), std::string::npos) << wider;
  EXPECT_NE(wider.find(" % 256)"), std::string::npos) << wider;
  // A whole expression below the divisor: the division is 0 and the remainder the expression.
  Stmt small = For::make(k, 0, 64, ForKind::Serial, Store::make(out, k, Load::make(in, k / 64 + k % 64)));
  EXPECT_EQ(print(simplify(small)), "for (k, 0, 64) {\n  out[k] = in[k]\n}\n");
  // Without loops (or with a negative range) nothing is known.
  EXPECT_EQ(print(simplify(flat / 256)), "((((i * 256) + (j * 64)) + k) / 256)");
  Stmt negative = For::make(k, -4, 8, ForKind::Serial, Store::make(out, k + 4, Load::make(in, k % 64 + 4)));
  EXPECT_NE(print(simplify(negative)).find("% 64"), std::string::npos);
  Stmt shifted = For::make(k, -4, 8, ForKind::Serial, Store::make(out, k + 4, Load::make(in, (k + 4) % 64)));
  EXPECT_EQ(print(simplify(shifted)).find("% 64"), std::string::npos);
  // simplifyWithin takes the ranges of loops around the statement.
  Stmt inner = Store::make(out, k, Load::make(in, (i * 64 + k) / 64));
  Stmt iLoop = For::make(i, 0, 128, ForKind::Serial, inner),
       kLoop = For::make(k, 0, 64, ForKind::Serial, inner);
  EXPECT_EQ(print(simplifyWithin(inner, {iLoop.as<For>(), kLoop.as<For>()})), "out[k] = in[i]\n");
  EXPECT_EQ(print(simplifyWithin(inner, {iLoop.as<For>()})), "out[k] = in[(((i * 64) + k) / 64)]\n");
}

TEST(Tir, MutatorKeepsUnchangedNodes) {
  Buffer a = makeBuffer("a", Type::f32(), {8});
  Expr i = Var::make("i");
  Stmt s = For::make(i, 0, 8, ForKind::Parallel, Store::make(a, i, Load::make(a, i) * 2.0f));
  IRMutator identity;
  EXPECT_TRUE(identity.mutate(s).same(s));
  EXPECT_TRUE(simplify(s).same(s));
  Stmt sub = substitute(s, {{i, Expr(3)}});
  EXPECT_FALSE(sub.same(s));
}

TEST(Tir, PrinterDisambiguatesVarsDeterministically) {
  Buffer a = makeBuffer("a", Type::f32(), {4, 4});
  Expr i1 = Var::make("i"), i2 = Var::make("i");
  Stmt s = For::make(i1, 0, 4, ForKind::Serial,
                     For::make(i2, 0, 4, ForKind::Vectorized, Store::make(a, i1 * 4 + i2, f32(0))));
  EXPECT_EQ(print(s), "for (i, 0, 4) {\n  vectorized (i_1, 0, 4) {\n    a[((i * 4) + i_1)] = 0.0f\n  }\n}\n");
  Expr v = Load::make(a, Ramp::make(Expr(0), Expr(1), 8)) + Broadcast::make(f32(1), 8);
  EXPECT_EQ(v.type(), Type::f32(8));
  EXPECT_EQ(print(v), "(a[ramp(0, 1, 8)] + x8(1.0f))");
}

TEST(Tir, ConstructorsCheckTypes) {
  Expr f = Var::make("f", Type::f32());
  Expr i = Var::make("i");
  EXPECT_THROW(Add::make(f, i), kiln::InternalError);
  Buffer a = makeBuffer("a", Type::f32(), {4});
  EXPECT_THROW(Store::make(a, 0, i), kiln::InternalError);
  EXPECT_THROW(call("nope", {f}), kiln::InternalError);
  EXPECT_THROW(For::make(i, 0, Var::make("n"), ForKind::Unrolled, Evaluate::make(f)), kiln::InternalError);
}
