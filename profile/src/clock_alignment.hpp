#pragma once
// Each rank's clock offset from the pipeline's own causality (internal to profile/): an action's
// input cannot arrive before its producer on another rank ended. For a pair of ranks, forward
// pairs bound the offset from below and backward pairs from above; the middle of the interval is
// the offset (equal one-way delays, as NTP assumes) and half its width the one-way latency.
#include <vector>

namespace ppsim::profile::detail {

struct Dependency {  // op `from` on rank `a` feeds op `to` on rank `b`, times on their clocks
  int a, b;
  double producer_end, consumer_start;
};

struct Alignment {
  std::vector<double> offset;  // per rank, added to its clock
  double latency = 0;          // mean one-way latency over the pairs bounded on both sides
};

// Ranks not linked to rank 0 by any dependency keep offset 0.
Alignment align_clocks(int ranks, const std::vector<Dependency>& deps);

}  // namespace ppsim::profile::detail
