// Loop-nest features (core/tir/loop_features.h) of a hand-written matmul nest, whose every entry
// can be worked out on paper, and how a schedule step moves them.
#include <gtest/gtest.h>

#include <cmath>

#include "core/tir/loop_features.h"
#include "core/tir/schedule.h"

namespace kiln::core::tir {
namespace {

float lg(double v) { return static_cast<float>(std::log2(1.0 + v)); }

float feature(const std::vector<float>& row, const std::string& name) {
  const auto& names = loopFeatureNames();
  auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) ADD_FAILURE() << "no feature " << name;
  return it == names.end() ? 0.0f : row.at(static_cast<size_t>(it - names.begin()));
}

/// C[i, j] = Σₖ A[i, k] · B[k, j] for 4×16 · 16×8:
///   i (parallel) { j0 { C[i, j0] = 0 }  k { j (`inner`) { C[i, j] += A[i, k] · B[k, j] } } }
PrimFunc matmul(ForKind inner = ForKind::Serial) {
  Buffer a = makeBuffer("a", Type::f32(), {4, 16}), b = makeBuffer("b", Type::f32(), {16, 8}),
         c = makeBuffer("c", Type::f32(), {4, 8});
  Expr i = Var::make("i"), j0 = Var::make("j0"), k = Var::make("k"), j = Var::make("j");
  Stmt update = Store::make(c, i * 8 + j, Load::make(c, i * 8 + j) + Load::make(a, i * 16 + k) * Load::make(b, k * 8 + j));
  Stmt body = For::make(i, 0, 4, ForKind::Parallel,
                        Seq::make({For::make(j0, 0, 8, ForKind::Serial, Store::make(c, i * 8 + j0, f32(0.0))),
                                   For::make(k, 0, 16, ForKind::Serial, For::make(j, 0, 8, inner, update))}));
  PrimFunc f;
  f.name = "matmul";
  f.params = {a, b, c};
  f.body = body;
  return f;
}

// Every entry of the row, worked out by hand for the nest above.
TEST(LoopFeatures, AMatmulNestReadsAsWorkedOutByHand) {
  std::vector<float> row = loopFeatures(matmul(), 2);
  ASSERT_EQ(row.size(), loopFeatureNames().size());
  EXPECT_FLOAT_EQ(feature(row, "float_ops"), lg(2 * 4 * 8 * 16));  // a multiply and an add per update
  EXPECT_FLOAT_EQ(feature(row, "param_load_bytes"), lg(3 * 4 * 4 * 8 * 16));
  EXPECT_FLOAT_EQ(feature(row, "param_store_bytes"), lg(4 * (4 * 8 + 4 * 8 * 16)));
  EXPECT_FLOAT_EQ(feature(row, "local_bytes"), 0.0f);
  EXPECT_FLOAT_EQ(feature(row, "vector_op_share"), 0.0f);
  // a[i, k] does not move with j: one load in three stays in a register.
  EXPECT_FLOAT_EQ(feature(row, "invariant_load_share"), 1.0f / 3.0f);
  EXPECT_FLOAT_EQ(feature(row, "parallel_iterations"), lg(4));
  EXPECT_FLOAT_EQ(feature(row, "parallel_balance"), 1.0f);  // 4 iterations over 2 threads
  EXPECT_FLOAT_EQ(feature(row, "parallel_op_share"), 1.0f);
  EXPECT_FLOAT_EQ(feature(row, "max_depth"), 3.0f);
  EXPECT_FLOAT_EQ(feature(row, "stores"), lg(2));
  EXPECT_FLOAT_EQ(feature(row, "heaviest_op_share"), 1.0f);
  EXPECT_FLOAT_EQ(feature(row, "inner_body_ops"), lg(2));
  EXPECT_FLOAT_EQ(feature(row, "inner_ops_per_param_load"), 2.0f / 3.0f);

  // Three threads: 4 iterations take two rounds of 3, a third of the slots idle.
  EXPECT_FLOAT_EQ(feature(loopFeatures(matmul(), 3), "parallel_balance"), 4.0f / 6.0f);
}

// Schedule steps show in the row: vectorizing j makes every operation a vector one; unrolling k
// by 4 multiplies the emitted stores; neither changes the arithmetic.
TEST(LoopFeatures, ScheduleStepsMoveTheirFeatures) {
  std::vector<float> plain = loopFeatures(matmul(), 2);
  Schedule vectorized(matmul());
  vectorized.vectorize("j");
  std::vector<float> v = loopFeatures(vectorized.func(), 2);
  EXPECT_FLOAT_EQ(feature(v, "float_ops"), feature(plain, "float_ops"));
  EXPECT_FLOAT_EQ(feature(v, "vector_op_share"), 1.0f);
  EXPECT_GT(feature(v, "mean_op_lanes"), 1.0f);

  Schedule unrolled(matmul());
  auto [outer, inner] = unrolled.split("k", 4);
  unrolled.unroll(inner);
  std::vector<float> u = loopFeatures(unrolled.func(), 2);
  EXPECT_FLOAT_EQ(feature(u, "float_ops"), feature(plain, "float_ops"));
  EXPECT_FLOAT_EQ(feature(u, "unrolled_iterations"), lg(4));
  EXPECT_FLOAT_EQ(feature(u, "emitted_stores"), lg(1 + 4));
  EXPECT_FLOAT_EQ(feature(u, "max_depth"), 4.0f);  // i, k's outer part, k's inner part, j
}

}  // namespace
}  // namespace kiln::core::tir
