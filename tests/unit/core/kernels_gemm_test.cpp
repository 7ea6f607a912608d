// dense and matmul (K-vectorized dot-product tiles; column-vectorized matmul tiles): interpreter
// and JIT against plain C++ on shapes that do not divide the tiles (K not a multiple of the
// lanes, N not a multiple of the tile, batched and broadcast matmul, vector operands).
#include <random>

#include "core/lower/schedule.h"
#include "tests/unit/core/kernels_test_util.h"

namespace kiln::core::lower {
namespace {

using namespace testing;

LowerOptions withLanes(int lanes) {
  LowerOptions o;
  o.vectorLanes = lanes;
  o.vectorRegisters = kiln::core::lower::vectorRegistersForLanes(lanes);
  return o;
}

void checkDense(const Shape& xs, int64_t n, bool bias, int lanes, bool interpreter) {
  SCOPED_TRACE("x" + runtime::shapeString(xs) + " n=" + std::to_string(n) + " lanes=" + std::to_string(lanes));
  int64_t k = xs.back(), m = runtime::numElements(xs) / k;
  runtime::Tensor x = randomTensor(xs, 5), w = randomTensor({n, k}, 6), b = randomTensor({n}, 7);
  Graph g;
  std::vector<ValueId> in = {g.addInput("x", TensorType{DType::Float32, xs}), g.addConstant("w", w)};
  if (bias) in.push_back(g.addConstant("b", b));
  g.setOutputs({g.add("dense", in)});
  std::vector<float> expected(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias ? b.data<float>()[j] : 0.0;
      for (int64_t q = 0; q < k; ++q) acc += double(x.data<float>()[i * k + q]) * w.data<float>()[j * k + q];
      expected[static_cast<size_t>(i * n + j)] = static_cast<float>(acc);
    }
  for (Engine e : {Engine::Interpreter, Engine::Jit}) {
    if (e == Engine::Interpreter && !interpreter) continue;
    EXPECT_TRUE(allClose(evalGraph(g, {x}, e, withLanes(lanes))[0], expected)) << (e == Engine::Jit ? "jit" : "interp");
  }
}

TEST(KernelsDense, ClassifierAndOddShapes) {
  checkDense({1, 2048}, 1000, true, 16, false);
  checkDense({1, 37}, 10, true, 8, true);     // K tail only
  checkDense({1, 5}, 3, false, 16, true);     // K shorter than a vector
  checkDense({8, 100}, 33, true, 16, true);   // batch 8: 4-row tiles, N tail
  checkDense({2, 3, 24}, 7, true, 4, true);   // leading axes flattened
  checkDense({6, 64}, 17, false, 8, false);
}

// Numpy matmul reference on explicit shapes.
std::vector<float> referenceMatmul(const runtime::Tensor& a, const runtime::Tensor& b, const Shape& ys) {
  Shape as = a.shape(), bs = b.shape();
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec) as.insert(as.begin(), 1);
  if (bVec) bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  Shape batch = ys;
  if (!bVec) batch.pop_back();
  if (!aVec) batch.pop_back();
  int64_t batches = runtime::numElements(batch);
  auto offsetOf = [&](const Shape& s, int64_t bi) {
    // Batch offset of operand with shape s (matrix dims last) for flat output batch index bi.
    Shape sb(s.begin(), s.end() - 2);
    int64_t off = 0, stride = s[s.size() - 2] * s.back(), rest = bi;
    std::vector<int64_t> idx(batch.size());
    for (size_t d = batch.size(); d-- > 0;) {
      idx[d] = rest % batch[d];
      rest /= batch[d];
    }
    for (size_t d = sb.size(); d-- > 0;) {
      size_t od = batch.size() - sb.size() + d;
      off += (sb[d] == 1 ? 0 : idx[od]) * stride;
      stride *= sb[d];
    }
    return off;
  };
  std::vector<float> y(static_cast<size_t>(batches * m * n));
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t ao = offsetOf(as, bi), bo = offsetOf(bs, bi);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < k; ++q) acc += double(a.data<float>()[ao + i * k + q]) * b.data<float>()[bo + q * n + j];
        y[static_cast<size_t>((bi * m + i) * n + j)] = static_cast<float>(acc);
      }
  }
  return y;
}

void checkMatmul(const Shape& as, const Shape& bs, int lanes, bool interpreter) {
  SCOPED_TRACE("a" + runtime::shapeString(as) + " b" + runtime::shapeString(bs) + " lanes=" + std::to_string(lanes));
  runtime::Tensor a = randomTensor(as, 8), b = randomTensor(bs, 9);
  Graph g;
  ValueId av = g.addInput("a", TensorType{DType::Float32, as}), bv = g.addInput("b", TensorType{DType::Float32, bs});
  ValueId y = g.add("matmul", {av, bv});
  g.setOutputs({y});
  std::vector<float> expected = referenceMatmul(a, b, g.type(y).shape);
  for (Engine e : {Engine::Interpreter, Engine::Jit}) {
    if (e == Engine::Interpreter && !interpreter) continue;
    EXPECT_TRUE(allClose(evalGraph(g, {a, b}, e, withLanes(lanes))[0], expected)) << (e == Engine::Jit ? "jit" : "interp");
  }
}

TEST(KernelsMatmul, BatchedBroadcastAndTails) {
  checkMatmul({4, 7}, {7, 37}, 8, true);          // N = 32 + 4 + 1
  checkMatmul({2, 3, 5, 16}, {16, 19}, 16, true);  // b broadcast over batch
  checkMatmul({2, 1, 6, 9}, {3, 9, 4}, 4, true);   // both broadcast
  checkMatmul({9}, {9, 70}, 16, true);             // vector · matrix
  checkMatmul({5, 33}, {33}, 8, true);             // matrix · vector: dot products
  checkMatmul({64, 128}, {128, 96}, 16, false);
  // Row tails: 4-row tiles and a loop for the last M mod 4 rows (neither 4 nor 3 divides M).
  checkMatmul({2, 1, 11, 9}, {3, 9, 21}, 8, true);  // 2 tiles + 3 rows, batches broadcast
  checkMatmul({13, 20}, {20}, 8, true);             // 3 tiles + 1 row of dot products
  checkMatmul({2, 197, 16}, {2, 16, 197}, 16, false);  // ViT attention scores: 49 tiles + 1 row
}

TEST(KernelsGemm, RandomShapesMatchReference) {
  std::mt19937 rng(9);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int i = 0; i < 12; ++i) {
    int lanes = std::vector<int>{4, 8, 16}[i % 3];
    checkDense({pick(1, 9), pick(1, 70)}, pick(1, 40), i % 2 == 0, lanes, i % 3 == 0);
    int64_t k = pick(1, 20);
    checkMatmul({pick(1, 3), pick(1, 9), k}, {k, pick(1, 40)}, lanes, false);
  }
}

}  // namespace
}  // namespace kiln::core::lower
