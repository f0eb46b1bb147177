// The host executor under comm.semantics "nccl" (docs/SEMANTICS.md): kernels in stream order,
// groups, buffered sends. Each program is written by hand so that its verdict follows from one
// rule, and every verdict is exact: which ranks hang, in which ops, waiting on what.
#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ppsim/config/config.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/real/executor.hpp"
#include "ppsim/real/settings.hpp"
#include "ppsim/sim/analysis.hpp"

using namespace ppsim;

namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

// The deadlock report in check's words, then each stuck op as rank@position.
std::string verdict(const std::optional<record::Deadlock>& deadlock) {
  if (!deadlock) return "none";
  std::string s = deadlock->describe() + "\nat";
  for (const auto& c : deadlock->cycles)
    for (const auto& b : c) s += fmt::format(" {}@{}", b.rank, b.position);
  for (const auto& b : deadlock->unmatched) s += fmt::format(" {}@{}", b.rank, b.position);
  for (const auto& b : deadlock->blocked) s += fmt::format(" {}@{}", b.rank, b.position);
  return s;
}

// Runs `ops` (a line per rank; `routes` as in the config, if any) under the given comm section,
// with no delays unless a time scale is given. The simulator must predict the same hang, word for
// word, or none.
real::Execution run(const std::string& ops, const std::string& comm, const std::string& routes = "",
                    double time_scale = 0) {
  const auto json = nlohmann::json::parse(fmt::format(
      R"({{"name": "nccl-test", "schedule": {{"kind": "custom", "ops": {}{}}},
          "costs": {{"forward": 1, "backward": 2}}, "comm": {}}})",
      nlohmann::json(ops).dump(), routes.empty() ? "" : ", \"routes\": " + routes, comm));
  const config::Prepared prep = config::prepare(config::parse_config(json, "test.json"));
  real::Settings s;
  s.time_scale = time_scale;
  s.hang_timeout = 0.05;
  real::Execution e = real::execute(prep, {s});
  const record::RunRecord predicted = sim::analyze(prep);
  CHECK(verdict(predicted.deadlock) == verdict(e.record.deadlock));
  return e;
}

std::string nccl(std::int64_t buffer, const std::string& more = "") {
  return fmt::format(R"({{"semantics": "nccl", "boundary_bytes": {}, "nccl_buffer_bytes": {}{}}})",
                     4 * kMiB, buffer, more.empty() ? "" : ", " + more);
}
std::string mpi(std::int64_t eager_limit) {
  return fmt::format(R"({{"boundary_bytes": {}, "eager_limit": {}}})", 4 * kMiB, eager_limit);
}

// "finished", or "hang" and the deadlock report in check's words, then each stuck op of the
// report as rank@position, so that a test pins the ranks and ops of the cycle.
std::string verdict(const real::Execution& e) {
  if (e.outcome == real::Outcome::finished) {
    std::string s = "finished";
    for (const auto& d : e.record.diagnostics)
      s += fmt::format("\n{} at {}@{}", d.kind, d.rank, d.position);
    return s;
  }
  if (e.outcome != real::Outcome::hang || !e.record.deadlock)
    return fmt::format("{}: {}", real::to_string(e.outcome), e.failure);
  return "hang\n" + verdict(e.record.deadlock);
}

// Each rank sends two messages (blocking), then receives the other's two.
const std::string kTwoInARow =
    "0F0,0SEND_F0,0F1,0SEND_F1,0F2,0SEND_F2,0F3,0SEND_F3,0RECV_B0,0B0,0RECV_B1,0B1,0RECV_B2,"
    "0B2,0RECV_B3,0B3\n"
    "1RECV_F0,1F0,1B0,1RECV_F1,1F1,1B1,1SEND_B0,1SEND_B1,1RECV_F2,1F2,1B2,1SEND_B2,1RECV_F3,"
    "1F3,1B3,1SEND_B3\n";

// NCCL #479: each rank sends to the other, then receives from it.
const std::string kExchangeBlocking =
    "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
    "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n";
// The same with asynchronous ops, the receive waited first.
const std::string kExchangeAsync =
    "0F0,0SEND_F0,0F1,0SEND_F1#0,0RECV_B0#1,WAIT(1),WAIT(0),0B0,0RECV_B1,0B1\n"
    "1RECV_F0,1F0,1B0,1SEND_B0#0,1RECV_F1#1,WAIT(1),WAIT(0),1F1,1B1,1SEND_B1\n";
// The same pair of ops as one group on each rank.
const std::string kExchangeGrouped =
    "0F0,0SEND_F0,0F1,GROUP_START,0SEND_F1#0,0RECV_B0#1,GROUP_END,WAIT(1),WAIT(0),0B0,0RECV_B1,"
    "0B1\n"
    "1RECV_F0,1F0,1B0,GROUP_START,1SEND_B0#0,1RECV_F1#1,GROUP_END,WAIT(1),WAIT(0),1F1,1B1,"
    "1SEND_B1\n";

}  // namespace

TEST_CASE("executor_nccl.nccl_479_send_then_receive", "[real][threads][nccl]") {
  // NCCL #479: send then receive on both ranks hangs under nccl without buffer room, runs with
  // room for the message, in a group, or under mpi
  const std::string blocking_cycle =
      "hang\n"
      "cycle: rank 0 blocked in 0SEND_F1 -> rank 1; rank 1 blocked in 1SEND_B0 -> rank 0\n"
      "at 0@3 1@3";
  // Each send runs; its receive is queued behind the peer's own send: nothing can move.
  CHECK(verdict(run(kExchangeBlocking, nccl(0))) == blocking_cycle);
  CHECK(verdict(run(kExchangeBlocking, nccl(4 * kMiB - 1))) == blocking_cycle);
  CHECK(verdict(run(kExchangeBlocking, nccl(4 * kMiB))) == "finished");
  CHECK(verdict(run(kExchangeBlocking, nccl(64 * kMiB))) == "finished");
  // Under mpi the blocking version is the classic rendezvous deadlock (eager sends pass).
  CHECK(verdict(run(kExchangeBlocking, mpi(0))) == blocking_cycle);
  CHECK(verdict(run(kExchangeBlocking, mpi(4 * kMiB))) == "finished");

  // Asynchronous ops do not help under nccl: the receive's kernel waits behind the send's. The
  // edge goes to the peer of the kernel in the way, and says so.
  CHECK(verdict(run(kExchangeAsync, nccl(0))) ==
        "hang\n"
        "cycle: rank 0 blocked in WAIT(1) on 0RECV_B0#1 (queued behind kernel 0SEND_F1#0 on rank "
        "0's p2p stream) -> rank 1; rank 1 blocked in WAIT(1) on 1RECV_F1#1 (queued behind kernel "
        "1SEND_B0#0 on rank 1's p2p stream) -> rank 0\n"
        "at 0@5 1@5");
  // A stream per peer changes nothing: both ops are between the same two ranks.
  CHECK(verdict(run(kExchangeAsync, nccl(0, R"("nccl_streams": "peer")"))) ==
        "hang\n"
        "cycle: rank 0 blocked in WAIT(1) on 0RECV_B0#1 (queued behind kernel 0SEND_F1#0 on rank "
        "0's p2p stream to rank 1) -> rank 1; rank 1 blocked in WAIT(1) on 1RECV_F1#1 (queued "
        "behind kernel 1SEND_B0#0 on rank 1's p2p stream to rank 0) -> rank 0\n"
        "at 0@5 1@5");
  CHECK(verdict(run(kExchangeAsync, nccl(4 * kMiB))) == "finished");
  // Under mpi every posted request progresses on its own.
  CHECK(verdict(run(kExchangeAsync, mpi(0))) == "finished");

  // One group: one kernel per rank, both ops run at once and meet their peers'.
  CHECK(verdict(run(kExchangeGrouped, nccl(0))) == "finished");
  CHECK(verdict(run(kExchangeGrouped, nccl(0, R"("nccl_streams": "peer")"))) == "finished");
  CHECK(verdict(run(kExchangeGrouped, mpi(0))) == "finished");
}

TEST_CASE("executor_nccl.receive_posted_early_holds_back", "[real][threads][nccl]") {
  // Head-of-line blocking: a receive posted early holds back a later send on the rank's one
  // stream, not on a stream per peer when the peers differ
  // Microbatch 0 runs stages 1, 2, 0 and microbatch 1 stages 0, 1 (a stage per rank): rank 1
  // posts the receive of F1 (from rank 0) before it sends F0 (to rank 2), and rank 0 sends F1
  // only after F0 has come round through rank 2.
  const std::string routes =
      R"([{"stages": [1, 2, 0], "microbatches": [0]}, {"stages": [0, 1], "microbatches": [1]}])";
  const std::string ops =
      "0RECV_F0,0F0,0B0,0SEND_B0,0F1,0SEND_F1,0RECV_B1,0B1\n"
      "1RECV_F1#0,1F0,1SEND_F0,WAIT(0),1F1,1B1,1SEND_B1,1RECV_B0,1B0\n"
      "2RECV_F0,2F0,2SEND_F0,2RECV_B0,2B0,2SEND_B0\n";
  // The edge from rank 1 goes to the peer of the kernel in the way (rank 0), not to rank 2.
  const std::string hol =
      "hang\n"
      "cycle: rank 0 blocked in 0RECV_F0 -> rank 2; rank 2 blocked in 2RECV_F0 -> rank 1; rank 1 "
      "blocked in 1SEND_F0 on 1SEND_F0 (queued behind kernel 1RECV_F1#0 on rank 1's p2p stream) "
      "-> rank 0\n"
      "at 0@0 2@0 1@2";
  CHECK(verdict(run(ops, nccl(0), routes)) == hol);
  // Buffer room does not help: the send is queued, not running.
  CHECK(verdict(run(ops, nccl(64 * kMiB), routes)) == hol);
  CHECK(verdict(run(ops, nccl(0, R"("nccl_streams": "peer")"), routes)) == "finished");
  CHECK(verdict(run(ops, mpi(0), routes)) == "finished");

  // The same early receive in front of a send to the same peer blocks it on either kind of
  // stream: rank 1 posts the receive of B0 before it sends F0, both with rank 2.
  const std::string same_peer =
      "0F0,0SEND_F0,0RECV_B0,0B0\n"
      "1RECV_F0,1F0,1RECV_B0#0,1SEND_F0,WAIT(0),1B0,1SEND_B0\n"
      "2RECV_F0,2F0,2B0,2SEND_B0\n";
  CHECK(verdict(run(same_peer, nccl(0, R"("nccl_streams": "peer")"))) ==
        "hang\n"
        "cycle: rank 1 blocked in 1SEND_F0 on 1SEND_F0 (queued behind kernel 1RECV_B0#0 on rank "
        "1's p2p stream to rank 2) -> rank 2; rank 2 blocked in 2RECV_F0 -> rank 1\n"
        "waiting: rank 0 blocked in 0RECV_B0 -> rank 1\n"
        "at 1@3 2@0 0@2");
  CHECK(verdict(run(same_peer, mpi(0))) == "finished");
}

TEST_CASE("executor_nccl.wait_done_op_whose_group", "[real][threads][nccl]") {
  // A WAIT on a done op whose group partner is not waits on the partner's peer: the edge names
  // both
  // Rank 0's send completes (rank 1 receives it), but the receive launched in the same kernel
  // needs rank 1's backward send, which comes after rank 1 receives 0SEND_F1, which comes after
  // rank 0's WAIT(0). Without the partner's edge rank 0 would be in no cycle.
  const std::string ops =
      "0F0,GROUP_START,0SEND_F0#0,0RECV_B0#1,GROUP_END,WAIT(0),0F1,0SEND_F1#2,WAIT(2),WAIT(1),0B0,"
      "0RECV_B1#3,WAIT(3),0B1\n"
      "1RECV_F0#0,WAIT(0),1F0,1RECV_F1#1,WAIT(1),1F1,1B0,1SEND_B0#2,WAIT(2),1B1,1SEND_B1#3,"
      "WAIT(3)\n";
  CHECK(verdict(run(ops, nccl(0))) ==
        "hang\n"
        "cycle: rank 0 blocked in WAIT(0) on 0SEND_F0#0 (done; its kernel waits on 0RECV_B0#1) "
        "-> rank 1; rank 1 blocked in WAIT(1) on 1RECV_F1#1 -> rank 0\n"
        "at 0@5 1@4");
  // Per-peer streams: the same kernel. Waiting both requests: the partner's own edge only.
  CHECK(verdict(run(ops, nccl(0, R"("nccl_streams": "peer")"))) == verdict(run(ops, nccl(0))));
  const std::string both =
      "0F0,GROUP_START,0SEND_F0#0,0RECV_B0#1,GROUP_END,WAIT(0;1),0F1,0SEND_F1#2,WAIT(2),0B0,"
      "0RECV_B1#3,WAIT(3),0B1\n" +
      ops.substr(ops.find('\n') + 1);
  CHECK(verdict(run(both, nccl(0))) ==
        "hang\n"
        "cycle: rank 0 blocked in WAIT(0;1) on 0RECV_B0#1 -> rank 1; rank 1 blocked in WAIT(1) "
        "on 1RECV_F1#1 -> rank 0\n"
        "at 0@5 1@4");
  // Under mpi the send's request is all WAIT(0) needs.
  CHECK(verdict(run(ops, mpi(0))) == "finished");
}

TEST_CASE("executor_nccl.nccl_max_group_ops_cuts", "[real][threads][nccl]") {
  // nccl_max_group_ops cuts a group into kernels, and the cut can make an exchange hang
  // Cut after one op, each rank's group is its send's kernel, then its receive's: NCCL #479.
  const std::string cut =
      "hang\n"
      "cycle: rank 0 blocked in WAIT(1) on 0RECV_B0#1 (queued behind kernel 0SEND_F1#0 on rank "
      "0's p2p stream) -> rank 1; rank 1 blocked in WAIT(1) on 1RECV_F1#1 (queued behind kernel "
      "1SEND_B0#0 on rank 1's p2p stream) -> rank 0\n"
      "at 0@7 1@7";
  CHECK(verdict(run(kExchangeGrouped, nccl(0, R"("nccl_max_group_ops": 1)"))) == cut);
  CHECK(verdict(run(kExchangeGrouped, nccl(0, R"("nccl_max_group_ops": 2)"))) == "finished");
  CHECK(verdict(run(kExchangeGrouped, nccl(0, R"("nccl_max_group_ops": 0)"))) == "finished");
  // Room for the message saves the cut exchange (the sends complete into the buffer).
  CHECK(verdict(run(kExchangeGrouped, nccl(4 * kMiB, R"("nccl_max_group_ops": 1)"))) == "finished");
  // Where the cut falls matters: receive first on one rank, and the pieces meet in order.
  const std::string recv_first =
      "0F0,0SEND_F0,0F1,GROUP_START,0RECV_B0#1,0SEND_F1#0,GROUP_END,WAIT(1),WAIT(0),0B0,0RECV_B1,"
      "0B1\n"
      "1RECV_F0,1F0,1B0,GROUP_START,1SEND_B0#0,1RECV_F1#1,GROUP_END,WAIT(1),WAIT(0),1F1,1B1,"
      "1SEND_B1\n";
  CHECK(verdict(run(recv_first, nccl(0, R"("nccl_max_group_ops": 1)"))) == "finished");

  // A group of four cut into pieces: of two, each rank's first kernel is its two sends, whose
  // receives are in the peer's second one; of three, the second send's receive is.
  const std::string four =
      "0F0,0F1,0F2,0F3,0SEND_F0,0SEND_F1,GROUP_START,0SEND_F2#0,0SEND_F3#1,0RECV_B0#2,0RECV_B1#3,"
      "GROUP_END,WAIT(0;1;2;3),0B0,0B1,0RECV_B2,0B2,0RECV_B3,0B3\n"
      "1RECV_F0,1F0,1RECV_F1,1F1,1B0,1B1,GROUP_START,1SEND_B0#0,1SEND_B1#1,1RECV_F2#2,1RECV_F3#3,"
      "GROUP_END,WAIT(0;1;2;3),1F2,1B2,1SEND_B2,1F3,1B3,1SEND_B3\n";
  CHECK(verdict(run(four, nccl(0, R"("nccl_max_group_ops": 2)"))) ==
        "hang\n"
        "cycle: rank 0 blocked in WAIT(0;1;2;3) on 0SEND_F2#0 -> rank 1; rank 1 blocked in "
        "WAIT(0;1;2;3) on 1SEND_B0#0 -> rank 0\n"
        "at 0@12 1@12");
  // Ops already complete are not what the rank waits on: the edge names the send still stuck.
  const std::string three =
      "hang\n"
      "cycle: rank 0 blocked in WAIT(0;1;2;3) on 0SEND_F3#1 -> rank 1; rank 1 blocked in "
      "WAIT(0;1;2;3) on 1SEND_B1#1 -> rank 0\n"
      "at 0@12 1@12";
  CHECK(verdict(run(four, nccl(0, R"("nccl_max_group_ops": 3)"))) == three);
  CHECK(verdict(run(four, nccl(4 * kMiB - 1, R"("nccl_max_group_ops": 3)"))) == three);
  CHECK(verdict(run(four, nccl(4 * kMiB, R"("nccl_max_group_ops": 3)"))) == "finished");
  CHECK(verdict(run(four, nccl(0, R"("nccl_max_group_ops": 4)"))) == "finished");
  CHECK(verdict(run(four, nccl(0, R"("nccl_streams": "peer", "nccl_max_group_ops": 2)"))) ==
        "hang\n"
        "cycle: rank 0 blocked in WAIT(0;1;2;3) on 0SEND_F2#0 -> rank 1; rank 1 blocked in "
        "WAIT(0;1;2;3) on 1SEND_B0#0 -> rank 0\n"
        "at 0@12 1@12");
  CHECK(verdict(run(four, mpi(0))) == "finished");
}

TEST_CASE("executor_nccl.pair_s_buffer_holds_two", "[real][threads][nccl]") {
  // The pair's buffer holds two messages sent in a row to a peer that receives late only when
  // twice the message size fits
  const std::string& ops = kTwoInARow;
  // No room: stuck in the first send of the pair.
  CHECK(verdict(run(ops, nccl(0))) ==
        "hang\n"
        "cycle: rank 0 blocked in 0SEND_F2 -> rank 1; rank 1 blocked in 1SEND_B0 -> rank 0\n"
        "at 0@5 1@6");
  // Room for one: the first goes into the buffer, the second waits for room.
  const std::string second =
      "hang\n"
      "cycle: rank 0 blocked in 0SEND_F3 -> rank 1; rank 1 blocked in 1SEND_B1 -> rank 0\n"
      "at 0@7 1@7";
  CHECK(verdict(run(ops, nccl(4 * kMiB))) == second);
  CHECK(verdict(run(ops, nccl(8 * kMiB - 1))) == second);
  CHECK(verdict(run(ops, nccl(8 * kMiB))) == "finished");
  CHECK(verdict(run(ops, nccl(8 * kMiB, R"("nccl_streams": "peer")"))) == "finished");
  // A bigger message needs a bigger buffer: the same program hangs with 8 MiB messages.
  CHECK(verdict(run(ops, R"({"semantics": "nccl", "boundary_bytes": 8388608,
                             "nccl_buffer_bytes": 8388608})")) ==
        "hang\n"
        "cycle: rank 0 blocked in 0SEND_F3 -> rank 1; rank 1 blocked in 1SEND_B1 -> rank 0\n"
        "at 0@7 1@7");
}

TEST_CASE("executor_nccl.thousands_kernels_complete_after_other", "[real][threads][nccl]") {
  // Thousands of kernels that complete one after the other at one instant: the transport keeps no
  // recursion
  // Each rank's group is cut into one kernel per op: whichever GROUP_END comes second starts a
  // chain in which every completed pair of kernels lets the next pair run, with no delays.
  constexpr int n = 5000;
  std::string r0, r1, ids, sends, recvs;
  for (int m = 0; m < n; ++m) {
    r0 += fmt::format("0F{},", m);
    sends += fmt::format("0SEND_F{}#{},", m, m);
    recvs += fmt::format("1RECV_F{}#{},", m, m);
    ids += fmt::format("{}{}", m ? ";" : "", m);
  }
  r0 += "GROUP_START," + sends + "GROUP_END,WAIT(" + ids + ")";
  r1 += "GROUP_START," + recvs + "GROUP_END,WAIT(" + ids + ")";
  for (int m = 0; m < n; ++m) {
    r0 += fmt::format(",0RECV_B{},0B{}", m, m);
    r1 += fmt::format(",1F{},1B{},1SEND_B{}", m, m, m);
  }
  const std::string comm =
      R"({"semantics": "nccl", "boundary_bytes": 64, "nccl_max_group_ops": 1})";
  CHECK(verdict(run(r0 + "\n" + r1 + "\n", comm)) == "finished");
}

TEST_CASE("executor_nccl.clock_running_transfers_network_thread", "[real][threads][nccl]") {
  // With the clock running (transfers on the network thread) the verdicts are the same, and a
  // buffered transfer meets its receive
  // 5 ms of wall clock per time unit (a transfer takes 1 unit): the network thread ends transfers;
  // verdicts and matches are checked, never a duration or an order of wall-clock events.
  const double scale = 5e-3;
  const auto timed = [](std::int64_t buffer, const std::string& more = "") {
    return nccl(buffer, R"("latency": 1)" + (more.empty() ? "" : ", " + more));
  };
  CHECK(verdict(run(kExchangeAsync, timed(0), "", scale)) ==
        "hang\n"
        "cycle: rank 0 blocked in WAIT(1) on 0RECV_B0#1 (queued behind kernel 0SEND_F1#0 on rank "
        "0's p2p stream) -> rank 1; rank 1 blocked in WAIT(1) on 1RECV_F1#1 (queued behind kernel "
        "1SEND_B0#0 on rank 1's p2p stream) -> rank 0\n"
        "at 0@5 1@5");
  CHECK(verdict(run(kExchangeGrouped, timed(0), "", scale)) == "finished");
  CHECK(verdict(run(kTwoInARow, timed(4 * kMiB), "", scale)) ==
        "hang\n"
        "cycle: rank 0 blocked in 0SEND_F3 -> rank 1; rank 1 blocked in 1SEND_B1 -> rank 0\n"
        "at 0@7 1@7");
  const real::Execution e = run(kExchangeAsync, timed(4 * kMiB), "", scale);
  REQUIRE(verdict(e) == "finished");
  // 0SEND_F1 went into the buffer and met 1RECV_F1 (op 4) there. When it arrived against when the
  // receive was posted is wall-clock order, which a loaded machine can reverse: not checked.
  const record::Trace& trace = *e.record.trace;
  const record::TransferEvent* f1 = nullptr;
  for (const auto& t : trace.transfers)
    if (t.src_rank == 0 && t.src_pos == 3) f1 = &t;
  REQUIRE(f1 != nullptr);
  CHECK(f1->dst_rank == 1);
  CHECK(f1->dst_pos == 4);
  CHECK(f1->end - f1->start >= 0.99);  // at least the modelled latency
}
