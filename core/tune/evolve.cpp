// Evolutionary search over scored points; see evolve.h.
#include "core/tune/evolve.h"

#include <algorithm>
#include <map>
#include <set>

namespace kiln::core::tune {

std::vector<int64_t> evolve(const EvolveSpace& space, const std::vector<int64_t>& starts, int count,
                            std::mt19937_64& rng, const EvolveOptions& options) {
  if (count <= 0 || options.population <= 0) return {};
  std::map<int64_t, float> scored;
  // Scores the points not scored yet, in one batch.
  auto scoreAll = [&](const std::vector<int64_t>& points) {
    std::vector<int64_t> fresh;
    std::set<int64_t> seen;
    for (int64_t p : points)
      if (!scored.count(p) && seen.insert(p).second) fresh.push_back(p);
    if (fresh.empty()) return;
    std::vector<float> s = space.score(fresh);
    for (size_t i = 0; i < fresh.size(); ++i) scored[fresh[i]] = i < s.size() ? s[i] : 0.0f;
  };
  auto better = [&](int64_t a, int64_t b) {
    float sa = scored.at(a), sb = scored.at(b);
    return sa != sb ? sa > sb : a < b;
  };

  std::vector<int64_t> population;
  std::set<int64_t> members;
  for (int64_t p : starts) {
    if (static_cast<int>(population.size()) >= options.population / 2) break;
    if (members.insert(p).second) population.push_back(p);
  }
  for (int tries = 0; static_cast<int>(population.size()) < options.population && tries < 4 * options.population;
       ++tries) {
    int64_t p = space.random(rng);
    if (members.insert(p).second) population.push_back(p);
  }
  if (population.empty()) return {};
  scoreAll(population);

  std::uniform_real_distribution<double> unit(0.0, 1.0);
  auto pick = [&]() {
    std::uniform_int_distribution<size_t> any(0, population.size() - 1);
    int64_t a = population[any(rng)], b = population[any(rng)];
    return better(a, b) ? a : b;
  };
  for (int generation = 0; generation < options.generations; ++generation) {
    std::vector<int64_t> children;
    for (size_t i = 0; i < population.size(); ++i) {
      int64_t parent = pick();
      std::optional<int64_t> child;
      if (unit(rng) >= options.mutation && space.crossover) child = space.crossover(parent, pick(), rng);
      if (!child) {
        const std::vector<int64_t>& around = space.neighbors(parent);
        if (around.empty()) continue;
        child = around[std::uniform_int_distribution<size_t>(0, around.size() - 1)(rng)];
      }
      children.push_back(*child);
    }
    scoreAll(children);
    for (int64_t c : children)
      if (members.insert(c).second) population.push_back(c);
    std::sort(population.begin(), population.end(), better);
    if (static_cast<int>(population.size()) > options.population) {
      for (size_t i = static_cast<size_t>(options.population); i < population.size(); ++i) members.erase(population[i]);
      population.resize(static_cast<size_t>(options.population));
    }
  }

  std::vector<int64_t> out;
  for (const auto& [point, score] : scored)
    if (!space.skip(point)) out.push_back(point);
  std::sort(out.begin(), out.end(), better);
  if (static_cast<int>(out.size()) > count) out.resize(static_cast<size_t>(count));
  return out;
}

}  // namespace kiln::core::tune
