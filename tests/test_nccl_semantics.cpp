// The simulator under comm.semantics "nccl" (docs/SEMANTICS.md): stream order, groups, buffered
// sends, kernel splits, the words of a hang, and two properties over random programs: the model is
// never more permissive than mpi, and its verdict does not depend on op durations.
#include <catch2/catch.hpp>
#include <random>

#include "helpers.hpp"
#include "ppsim/schedules/validation.hpp"

using namespace ppsim;
using schedules::Program;

namespace {

constexpr std::int64_t kMiB4 = 4 << 20;

sim::SimOptions nccl(int stages, std::int64_t buffer = 0, bool per_peer = false,
                     int max_group_ops = 0) {
  auto o = test::uniform(stages, 1, 1);
  o.network.boundary_bytes = kMiB4;
  o.network.semantics = model::P2pSemantics::nccl;
  o.network.matching = model::Matching::fifo;
  o.network.nccl_buffer_bytes = buffer;
  o.network.nccl_streams = per_peer ? model::NcclStreams::peer : model::NcclStreams::communicator;
  o.network.nccl_max_group_ops = max_group_ops;
  return o;
}
sim::SimOptions mpi(int stages) {
  auto o = test::uniform(stages, 1, 1);
  o.network.boundary_bytes = kMiB4;
  o.network.matching = model::Matching::fifo;
  return o;
}

// "ok", or the deadlock in the words of `ppsim check`.
std::string verdict(const Program& p, const sim::SimOptions& o) {
  const auto diagnostics = schedules::validate(p, model::validate_options(o.network));
  REQUIRE_FALSE(schedules::has_fatal(diagnostics));
  const auto r = sim::simulate(p, o);
  CHECK(r.errors.empty());
  return r.deadlock ? r.deadlock->describe() : "ok";
}

// NCCL #479's pattern, twice: two ranks each send to the other, then receive (a bidirectional
// program: microbatch 0 flows rank 0 -> 1, microbatch 1 rank 1 -> 0); `grouped` puts each
// send/receive pair in one group.
Program exchange(bool grouped) {
  const std::string g = grouped ? "GROUP_START," : "", e = grouped ? ",GROUP_END" : "";
  return Program::parse("0F0," + g + "0SEND_F0#0,3RECV_F1#1" + e + ",WAIT(0;1),3F1,3B1," + g +
                            "3SEND_B1#2,0RECV_B0#3" + e + ",WAIT(2;3),0B0\n" + "2F1," + g +
                            "2SEND_F1#0,1RECV_F0#1" + e + ",WAIT(0;1),1F0,1B0," + g +
                            "1SEND_B0#2,2RECV_B1#3" + e + ",WAIT(2;3),2B1\n",
                        schedules::Routes(4, {{0, 1}, {2, 3}}, {0, 1}));
}

}  // namespace

TEST_CASE("nccl_semantics.nccl_479_two_ranks_send", "[nccl][sim]") {
  // NCCL #479: two ranks that each send then receive, ungrouped, hang under nccl with 4 MiB
  // messages, grouping, room in NCCL's buffers or mpi semantics fix it
  const Program bug = exchange(false);
  // Each send runs first on its rank's stream; its receive is queued behind the other rank's
  // send, so neither send finds its receive running.
  CHECK(verdict(bug, nccl(4)) ==
        "cycle: rank 0 blocked in WAIT(0;1) on 0SEND_F0#0 -> rank 1; "
        "rank 1 blocked in WAIT(0;1) on 2SEND_F1#0 -> rank 0");
  CHECK(verdict(bug, nccl(4, /*buffer=*/kMiB4)) == "ok");      // the message fits: sends complete
  CHECK(verdict(bug, nccl(4, /*buffer=*/kMiB4 - 1)) != "ok");  // one byte too large
  CHECK(verdict(bug, nccl(4, 0, /*per_peer=*/true)) != "ok");  // one peer: one stream either way
  CHECK(verdict(bug, mpi(4)) == "ok");                         // requests progress on their own
  CHECK(verdict(exchange(true), nccl(4)) == "ok");
}

TEST_CASE("nccl_semantics.group_larger_nccl_max_group", "[nccl][sim]") {
  // A group larger than nccl_max_group_ops launches in pieces: a send/receive pair split in two
  // kernels hangs as if ungrouped
  const Program grouped = exchange(true);
  CHECK(verdict(grouped, nccl(4, 0, false, /*max_group_ops=*/2)) == "ok");
  CHECK(verdict(grouped, nccl(4, 0, false, /*max_group_ops=*/1)) ==
        verdict(exchange(false), nccl(4)));
}

TEST_CASE("nccl_semantics.receive_posted_early_blocks_later", "[nccl][sim]") {
  // Head-of-line blocking: a receive posted early blocks a later send on the rank's one stream,
  // with a stream per peer it blocks only ops to its own peer
  // Interleaved placement, P = 3, V = 2: rank 1 holds stages 1 and 4. It posts stage 4's receive
  // (from rank 0's stage 3) early, then sends stage 1's output to rank 2, whose forward rank 0's
  // stage 3 needs: on one stream that send waits behind the receive it feeds.
  const Program p = Program::parse(
      "0F0,0SEND_F0,3RECV_F0,3F0,3SEND_F0,3RECV_B0,3B0,3SEND_B0,0RECV_B0,0B0\n"
      "1RECV_F0,4RECV_F0#0,1F0,1SEND_F0,WAIT(0),4F0,4SEND_F0,4RECV_B0,4B0,4SEND_B0,1RECV_B0,1B0,"
      "1SEND_B0\n"
      "2RECV_F0,2F0,2SEND_F0,5RECV_F0,5F0,5B0,5SEND_B0,2RECV_B0,2B0,2SEND_B0\n");
  REQUIRE(p.rank_of(4) == 1);
  CHECK(verdict(p, nccl(6)) ==
        "cycle: rank 0 blocked in 3RECV_F0 -> rank 2; rank 2 blocked in 2RECV_F0 -> rank 1; rank 1 "
        "blocked in 1SEND_F0 on 1SEND_F0 (queued behind kernel 4RECV_F0#0 on rank 1's p2p stream) "
        "-> rank 0");
  CHECK(verdict(p, nccl(6, 0, /*per_peer=*/true)) == "ok");
  CHECK(verdict(p, mpi(6)) == "ok");
}

TEST_CASE("nccl_semantics.send_completes_without_receive_only", "[nccl][sim]") {
  // A send completes without its receive only while the pair's buffer has room: nccl_buffer_bytes
  // is shared by the messages sent and not yet received
  // Rank 0 sends three forwards before it receives a gradient; rank 1 receives the second only
  // after sending its first gradient back.
  const Program p = Program::parse(
      "0F0,0SEND_F0,0F1,0SEND_F1,0F2,0SEND_F2,0RECV_B0,0B0,0RECV_B1,0B1,0RECV_B2,0B2\n"
      "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1,1RECV_F2,1F2,1B2,1SEND_B2\n");
  CHECK(verdict(p, nccl(2)) ==
        "cycle: rank 0 blocked in 0SEND_F1 -> rank 1; rank 1 blocked in 1SEND_B0 -> rank 0");
  // One message of room each way is enough (the gradient goes back through the other direction's
  // buffer); the third forward waits for room, not for ever.
  auto one = nccl(2, kMiB4);
  one.costs.stages[1].backward = 5;
  auto two = nccl(2, 2 * kMiB4);
  two.costs.stages[1].backward = 5;
  CHECK(verdict(p, one) == "ok");
  CHECK(verdict(p, two) == "ok");
  // The timing shows the room: with one message of it, rank 0's third send (op 5, issued at 3)
  // waits until rank 1 receives the second forward, after its 5-unit B0, at 1 + 1 + 5 = 7.
  auto blocked_in = [&](const sim::SimOptions& o, int rank, int pos) {
    record::Trace trace;
    record::TraceRecorder recorder(trace);
    (void)sim::simulate(p, o, &recorder);
    for (const auto& s : trace.spans)
      if (s.rank == rank && s.pos == pos && s.kind == record::SpanKind::blocked)
        return s.end - s.start;
    return -1.0;
  };
  CHECK(blocked_in(one, 0, 5) == Approx(4.0));
  CHECK(blocked_in(two, 0, 5) == Approx(0.0));
}

TEST_CASE("nccl_semantics.under_nccl_backward_may_free", "[nccl][sim]") {
  // Under nccl a backward may free the output of a send not yet waited (NCCL holds it)
  const Program p = Program::parse(
      "0F0,0SEND_F0#0,0RECV_B0,0B0,WAIT(0)\n"
      "1RECV_F0,1F0,1B0,1SEND_B0\n");
  const auto o = nccl(2, kMiB4);
  CHECK(verdict(p, o) == "ok");
  bool flagged = false;
  for (const auto& d : schedules::validate(p)) flagged |= d.kind == "buffer_released_before_wait";
  CHECK(flagged);  // under mpi (Gloo) it is a crash
}

TEST_CASE("nccl_semantics.program_runs_under_nccl_also", "[nccl][sim][property]") {
  // Property: a program that runs under nccl also runs under mpi with the same eager threshold
  // (the NCCL model is never more permissive)
  std::mt19937 rng(1712);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int nccl_hangs_only = 0, both_run = 0, both_hang = 0;
  for (int i = 0; i < 400; ++i) {
    auto [p, o, name] = test::random_case(rng, /*groups=*/pick(0, 1) == 1);
    o.network.matching = model::Matching::fifo;
    const std::int64_t threshold = pick(0, 2) == 0 ? 0 : pick(0, 2000);
    sim::SimOptions n = o, m = o;
    n.network.semantics = model::P2pSemantics::nccl;
    n.network.eager_limit = 0;
    n.network.nccl_buffer_bytes = threshold;
    n.network.nccl_streams =
        pick(0, 1) ? model::NcclStreams::peer : model::NcclStreams::communicator;
    n.network.nccl_max_group_ops = pick(0, 3);
    m.network.eager_limit = threshold;
    INFO("program " << i << " (" << name << ", threshold " << threshold << ")\n" << p.to_text());
    const auto rn = sim::simulate(p, n), rm = sim::simulate(p, m);
    if (!rn.deadlock) CHECK_FALSE(rm.deadlock);
    nccl_hangs_only += rn.deadlock && !rm.deadlock;
    both_run += !rn.deadlock && !rm.deadlock;
    both_hang += rn.deadlock && rm.deadlock;
  }
  CHECK(nccl_hangs_only > 20);  // the models differ on many programs...
  CHECK(both_run > 50);         // ...and agree on many
  CHECK(both_hang > 10);
}

TEST_CASE("nccl_semantics.under_nccl_verdict_stuck_ops", "[nccl][sim][property]") {
  // Property: under nccl the verdict and the stuck ops do not depend on op durations
  std::mt19937 rng(20261125);
  int hangs = 0;
  for (int i = 0; i < 200; ++i) {
    auto [p, o, name] = test::random_nccl_case(rng);
    const auto base = sim::simulate(p, o);
    const std::string want = base.deadlock ? base.deadlock->describe() : "ok";
    hangs += bool(base.deadlock);
    for (int trial = 0; trial < 5; ++trial) {
      sim::SimOptions t = o;
      test::random_costs(t, rng, 0.01, 10, 3);
      const auto r = sim::simulate(p, t);
      INFO("program " << i << " (" << name << ") trial " << trial << "\n" << p.to_text());
      CHECK((r.deadlock ? r.deadlock->describe() : "ok") == want);
      CHECK(r.ops_executed == base.ops_executed);
    }
  }
  CHECK(hangs > 20);
}
