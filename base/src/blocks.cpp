#include "ppsim/base/blocks.hpp"

namespace ppsim::base {

std::vector<int> rank_blocks(const std::vector<std::size_t>& weights, unsigned blocks) {
  const auto ranks = static_cast<int>(weights.size());
  const int k = std::max(1, std::min(static_cast<int>(blocks), ranks));
  std::size_t total = 0;
  for (const std::size_t w : weights) total += w;
  std::vector<int> bounds{0};
  std::size_t done = 0;  // weight of the ranks before `end`
  int end = 0;
  for (int b = 1; b < k; ++b) {
    // Block b-1 takes at least one rank, then ranks until it reaches its share of the total,
    // leaving one rank for each later block.
    const long double goal = static_cast<long double>(total) * b / k;
    const int last_end = ranks - (k - b);
    done += weights[static_cast<std::size_t>(end++)];
    while (end < last_end && static_cast<long double>(done) < goal)
      done += weights[static_cast<std::size_t>(end++)];
    bounds.push_back(end);
  }
  bounds.push_back(ranks);
  return bounds;
}

}  // namespace ppsim::base
