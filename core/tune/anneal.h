// Simulated annealing over a scored discrete space: how the model-guided tuner (tuner.h) searches
// its cost model's predictions when a space is too large to rank whole.
//
// Chains start from the given points (the best measured ones) and then from random points. Each
// step moves every chain to a random neighbour: always when the neighbour scores at least as
// high, otherwise with probability exp(gain / temperature). The temperature starts at half the
// spread of the scores and cools linearly to zero, so the chains explore first and climb at the
// end. The result is the best-scored points the chains met, not only where they stopped.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace kiln::core::tune {

struct AnnealOptions {
  int chains = 48;  // chains walking in parallel
  int steps = 80;   // moves per chain
};

/// The `count` highest-scored points that `options.chains` annealing chains over `scores`
/// (one per point, higher is better) met, best first (equal scores: lower index first), leaving
/// out points `skip` is true for. Chains start at `starts` (at most half of them), the rest at
/// random points; `neighbors(i)` lists the points one move from `i`. Deterministic for a given
/// `rng` state.
std::vector<int64_t> anneal(const std::vector<float>& scores,
                            const std::function<const std::vector<int64_t>&(int64_t)>& neighbors,
                            const std::function<bool(int64_t)>& skip, const std::vector<int64_t>& starts,
                            int count, std::mt19937_64& rng, const AnnealOptions& options = {});

}  // namespace kiln::core::tune
