#pragma once
// The compute-level timing of per-rank orders: each rank runs its ops in order, an op starts when
// its rank is free and its input is there (the producer's end, plus one hop when the producer is
// on another rank). This is the async lowering's behaviour with receives posted early; candidates
// are ranked by it and the winners verified in the simulator.
#include <cstdint>
#include <vector>

#include "ppsim/search/instance.hpp"

namespace ppsim::search {

struct Timing {
  bool complete = false;  // false: some rank waits forever (the orders deadlock)
  double makespan = 0;
  std::vector<std::int64_t> peak;  // per rank: static + stashes at their largest
  std::int64_t max_peak() const;
  bool fits(std::int64_t limit) const { return limit <= 0 || max_peak() <= limit; }
};

Timing evaluate(const Instance& in, const Orders& orders);

}  // namespace ppsim::search
