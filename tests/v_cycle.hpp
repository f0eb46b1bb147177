#pragma once
// The deadlock both V-placed schedules (zbv, dualpipev) hit when forward sends rendezvous.
#include <catch2/catch.hpp>
#include <string>

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

}  // namespace ppsim::test
