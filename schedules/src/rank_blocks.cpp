#include "ppsim/schedules/rank_blocks.hpp"

namespace ppsim::schedules {

std::vector<int> rank_blocks(const Program& program, unsigned threads) {
  std::vector<std::size_t> weights(static_cast<std::size_t>(program.ranks()));
  std::size_t total = 0;
  for (int r = 0; r < program.ranks(); ++r)
    total += weights[static_cast<std::size_t>(r)] = program.ops(r).size();
  return base::rank_blocks(weights, base::blocks_for(total, threads));
}

}  // namespace ppsim::schedules
