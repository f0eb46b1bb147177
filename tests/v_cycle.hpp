#pragma once
// What both V-placed schedules (zbv, dualpipev) share: the deadlock they hit when forward sends
// rendezvous, their communication volume, their runs with memory costs.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "ppsim/record/deadlock.hpp"

namespace ppsim::test {

// What a blocked op sends or receives: the op itself, or for a WAIT the request it waits on
// ("2SEND_F1#1").
inline std::string blocked_on(const record::BlockedOp& b) {
  const std::string& s = b.waiting_for.empty() ? b.op : b.waiting_for;
  return s.substr(0, s.find('#'));
}

// One cycle: rank P-2 sending stage P-2's output of microbatch 1 down to rank P-1, rank P-1 sending
// stage P's output of microbatch 0 back up to rank P-2. Ranks r < P-2 wait behind it: in their
// chunk-0 forward send of microbatch P-1-r to rank r+1 or, when M <= P-1-r left them no such
// send, in the receive of chunk 1's first input (stage 2P-1-r, microbatch 0) from rank r+1.
inline void check_v_forward_cycle(const record::Deadlock& d, int P, int M) {
  REQUIRE(d.cycles.size() == 1);
  const auto& c = d.cycles[0];
  REQUIRE(c.size() == 2);
  CHECK(c[0].rank == P - 2);
  CHECK(c[0].peer == P - 1);
  CHECK(blocked_on(c[0]) == std::to_string(P - 2) + "SEND_F1");
  CHECK(c[1].rank == P - 1);
  CHECK(c[1].peer == P - 2);
  CHECK(blocked_on(c[1]) == std::to_string(P) + "SEND_F0");
  CHECK(d.unmatched.empty());
  REQUIRE(d.blocked.size() == static_cast<std::size_t>(P - 2));
  for (const auto& b : d.blocked) {
    CHECK(b.peer == b.rank + 1);
    if (M > P - 1 - b.rank)
      CHECK(blocked_on(b) == std::to_string(b.rank) + "SEND_F" + std::to_string(P - 1 - b.rank));
    else
      CHECK(blocked_on(b) == std::to_string(2 * P - 1 - b.rank) + "RECV_F0");
  }
}

// The order of a V schedule at P ranks and M microbatches: rank r runs lines[r].
struct VOrder {
  int P, M;
  std::vector<std::string> lines;
};
inline void check_v_orders(const std::string& kind, const std::vector<VOrder>& orders) {
  for (const auto& o : orders) {
    const auto p = schedules::generate(kind, {{"ranks", o.P}, {"microbatches", o.M}});
    REQUIRE(p.ranks() == o.P);
    INFO("P=" << o.P << " M=" << o.M);
    check_rank_lines(p, o.lines);
  }
}

// `kind` at P ranks and M microbatches in every comm style: only async runs it (and every style
// where there is nothing to cross: one rank or one microbatch); the others hit the forward cycle.
inline void check_v_lowerings(const std::string& kind, int P, int M) {
  const auto compute = schedules::generate(kind, {{"ranks", P}, {"microbatches", M}});
  for (const auto& lowering : all_lowerings()) {
    if (!accepts(lowering, compute)) continue;  // megatron models 1F1B only
    const auto prog = schedules::lower(compute, lowering);
    const auto r = run(prog, uniform(2 * P, 1, 2));
    INFO(describe(lowering) << " P=" << P << " M=" << M);
    CHECK(r.errors.empty());
    if (lowering.style == "async" || P == 1 || M == 1) {
      CHECK_FALSE(r.deadlock);
      continue;
    }
    REQUIRE(r.deadlock);
    check_v_forward_cycle(*r.deadlock, P, M);
  }
}

// Stage P-1 and stage P share rank P-1, so of the 2P-1 stage boundaries 2P-2 cross ranks, each
// once forward and once backward per microbatch: comm_bytes = 2 * (2P-2) * M * boundary_bytes.
inline void check_v_comm_bytes(const std::string& kind, int P, int M) {
  auto o = uniform(2 * P, 1, 2);
  o.network.boundary_bytes = 1000;
  const auto r = sim::simulate(lowered(kind, P, M, 2), o);
  INFO("P=" << P << " M=" << M);
  REQUIRE_FALSE(r.deadlock);
  CHECK(r.comm_bytes == 2 * (2 * P - 2) * M * 1000);
}

// `kind` at P ranks and M microbatches, each stage stashing `activation` bytes per microbatch (of
// which W keeps `weight_stash`) and holding `static_bytes`.
inline sim::SimResult simulate_v_memory(const std::string& kind, int P, int M,
                                        std::int64_t activation, std::int64_t weight_stash,
                                        std::int64_t static_bytes) {
  auto o = uniform(2 * P, 1, 2);
  o.memory.activation_bytes = activation;
  o.memory.weight_stash_bytes = weight_stash;
  o.memory.static_bytes = static_bytes;
  return sim::simulate(lowered(kind, P, M, 2), o);
}

}  // namespace ppsim::test
