// Deadlock verdicts: the classic 1F1B cases, eager sends, unmatched ops, fifo mismatches, hazards,
// and the property that the verdict does not depend on op durations.
#include <catch2/catch.hpp>
#include <random>

#include "helpers.hpp"
#include "ppsim/schedules/validation.hpp"

using namespace ppsim;
using CommStyle = std::string_view;

namespace {
std::string cycle_text(const record::Deadlock& d) {
  std::string s;
  for (const auto& c : d.cycles)
    for (const auto& b : c)
      s += std::to_string(b.rank) + ":" + b.op + "->" + std::to_string(b.peer) + " ";
  return s;
}
// A program in the text form on two stages of uniform cost (F = 1, B = 2), free communication.
sim::SimResult simulate_text(const std::string& text) {
  return sim::simulate(schedules::Program::parse(text), test::uniform(2, 1, 2));
}
// The one op of a deadlocked run that waits on a finished rank, with no cycle: `op` on `rank`,
// waiting on `peer`.
const record::BlockedOp& only_unmatched(const sim::SimResult& r, int rank, const std::string& op,
                                        int peer) {
  REQUIRE(r.deadlock);
  CHECK(r.deadlock->cycles.empty());
  REQUIRE(r.deadlock->unmatched.size() == 1);
  const auto& u = r.deadlock->unmatched[0];
  CHECK(u.rank == rank);
  CHECK(u.op == op);
  CHECK(u.peer == peer);
  return u;
}
bool has_error(const sim::SimResult& r, const std::string& kind) {
  for (const auto& e : r.errors)
    if (e.kind == kind) return true;
  return false;
}
}  // namespace

TEST_CASE("deadlock.1f1b_blocking_sends_deadlocks_ranks", "[deadlock]") {
  // 1F1B with all-blocking sends deadlocks: ranks P-2 and P-1 each block in a send to the other
  for (int P = 2; P <= 8; ++P) {
    for (int M = 2; M <= 12; ++M) {
      auto o = test::uniform(P, 1, 2);
      o.network.boundary_bytes = 1 << 20;
      const auto r = sim::simulate(test::lowered("1f1b", P, M, 1, "blocking"), o);
      INFO("P=" << P << " M=" << M);
      const auto& c = test::two_rank_cycle(r);
      // rank P-2 blocked in SEND_F of microbatch 1 -> rank P-1; rank P-1 in SEND_B of microbatch 0
      // -> P-2
      CHECK(c[0].rank == P - 2);
      CHECK(c[0].op == std::to_string(P - 2) + "SEND_F1");
      CHECK(c[0].peer == P - 1);
      CHECK(c[1].rank == P - 1);
      CHECK(c[1].op == std::to_string(P - 1) + "SEND_B0");
      CHECK(c[1].peer == P - 2);
      CHECK(r.deadlock->unmatched.empty());
      // Ranks before them wait behind the cycle, each in its first forward send that cannot land.
      REQUIRE(r.deadlock->blocked.size() == static_cast<std::size_t>(P - 2));
      for (const auto& b : r.deadlock->blocked) {
        CHECK(b.peer == b.rank + 1);
        if (M > P - b.rank - 1)
          CHECK(b.op == std::to_string(b.rank) + "SEND_F" + std::to_string(P - b.rank - 1));
      }
      CHECK(r.deadlock->describe().find("rank " + std::to_string(P - 2) + " blocked in " +
                                        std::to_string(P - 2) + "SEND_F1 -> rank " +
                                        std::to_string(P - 1)) != std::string::npos);
    }
  }
}

TEST_CASE("deadlock.1f1b_microbatch_cannot_deadlock_even", "[deadlock]") {
  // 1F1B with one microbatch cannot deadlock even with blocking sends
  for (int P = 1; P <= 6; ++P)
    CHECK_FALSE(
        sim::simulate(test::lowered("1f1b", P, 1, 1, "blocking"), test::uniform(P, 1, 2)).deadlock);
}

TEST_CASE("deadlock.async_forward_sends_megatron_s", "[deadlock]") {
  // The fixes run: async forward sends and Megatron's batched pairs
  for (CommStyle style : {"async-send", "batched"}) {
    for (int P = 1; P <= 8; ++P) {
      for (int M = 1; M <= 12; ++M) {
        auto o = test::uniform(P, 1, 2);
        o.network.boundary_bytes = 1 << 20;
        o.network.latency = 0.1;
        o.network.bandwidth = 1 << 22;
        const auto r = sim::simulate(test::lowered("1f1b", P, M, 1, style), o);
        INFO(style << " P=" << P << " M=" << M);
        CHECK_FALSE(r.deadlock);
        CHECK(r.errors.empty());
      }
    }
  }
}

TEST_CASE("deadlock.interleaved_1f1b_blocking_forward_sends", "[deadlock][interleaved]") {
  // Interleaved 1F1B with blocking forward sends deadlocks around the stage ring, async runs
  // Warm-up: every rank sends a forward to the next rank while the next rank sends its own:
  // with blocking (or waited-at-once) sends the P ranks form one cycle through the ring.
  for (CommStyle style : {"blocking", "async-send", "batched"}) {
    for (int P : {3, 4, 6}) {
      const auto r = sim::simulate(test::lowered("interleaved-1f1b", P, 2 * P, 2, style),
                                   test::uniform(2 * P, 1, 2));
      INFO(style << " P=" << P);
      REQUIRE(r.deadlock);
      REQUIRE(r.deadlock->cycles.size() == 1);
      CHECK(r.deadlock->cycles[0].size() == static_cast<std::size_t>(P));
      for (const auto& b : r.deadlock->cycles[0]) CHECK(b.peer == (b.rank + 1) % P);
    }
    CHECK_FALSE(
        sim::simulate(test::lowered("interleaved-1f1b", 4, 8, 2, "async"), test::uniform(8, 1, 2))
            .deadlock);
  }
}

TEST_CASE("deadlock.eager_sends_larger_eager_limit", "[deadlock][eager]") {
  // Eager sends no larger than eager_limit complete locally, so all-blocking 1F1B runs
  auto o = test::uniform(4, 1, 2);
  o.network.boundary_bytes = 4096;
  o.network.eager_limit = 4096;
  const auto prog = test::lowered("1f1b", 4, 8, 1, "blocking");
  const auto r = sim::simulate(prog, o);
  CHECK_FALSE(r.deadlock);
  CHECK(r.makespan == Approx((8 + 3) * 3.0));
  o.network.eager_limit = 4095;  // one byte short: rendezvous again
  CHECK(sim::simulate(prog, o).deadlock);
}

TEST_CASE("deadlock.receive_whose_sender_has_finished", "[deadlock]") {
  // A receive whose sender has finished is reported as unmatched, not as a cycle
  // Rank 1 expects the activation of microbatch 1 too, but rank 0 only sends microbatch 0.
  const auto r = simulate_text(
      "0F0,0SEND_F0,0F1\n"
      "1RECV_F0,1F0,1RECV_F1,1F1\n");
  CHECK(only_unmatched(r, 1, "1RECV_F1", 0).position == 2);
}

TEST_CASE("deadlock.wait_pending_request_names_request", "[deadlock]") {
  // A WAIT on a pending request names the request and its peer
  // Both ranks post async receives and wait on them before sending: a cycle through WAITs.
  const auto r = simulate_text(
      "0F0,0RECV_B0#0,WAIT(0),0SEND_F0,0B0\n"
      "1RECV_F0#0,WAIT(0),1F0,1B0,1SEND_B0\n");
  const auto& c = test::two_rank_cycle(r);
  CHECK(c[0].op == "WAIT(0)");
  CHECK(c[0].waiting_for == "0RECV_B0#0");
  CHECK(c[1].waiting_for == "1RECV_F0#0");
}

TEST_CASE("deadlock.fifo_matching_reports_message_order", "[deadlock][fifo]") {
  // fifo matching reports a message-order mismatch that tag matching tolerates
  // Rank 0 sends microbatch 1 before 0; rank 1 receives 0 first. Async on both sides.
  const auto prog = schedules::Program::parse(
      "0F0,0F1,0SEND_F1#0,0SEND_F0#1,WAIT(0;1),0RECV_B0,0B0,0RECV_B1,0B1\n"
      "1RECV_F0#0,1RECV_F1#1,WAIT(0;1),1F0,1F1,1B0,1SEND_B0,1B1,1SEND_B1\n");
  REQUIRE(schedules::validate(prog).size() == 0);
  auto o = test::uniform(2, 1, 2);
  CHECK_FALSE(has_error(sim::simulate(prog, o), "message_order_mismatch"));
  o.network.matching = model::Matching::fifo;
  const auto r = sim::simulate(prog, o);
  REQUIRE(has_error(r, "message_order_mismatch"));
  CHECK(r.errors[0].rank == 1);
  CHECK(r.errors[0].op == "1RECV_F0#0");
  CHECK(r.errors[0].message.find("0SEND_F1#0") != std::string::npos);
}

TEST_CASE("deadlock.under_fifo_blocking_sends_wrong", "[deadlock][fifo]") {
  // Under fifo, blocking sends in the wrong order deadlock instead
  const auto prog = schedules::Program::parse(
      "0F0,0F1,0SEND_F1,0SEND_F0,0RECV_B0,0B0,0RECV_B1,0B1\n"
      "1RECV_F0,1RECV_F1,1F0,1F1,1B0,1SEND_B0,1B1,1SEND_B1\n");
  auto o = test::uniform(2, 1, 2);
  CHECK(sim::simulate(prog, o)
            .deadlock);  // tag: rank 0 waits for RECV_F1 that rank 1 posts after RECV_F0
  o.network.matching = model::Matching::fifo;
  const auto r = sim::simulate(prog, o);
  CHECK_FALSE(r.deadlock);  // NCCL pairs them by order and silently swaps the tensors
  CHECK(has_error(r, "message_order_mismatch"));
}

TEST_CASE("deadlock.unwaited_async_send_whose_buffer", "[hazard]") {
  // Unwaited async send whose buffer is freed is the Gloo 'Cannot lock pointer to unbound buffer'
  // crash
  const auto prog = schedules::Program::parse(
      "0F0,0SEND_F0#0,0RECV_B0,0B0\n"
      "1RECV_F0,1F0,1B0,1SEND_B0\n");
  const auto r = test::run(prog, test::uniform(2, 1, 2));
  REQUIRE(has_error(r, "buffer_released_before_wait"));
  REQUIRE(has_error(r, "never_waited"));
  for (const auto& e : r.errors) {
    if (e.kind == "buffer_released_before_wait") {
      CHECK(e.rank == 0);
      CHECK(e.op == "0B0");
      CHECK(e.message.find("Cannot lock pointer to unbound buffer") != std::string::npos);
    }
    if (e.kind == "never_waited") CHECK(e.op == "0SEND_F0#0");
  }
}

TEST_CASE("deadlock.reading_receive_buffer_before_wait", "[hazard]") {
  // Reading a receive buffer before its WAIT is an error, not a stall
  const auto prog = schedules::Program::parse(
      "0F0,0SEND_F0,0RECV_B0,0B0\n"
      "1RECV_F0#0,1F0,WAIT(0),1B0,1SEND_B0\n");
  const auto r = test::run(prog, test::uniform(2, 1, 2));
  CHECK_FALSE(r.deadlock);
  REQUIRE(has_error(r, "read_before_wait"));
  CHECK(r.errors[0].op == "1F0");
  CHECK(r.errors[0].rank == 1);
}

TEST_CASE("deadlock.deadlock_verdict_cycle_do_depend", "[deadlock][property]") {
  // Property: the deadlock verdict and its cycle do not depend on op durations
  std::mt19937 rng(20261121);
  std::uniform_real_distribution<double> cost(0.01, 10.0);
  std::uniform_int_distribution<int> coin(0, 1);
  struct Case {
    const char* kind;
    int P, M, V;
    CommStyle style;
  };
  std::vector<Case> cases;
  for (CommStyle s : {"blocking", "async-send", "batched", "async"}) {
    for (int P : {2, 3, 5}) {
      for (int M : {1, 3, 7}) {
        cases.push_back({"1f1b", P, M, 1, s});
        cases.push_back({"gpipe", P, M, 1, s});
      }
    }
    cases.push_back({"interleaved-1f1b", 3, 6, 2, s});
    cases.push_back({"interleaved-1f1b", 4, 8, 3, s});
  }
  for (const auto& c : cases) {
    const auto prog = test::lowered(c.kind, c.P, c.M, c.V, c.style);
    const int S = c.P * c.V;
    // Rendezvous (eager_limit 0) and eager (every 1000-byte send completes locally) semantics,
    // each compared with its own uniform-cost run.
    for (std::int64_t eager_limit : {0, 1000}) {
      auto base_opts = test::uniform(S, 1, 2);
      base_opts.network.boundary_bytes = 1000;
      base_opts.network.eager_limit = eager_limit;
      const auto base = sim::simulate(prog, base_opts);
      const std::string base_cycle = base.deadlock ? cycle_text(*base.deadlock) : "none";
      for (int trial = 0; trial < 20; ++trial) {
        sim::SimOptions o = base_opts;
        for (auto& st : o.costs.stages) {
          st.forward = cost(rng);
          st.backward_input = cost(rng);
          st.backward_weight = cost(rng);
          st.backward = st.backward_input + st.backward_weight;
        }
        o.network.latency = coin(rng) ? cost(rng) : 0.0;
        o.network.bandwidth = coin(rng) ? 1000.0 / cost(rng) : 0.0;
        o.network.matching = coin(rng) ? model::Matching::tag : model::Matching::fifo;
        const auto r = sim::simulate(prog, o);
        INFO(c.kind << " " << c.style << " P=" << c.P << " M=" << c.M
                    << " eager_limit=" << eager_limit << " trial " << trial);
        CHECK(bool(r.deadlock) == bool(base.deadlock));
        CHECK((r.deadlock ? cycle_text(*r.deadlock) : "none") == base_cycle);
        CHECK(r.ops_executed == base.ops_executed);
      }
    }
  }
}

TEST_CASE("deadlock.second_wait_returns_once_also", "[deadlock][requests]") {
  // A request waited twice: the second WAIT returns at once, also after its record was reused
  // Rank 0 waits request 0, posts request 1 (whose record may take request 0's slot), then waits
  // both: request 0 is complete, so the run is the one that waits request 1 alone.
  const std::string rank1 = "1RECV_F0,1F0,1RECV_F1,1F1,1B1,1SEND_B1,1B0,1SEND_B0\n";
  auto program = [&](const std::string& second_wait) {
    return schedules::Program::parse("0F0,0SEND_F0#0,WAIT(0),0F1,0SEND_F1#1," + second_wait +
                                     ",0RECV_B1,0B1,0RECV_B0,0B0\n" + rank1);
  };
  auto o = test::uniform(2, 1, 2);
  o.network.latency = 0.5;
  const auto twice = sim::simulate(program("WAIT(0;1)"), o);
  const auto once = sim::simulate(program("WAIT(1)"), o);
  REQUIRE_FALSE(twice.deadlock);
  REQUIRE_FALSE(once.deadlock);
  CHECK(twice.makespan == once.makespan);
  for (int r = 0; r < 2; ++r) {
    CHECK(twice.per_rank[r].end == once.per_rank[r].end);
    CHECK(twice.per_rank[r].comm_exposed == once.per_rank[r].comm_exposed);
  }
}

TEST_CASE("deadlock.wait_blocked_good_names_only", "[deadlock][requests]") {
  // A WAIT blocked for good names only its pending requests, not one it had waited before
  const auto r = simulate_text(
      "0F0,0SEND_F0#0,WAIT(0),0RECV_B0#1,WAIT(0;1),0B0\n"
      "1RECV_F0,1F0,1B0\n");
  CHECK(only_unmatched(r, 0, "WAIT(0;1)", 1).waiting_for == "0RECV_B0#1");
}
