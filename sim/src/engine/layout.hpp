#pragma once
// Where each rank's state starts (internal to sim/): its ops, read in place from the Program (a
// copy, kept once for its locality, cost a quarter of the run's memory and more time in page
// faults than it saved in TLB misses), the first of its endpoint ids, and its slice of the one
// request table.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ppsim/schedules/program.hpp"
#include "state.hpp"

namespace ppsim::sim::engine {

// Fills ranks[r].ops, n_ops, ep_base, dense_limit and request_ep (a slice of `request_table`,
// which it sizes) for every rank; returns the program's comm ops (the endpoints nccl needs).
// Throws SimulationError past 2^31 - 1 comm ops.
std::size_t lay_out_ranks(const schedules::Program& p, std::vector<RankState>& ranks,
                          std::vector<std::int32_t>& request_table);

}  // namespace ppsim::sim::engine
