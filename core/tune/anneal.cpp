// Simulated annealing over scored points; see anneal.h.
#include "core/tune/anneal.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace kiln::core::tune {

std::vector<int64_t> anneal(const std::vector<float>& scores,
                            const std::function<const std::vector<int64_t>&(int64_t)>& neighbors,
                            const std::function<bool(int64_t)>& skip, const std::vector<int64_t>& starts,
                            int count, std::mt19937_64& rng, const AnnealOptions& options) {
  if (scores.empty() || count <= 0) return {};
  // Temperature in units of the score spread, cooling linearly to zero.
  float lo = *std::min_element(scores.begin(), scores.end()), hi = *std::max_element(scores.begin(), scores.end());
  double spread = std::max(1e-6, static_cast<double>(hi - lo));
  std::vector<int64_t> chains;
  for (size_t i = 0; i < starts.size() && static_cast<int>(chains.size()) < options.chains / 2; ++i)
    chains.push_back(starts[i]);
  std::uniform_int_distribution<int64_t> any(0, static_cast<int64_t>(scores.size()) - 1);
  while (static_cast<int>(chains.size()) < options.chains) chains.push_back(any(rng));

  std::map<int64_t, float> found;  // points met that are not skipped, with their scores
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int step = 0; step < options.steps; ++step) {
    double temperature = 0.5 * spread * (1.0 - static_cast<double>(step) / options.steps);
    for (int64_t& at : chains) {
      if (!skip(at)) found.emplace(at, scores[static_cast<size_t>(at)]);
      const std::vector<int64_t>& around = neighbors(at);
      if (around.empty()) continue;
      int64_t to = around[std::uniform_int_distribution<size_t>(0, around.size() - 1)(rng)];
      double gain = scores[static_cast<size_t>(to)] - scores[static_cast<size_t>(at)];
      if (gain >= 0 || (temperature > 0 && unit(rng) < std::exp(gain / temperature))) at = to;
    }
  }
  for (int64_t at : chains)
    if (!skip(at)) found.emplace(at, scores[static_cast<size_t>(at)]);
  std::vector<std::pair<float, int64_t>> ranked;
  for (const auto& [index, score] : found) ranked.emplace_back(score, index);
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<int64_t> out;
  for (size_t i = 0; i < ranked.size() && static_cast<int>(out.size()) < count; ++i) out.push_back(ranked[i].second);
  return out;
}

}  // namespace kiln::core::tune
