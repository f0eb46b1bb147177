#pragma once
// A Program's ranks in blocks of about equal ops, for per-rank work on several threads
// (base/blocks.hpp runs the blocks).
#include <vector>

#include "ppsim/base/blocks.hpp"
#include "ppsim/schedules/program.hpp"

namespace ppsim::schedules {

// The ranks of `program` in base::blocks_for(its ops, threads) blocks, weighed by their ops.
std::vector<int> rank_blocks(const Program& program, unsigned threads);

}  // namespace ppsim::schedules
