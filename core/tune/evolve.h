// Evolutionary search over a discrete space scored by the cost model: how the model-guided tuner
// (tuner.h) explores when scoring a point is costly (loop-nest features compile each candidate),
// as Ansor's does.
//
// The population starts from the given points (the best measured ones) and random ones. Each
// generation breeds as many children as there are members: a parent is picked by tournament (the
// better-scored of two at random), and the child is one of its neighbours (mutation) or, with
// probability 1 − mutation, a crossover with a second parent when the space has one. Children are
// scored in one batch; the next population is the best-scored distinct points of parents and
// children. The result is the best-scored points met anywhere, not only the last population, so a
// search of G generations scores at most population × (G + 1) points.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <vector>

namespace kiln::core::tune {

struct EvolveOptions {
  int population = 48;
  int generations = 3;
  double mutation = 0.8;  // share of children made by mutation rather than crossover
};

struct EvolveSpace {
  /// Scores of the points (higher is better), in order; called once per point.
  std::function<std::vector<float>(const std::vector<int64_t>&)> score;
  /// The points one move away.
  std::function<const std::vector<int64_t>&(int64_t)> neighbors;
  /// A point mixing two parents, if the space has one.
  std::function<std::optional<int64_t>(int64_t, int64_t, std::mt19937_64&)> crossover;
  /// A point at random.
  std::function<int64_t(std::mt19937_64&)> random;
  /// Points not to return (measured already); they may still breed.
  std::function<bool(int64_t)> skip;
};

/// The `count` highest-scored points the search met that `space.skip` keeps, best first (equal
/// scores: lower index first). Deterministic for a given `rng` state.
std::vector<int64_t> evolve(const EvolveSpace& space, const std::vector<int64_t>& starts, int count,
                            std::mt19937_64& rng, const EvolveOptions& options = {});

}  // namespace kiln::core::tune
