#pragma once
// The wait-for analysis of a stuck run, shared by the simulator (from its state) and the executor
// (from what its watchdog observed), so both report a hang in the same words.
#include <string>
#include <vector>

#include "ppsim/record/deadlock.hpp"

namespace ppsim::record {

// A stuck rank waits on `peer` because of `op` (for a WAIT: one edge per pending request).
struct WaitEdge {
  int rank;
  int position;
  std::string op;  // the blocked op
  int peer;        // the rank it waits on (-1: none)
  std::string waiting_for;
};

// One cycle per strongly connected component of the rank -> peer graph (iterative Tarjan, then the
// first circuit through the component's smallest rank: what Hawick-James reported first), then the
// rest: edges into finished ranks are unmatched ops, other edges are ranks blocked behind a cycle.
// Linear in ranks + edges and free of recursion.
Deadlock find_deadlock(int ranks, const std::vector<WaitEdge>& edges,
                       const std::vector<bool>& finished);

}  // namespace ppsim::record
