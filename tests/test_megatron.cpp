// The megatron comm style: Megatron-LM's p2p calls, batch by batch, and what they run like.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "error_of.hpp"
#include "helpers.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/schedules/error.hpp"

using namespace ppsim;
using schedules::Program;

namespace {

Program megatron(const schedules::ScheduleParams& params, bool overlap = false,
                 bool parity = false) {
  schedules::LoweringOptions l{
      "megatron", {{"overlap_p2p_comm", overlap ? 1 : 0}, {"parity_batches", parity ? 1 : 0}}};
  const std::string kind = params.chunks() > 1 ? "interleaved-1f1b" : "1f1b";
  return schedules::lower(schedules::generate(kind, params), l);
}

Program interleaved(int P, int M, int V, int group, bool overlap = false, bool parity = false) {
  return megatron(
      {{"ranks", P}, {"microbatches", M}, {"chunks", V}, {"microbatch_group_size", group}}, overlap,
      parity);
}

// Every valid microbatch_group_size of Megatron's interleaved loop: [P, M], and M % group is 0 or
// >= P.
std::vector<int> valid_groups(int P, int M) {
  std::vector<int> out;
  for (int g = P; g <= M; ++g)
    if (M % g == 0 || M % g >= P) out.push_back(g);
  return out;
}

}  // namespace

// The traces below follow Megatron-LM's loops (megatron/core/pipeline_parallel/schedules.py) call
// by call. A call is its ops posted in Megatron's order (batch_isend_irecv: send_prev, recv_prev,
// send_next, recv_next) and one WAIT; a call with nothing to move posts nothing.

TEST_CASE("megatron.megatron_1f1b_p_2_m", "[megatron]") {
  // megatron 1F1B P=2 M=3: the batches of forward_backward_pipelining_without_interleaving
  const Program p = megatron({{"ranks", 2}, {"microbatches", 3}});
  // Rank 0: warm-up 1 forward, 2 steady steps, 1 cool-down backward. The first stage receives
  // no activations and sends no gradients, so those calls post nothing.
  CHECK(test::rank_line(p, 0) ==
        "0F0,0SEND_F0#0,WAIT(0),"                   // warm-up: send_forward
        "0F1,0SEND_F1#1,0RECV_B0#2,WAIT(1;2),0B0,"  // steady 0: send_forward_recv_backward
        "0F2,0SEND_F2#3,0RECV_B1#4,WAIT(3;4),0B1,"  // steady 1: send_forward_recv_backward
        "0RECV_B2#5,WAIT(5),0B2");                  // cool-down: recv_backward
  // Rank 1 (last): no warm-up.
  CHECK(test::rank_line(p, 1) ==
        "1RECV_F0#0,WAIT(0),"                       // recv_forward before the steady state
        "1F0,1B0,1SEND_B0#1,1RECV_F1#2,WAIT(1;2),"  // send_backward_recv_forward
        "1F1,1B1,1SEND_B1#3,1RECV_F2#4,WAIT(3;4),"  // send_backward_recv_forward
        "1F2,1B2,1SEND_B2#5,WAIT(5)");              // last step: send_backward
}

TEST_CASE("megatron.megatron_1f1b_p_4_m", "[megatron]") {
  // megatron 1F1B P=4 M=6, rank 1: two warm-up forwards, four steady steps, two cool-down
  const Program p = megatron({{"ranks", 4}, {"microbatches", 6}});
  CHECK(test::rank_line(p, 1) ==
        // warm-up i=0,1: recv_forward, forward, send_forward
        "1RECV_F0#0,WAIT(0),1F0,1SEND_F0#1,WAIT(1),"
        "1RECV_F1#2,WAIT(2),1F1,1SEND_F1#3,WAIT(3),"
        // recv_forward before the steady state
        "1RECV_F2#4,WAIT(4),"
        // steady i=0..2: forward, send_forward_recv_backward, backward, send_backward_recv_forward
        "1F2,1SEND_F2#5,1RECV_B0#6,WAIT(5;6),1B0,1SEND_B0#7,1RECV_F3#8,WAIT(7;8),"
        "1F3,1SEND_F3#9,1RECV_B1#10,WAIT(9;10),1B1,1SEND_B1#11,1RECV_F4#12,WAIT(11;12),"
        "1F4,1SEND_F4#13,1RECV_B2#14,WAIT(13;14),1B2,1SEND_B2#15,1RECV_F5#16,WAIT(15;16),"
        // steady i=3 (last): send_backward only
        "1F5,1SEND_F5#17,1RECV_B3#18,WAIT(17;18),1B3,1SEND_B3#19,WAIT(19),"
        // cool-down: recv_backward, backward, send_backward
        "1RECV_B4#20,WAIT(20),1B4,1SEND_B4#21,WAIT(21),"
        "1RECV_B5#22,WAIT(22),1B5,1SEND_B5#23,WAIT(23)");
}

// Interleaved, P=3 V=2 M=3 (group 3): stage s on rank s mod 3, so rank 0 holds stages 0 and 3,
// rank 2 stages 2 and 5. Megatron's table: (mb 0..2, chunk 0), then (mb 0..2, chunk 1).
TEST_CASE("megatron.megatron_interleaved_p_3_v", "[megatron]") {
  // megatron interleaved P=3 V=2 M=3: rank 0 (all forwards in warm-up) and rank 2
  const Program p = interleaved(3, 3, 2, 3);
  // Rank 0: warm-up 2(P-1) + (V-1)*3 = 7 >= 6, so every forward is warm-up. recv_prev is False
  // for k < P-1 (rank 2 has produced nothing yet) and for the last k.
  CHECK(test::rank_line(p, 0) ==
        "0F0,0SEND_F0#0,WAIT(0),"                   // k=0 send_forward_recv_forward
        "0F1,0SEND_F1#1,WAIT(1),"                   // k=1
        "0F2,3RECV_F0#2,0SEND_F2#3,WAIT(2;3),"      // k=2: recv_prev for chunk 1
        "3F0,3RECV_F1#4,3SEND_F0#5,WAIT(4;5),"      // k=3
        "3F1,3RECV_F2#6,3SEND_F1#7,WAIT(6;7),"      // k=4
        "3F2,3SEND_F2#8,WAIT(8),"                   // k=5: last, no recv_prev
        "3RECV_B0#9,WAIT(9),"                       // cool-down: recv_backward
        "3B0,3SEND_B0#10,3RECV_B1#11,WAIT(10;11),"  // send_backward_recv_backward
        "3B1,3SEND_B1#12,3RECV_B2#13,WAIT(12;13),"
        "3B2,3SEND_B2#14,0RECV_B0#15,WAIT(14;15),"
        "0B0,0RECV_B1#16,WAIT(16),"  // first stage: no gradient to send
        "0B1,0RECV_B2#17,WAIT(17),"
        "0B2");  // last k: no recv_next
  // Rank 2: warm-up (V-1)*3 = 3; the last warm-up step is
  // send_forward_backward_recv_forward_backward, with recv_next False on the last rank.
  CHECK(test::rank_line(p, 2) ==
        "2RECV_F0#0,WAIT(0),"                   // recv_forward before the warm-up
        "2F0,2RECV_F1#1,2SEND_F0#2,WAIT(1;2),"  // send_forward_recv_forward
        "2F1,2RECV_F2#3,2SEND_F1#4,WAIT(3;4),"
        "2F2,5RECV_F0#5,2SEND_F2#6,WAIT(5;6),"  // the fused call
        // steady: send_forward_backward_recv_forward_backward; chunk 1 is the last stage, so
        // no activation to send; recv_next False while k < P-1
        "5F0,5B0,5SEND_B0#7,5RECV_F1#8,WAIT(7;8),"
        "5F1,5B1,5SEND_B1#9,5RECV_F2#10,WAIT(9;10),"
        "5F2,5B2,5SEND_B2#11,2RECV_B0#12,WAIT(11;12),"  // last steady: no recv_prev
        "2B0,2SEND_B0#13,2RECV_B1#14,WAIT(13;14),"      // cool-down send_backward_recv_backward
        "2B1,2SEND_B1#15,2RECV_B2#16,WAIT(15;16),"
        "2B2,2SEND_B2#17,WAIT(17)");
}

TEST_CASE("megatron.megatron_interleaved_p_3_v_2", "[megatron]") {
  // megatron interleaved P=3 V=2 M=4 with microbatch_group_size 4 (!= P), rank 2
  const Program p = interleaved(3, 4, 2, 4);
  // Table: (mb 0..3, chunk 0), (mb 0..3, chunk 1); rank 2 warm-up (V-1)*4 = 4.
  CHECK(test::rank_line(p, 2) ==
        "2RECV_F0#0,WAIT(0),"
        "2F0,2RECV_F1#1,2SEND_F0#2,WAIT(1;2),"
        "2F1,2RECV_F2#3,2SEND_F1#4,WAIT(3;4),"
        "2F2,2RECV_F3#5,2SEND_F2#6,WAIT(5;6),"
        "2F3,5RECV_F0#7,2SEND_F3#8,WAIT(7;8),"          // fused call, recv_next False
        "5F0,5B0,5SEND_B0#9,5RECV_F1#10,WAIT(9;10),"    // k=0: recv_next False (k < P-1)
        "5F1,5B1,5SEND_B1#11,5RECV_F2#12,WAIT(11;12),"  // k=1
        // k=2: the backward table's entry 0 is chunk 1 != 0, so recv_next: all four at once
        "5F2,5B2,5SEND_B2#13,5RECV_F3#14,2RECV_B0#15,WAIT(13;14;15),"
        "5F3,5B3,5SEND_B3#16,2RECV_B1#17,WAIT(16;17),"  // last steady: no recv_prev
        "2B0,2SEND_B0#18,2RECV_B2#19,WAIT(18;19),"
        "2B1,2SEND_B1#20,2RECV_B3#21,WAIT(20;21),"
        "2B2,2SEND_B2#22,WAIT(22),"  // entry 4 is chunk 0 in backward
        "2B3,2SEND_B3#23,WAIT(23)");
}

TEST_CASE("megatron.megatron_interleaved_p_3_v_3", "[megatron]") {
  // megatron interleaved P=3 V=2 M=3 with overlap_p2p_comm, rank 1 (odd: _p2p_ops posts receives
  // first)
  const Program p = interleaved(3, 3, 2, 3, true);
  // Warm-up 2 + 3 = 5 steps of a blocking send_forward_recv_forward (no fused call with
  // overlap); after the last one an open send_backward_recv_backward(None, recv_next).
  // Steady (1 step): pp_pre_forward waits the oldest forward receive (none pending),
  // pp_post_forward posts send_forward_recv_forward and waits its send
  // (deallocate_pipeline_outputs), pp_pre_backward waits the oldest backward receive,
  // pp_post_backward posts send_backward_recv_backward open. Cool-down: blocking
  // send_backward_recv_backward after waiting the oldest open receive; the open backward send is
  // waited at the end.
  CHECK(test::rank_line(p, 1) ==
        "1RECV_F0#0,WAIT(0),"
        "1F0,1RECV_F1#1,1SEND_F0#2,WAIT(1;2),"
        "1F1,1RECV_F2#3,1SEND_F1#4,WAIT(3;4),"
        "1F2,4RECV_F0#5,1SEND_F2#6,WAIT(5;6),"
        "4F0,4RECV_F1#7,4SEND_F0#8,WAIT(7;8),"
        "4F1,4RECV_F2#9,4SEND_F1#10,WAIT(9;10),4RECV_B0#11,"
        "4F2,4SEND_F2#12,WAIT(12),WAIT(11),4B0,4RECV_B1#13,4SEND_B0#14,"
        "WAIT(13),4B1,4RECV_B2#15,4SEND_B1#16,WAIT(15;16),"
        "4B2,1RECV_B0#17,4SEND_B2#18,WAIT(17;18),"
        "1B0,1RECV_B1#19,1SEND_B0#20,WAIT(19;20),"
        "1B1,1RECV_B2#21,1SEND_B1#22,WAIT(21;22),"
        "1B2,1SEND_B2#23,WAIT(23),WAIT(14)");
  // Rank 0 (even) posts the send first: its first warm-up step.
  CHECK(test::rank_line(p, 0).rfind("0F0,0SEND_F0#0,WAIT(0),0F1,0SEND_F1#1,WAIT(1),0F2,"
                                    "0SEND_F2#2,3RECV_F0#3,WAIT(2;3),",
                                    0) == 0);
}

TEST_CASE("megatron.1f1b_p_8_m_24", "[megatron]") {
  // megatron: every 1F1B P <= 8, M <= 24 lowers clean and runs without deadlock, makespan
  // (M+P-1)(F+B)
  const double F = 1.0, B = 2.0;
  int programs = 0;
  for (int P = 1; P <= 8; ++P)
    for (int M = 1; M <= 24; ++M) {
      const Program p = megatron({{"ranks", P}, {"microbatches", M}});
      INFO("P=" << P << " M=" << M);
      const auto r = test::run(p, test::uniform(P, F, B));
      REQUIRE_FALSE(r.deadlock);
      REQUIRE(r.errors.empty());
      CHECK(r.makespan == Approx((M + P - 1) * (F + B)));
      ++programs;
    }
  CHECK(programs == 8 * 24);
}

TEST_CASE("megatron.interleaved_3_p_8_m", "[megatron]") {
  // megatron: every interleaved 3 <= P <= 8, M <= 24, V <= 4 and valid microbatch_group_size
  // lowers clean and runs without deadlock, with and without overlap_p2p_comm or parity_batches
  int programs = 0;
  for (int P = 3; P <= 8; ++P)
    for (int V = 2; V <= 4; ++V)
      for (int M = P; M <= 24; ++M)
        for (int g : valid_groups(P, M))
          for (int variant = 0; variant < 3; ++variant) {
            const bool overlap = variant == 1, parity = variant == 2;
            const Program p = interleaved(P, M, V, g, overlap, parity);
            INFO("P=" << P << " V=" << V << " M=" << M << " group=" << g << " overlap=" << overlap
                      << " parity=" << parity);
            auto o = test::uniform(P * V, 1.0, 2.0);
            o.network.matching =
                model::Matching::fifo;  // NCCL's: the k-th send meets the k-th receive
            const auto r = test::run(p, o);
            REQUIRE_FALSE(r.deadlock);
            REQUIRE(r.errors.empty());
            ++programs;
          }
  // 1725 (P, V, M, group) combinations, each batched, overlapped and in parity order
  CHECK(programs == 3 * 1725);
}

// With 2 ranks the previous and the next rank are one peer, so send_forward_backward_recv_
// forward_backward posts two sends and two receives to it in one batch. _batched_p2p_ops' fixed
// order (send_prev, recv_prev, send_next, recv_next) is the same on both ranks, so under fifo
// matching the first send (a gradient) meets the first receive (an activation): Megatron-LM #5100
// as the maintainers traced it (PR #5271: recv_prev and recv_next silently crossed at PP=2).
TEST_CASE("megatron.megatron_interleaved_p_2_v", "[megatron][nccl]") {
  // megatron interleaved P=2 V=2 M=4: the fixed batch order crosses activations and gradients
  // under fifo matching, parity_batches does not
  auto o = test::uniform(4, 1.0, 2.0);
  o.network.matching = model::Matching::fifo;
  const auto r = test::run(interleaved(2, 4, 2, 2), o);
  REQUIRE_FALSE(r.deadlock);
  std::vector<std::string> got;
  for (const auto& e : r.errors) got.push_back(e.kind + " " + std::to_string(e.rank) + " " + e.op);
  std::sort(got.begin(), got.end());
  // Rank 0 posts 2SEND_B (to prev) before 0SEND_F (to next); rank 1 posts 1RECV_F (from prev)
  // before 1RECV_B (from next): both go to and come from the one peer.
  const std::vector<std::string> want = {
      "message_order_mismatch 0 0RECV_B0#13", "message_order_mismatch 0 0RECV_B1#16",
      "message_order_mismatch 0 2RECV_F2#11", "message_order_mismatch 0 2RECV_F3#14",
      "message_order_mismatch 1 1RECV_B0#9",  "message_order_mismatch 1 1RECV_B1#13",
      "message_order_mismatch 1 1RECV_F2#8",  "message_order_mismatch 1 1RECV_F3#11"};
  CHECK(got == want);
  bool named = false;
  for (const auto& e : r.errors)
    if (e.op == "1RECV_F2#8")
      named = e.message.find("receives the message of 2SEND_B0#7 on rank 0") != std::string::npos;
  CHECK(named);
  // Under tag matching the same program is clean: only the pairing was wrong.
  o.network.matching = model::Matching::tag;
  CHECK(test::run(interleaved(2, 4, 2, 2), o).errors.empty());
}

TEST_CASE("megatron.megatron_interleaved_2_ranks_v", "[megatron][nccl]") {
  // megatron interleaved with 2 ranks, every V <= 4, M <= 16, valid group: the fixed order only
  // ever crosses messages, parity_batches runs clean in (V*M + 1)(f+b)
  const double f = 1.0, b = 2.0;
  int crossed = 0, programs = 0;
  for (int V = 2; V <= 4; ++V)
    for (int M = 2; M <= 16; ++M)
      for (int g : valid_groups(2, M)) {
        INFO("V=" << V << " M=" << M << " group=" << g);
        auto o = test::uniform(2 * V, f, b);
        o.network.matching = model::Matching::fifo;
        const auto fixed = test::run(interleaved(2, M, V, g), o);
        REQUIRE_FALSE(fixed.deadlock);
        for (const auto& e : fixed.errors) {
          REQUIRE(e.kind == "message_order_mismatch");
          // an activation slot gets a gradient or the reverse, never a wrong microbatch of the
          // right kind
          const bool recv_f = e.op.find("RECV_F") != std::string::npos;
          CHECK_THAT(e.message, Catch::Contains(recv_f ? "SEND_B" : "SEND_F"));
        }
        crossed += fixed.errors.empty() ? 0 : 1;
        const auto parity = test::run(interleaved(2, M, V, g, false, true), o);
        REQUIRE_FALSE(parity.deadlock);
        CHECK(parity.errors.empty());
        CHECK(parity.makespan == Approx((V * M + 1) * (f + b)));
        ++programs;
      }
  // Only M = 2 with group 2 has no step that both sends forward and backward.
  CHECK(crossed == programs - 3);
}

TEST_CASE("megatron.p_3_m_7_v", "[megatron]") {
  // megatron: P=3, M=7, V=2, microbatch_group_size 7 deadlocks under async (prefetch 1) and runs
  // under megatron, makespan (V*M + P-1)(f+b)
  const schedules::ScheduleParams params{
      {"ranks", 3}, {"microbatches", 7}, {"chunks", 2}, {"microbatch_group_size", 7}};
  const Program compute = schedules::generate("interleaved-1f1b", params);
  const auto o = test::uniform(6, 1.0, 2.0);
  {
    const auto r = test::run(schedules::lower(compute, {"async", {{"prefetch", 1}}}), o);
    CHECK(r.deadlock);
  }
  for (bool overlap : {false, true}) {
    INFO("overlap=" << overlap);
    const auto r = test::run(interleaved(3, 7, 2, 7, overlap), o);
    REQUIRE_FALSE(r.deadlock);
    CHECK(r.errors.empty());
    CHECK(r.makespan == Approx((2 * 7 + 3 - 1) * 3.0));
  }
}

// The lower bound: rank P-1 starts after P-1 forwards, runs V*M(f+b) of work and ends with a
// chunk-0 backward, after which P-1 backwards on ranks P-2..0 remain. Megatron's order meets it
// for every group it accepts (group >= P keeps the ring fed); a larger group costs memory: rank r
// warms up 2(P-r-1) + (V-1)*group forwards, so it holds one stash more than that at its peak.
TEST_CASE("megatron.interleaved_1f1b_any_valid_microbatch",
          "[megatron][closed_form][interleaved]") {
  // Interleaved 1F1B with any valid microbatch_group_size: bubble_vs_ideal = (P-1)/(V*M), makespan
  // (V*M + P-1)(f+b), peak stashes on rank r = min(2(P-r-1) + (V-1)*group + 1, V*M)
  const double f = 1.0, b = 2.0;
  int cases = 0;
  for (int P = 3; P <= 6; ++P)
    for (int V = 2; V <= 4; ++V)
      for (int M = P; M <= 16; ++M)
        for (int g : valid_groups(P, M)) {
          const schedules::ScheduleParams params{
              {"ranks", P}, {"microbatches", M}, {"chunks", V}, {"microbatch_group_size", g}};
          const Program compute = schedules::generate("interleaved-1f1b", params);
          // megatron's batches, and async with every receive posted up front (dependencies only)
          for (const schedules::LoweringOptions& l :
               {schedules::LoweringOptions{"megatron", {}},
                schedules::LoweringOptions{"async", {{"prefetch", -1}}}}) {
            INFO("P=" << P << " V=" << V << " M=" << M << " group=" << g << " "
                      << test::describe(l));
            auto o = test::uniform(P * V, f, b);
            o.memory.activation_bytes = 1;  // peak memory counts live stashes
            const auto r = test::run(schedules::lower(compute, l), o);
            REQUIRE_FALSE(r.deadlock);
            REQUIRE(r.errors.empty());
            CHECK(r.bubble_vs_ideal == Approx(double(P - 1) / (V * M)).margin(1e-12));
            CHECK(r.makespan == Approx((V * M + P - 1) * (f + b)));
            for (const auto& m : r.per_rank)
              CHECK(m.peak_memory_bytes == std::min(2 * (P - m.rank - 1) + (V - 1) * g + 1, V * M));
            ++cases;
          }
        }
  CHECK(cases == 2 * 462);  // 462 (P, V, M, group) combinations, two lowerings each
}

TEST_CASE("megatron.megatron_refuses_what_megatron_lm", "[megatron]") {
  // megatron refuses what Megatron-LM does not run, naming the rule
  const schedules::LoweringOptions plain{"megatron", {}};
  // Another schedule.
  auto e = test::error_of<schedules::ParameterError>([&] {
    schedules::lower(schedules::generate("gpipe", {{"ranks", 2}, {"microbatches", 2}}), plain);
  });
  CHECK(e.key() == "style");
  CHECK(std::string(e.what()) ==
        "comm style 'megatron' models Megatron-LM's 1F1B and interleaved 1F1B loops only: rank 1 "
        "op 1 is 1F1, where Megatron's 1F1B runs 1B0");
  // overlap_p2p_comm with the non-interleaved loop, as Megatron-LM raises.
  e = test::error_of<schedules::ParameterError>([&] {
    schedules::lower(schedules::generate("1f1b", {{"ranks", 2}, {"microbatches", 2}}),
                     {"megatron", {{"overlap_p2p_comm", 1}}});
  });
  CHECK(e.key() == "overlap_p2p_comm");
  CHECK_THAT(e.what(), Catch::Contains("does not support overlapping p2p communication"));
  // A split backward, a hand-made order, a program shorter than Megatron's.
  e = test::error_of<schedules::ParameterError>(
      [&] { schedules::lower(Program::parse("0F0,0I0,0W0\n"), plain); });
  CHECK_THAT(e.what(), Catch::EndsWith("rank 0 runs 0I0, Megatron runs full forwards and "
                                       "backwards (F, B) only"));
  e = test::error_of<schedules::ParameterError>(
      [&] { schedules::lower(Program::parse("0F0,0B0,0F1,0B1\n1F0,1B0,1F1,1B1\n"), plain); });
  CHECK_THAT(e.what(), Catch::EndsWith("rank 0 op 1 is 0B0, where Megatron's 1F1B runs 0F1"));
  e = test::error_of<schedules::ParameterError>(
      [&] { schedules::lower(Program::parse("0F0,0F1,0B0\n1F0,1B0,1F1,1B1\n"), plain); });
  CHECK_THAT(e.what(),
             Catch::EndsWith("rank 0 op 3 is the end of its ops, where Megatron's 1F1B runs 0B1"));
  // Virtual stages on one rank (looped-bfs with M=1 has Megatron's order there): refused, as
  // Megatron-LM refuses them, not left to fail while lowering.
  e = test::error_of<schedules::ParameterError>([&] {
    schedules::lower(
        schedules::generate("looped-bfs", {{"ranks", 1}, {"chunks", 2}, {"microbatches", 1}}),
        plain);
  });
  CHECK_THAT(e.what(),
             Catch::EndsWith("virtual stages (chunks 2) need ranks >= 2, as Megatron-LM requires"));
  // A written list naming a huge microbatch: refused by its op count, before Megatron's order of
  // M forwards and M backwards (2 * 10^9 ops) is built to compare with.
  e = test::error_of<schedules::ParameterError>(
      [&] { schedules::lower(Program::parse("0F999999998,0B999999998\n"), plain); });
  CHECK_THAT(e.what(), Catch::EndsWith("rank 0 runs 2 ops, where Megatron runs an F and a B of "
                                       "each of the 999999999 microbatches on each of its 1 "
                                       "chunk(s): 1999999998"));
}

TEST_CASE("megatron.comm_overlap_p2p_comm_takes", "[megatron][config]") {
  // megatron in a config: comm.overlap_p2p_comm takes true/false or 0/1
  nlohmann::json j = nlohmann::json::parse(R"({"schedule": {"kind": "interleaved-1f1b",
      "ranks": 3, "microbatches": 6, "chunks": 2}, "comm": {"style": "megatron",
      "overlap_p2p_comm": true}})");
  CHECK(config::parse_config(j, "m.json").lowering.params.get("overlap_p2p_comm") == 1);
  j["comm"]["overlap_p2p_comm"] = 0;
  CHECK(config::parse_config(j, "m.json").lowering.params.get("overlap_p2p_comm") == 0);
  j["comm"]["overlap_p2p_comm"] = "yes";
  auto e = test::error_of([&] { config::parse_config(j, "m.json"); });
  CHECK(e.key() == "comm.overlap_p2p_comm");
  CHECK_THAT(e.message(),
             Catch::Contains("expected an integer in [0, 1] or true/false, got string"));
  // 1f1b with overlap: refused when the program is built, naming the key.
  j = nlohmann::json::parse(R"({"schedule": {"kind": "1f1b", "ranks": 3, "microbatches": 6},
      "comm": {"style": "megatron", "overlap_p2p_comm": true}})");
  e = test::error_of([&] { config::prepare(config::parse_config(j, "m.json")); });
  CHECK(e.key() == "comm.overlap_p2p_comm");
}

TEST_CASE("megatron.random_stage_costs_latency_bandwidth", "[megatron]") {
  // megatron: random stage costs, latency, bandwidth, eager or rendezvous sends, tag or fifo
  // matching: still no deadlock and no hazard
  std::mt19937 rng(20261122);
  auto real = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  struct Shape {
    int P, M, V, group;
  };
  int runs = 0;
  for (const Shape& s :
       {Shape{2, 5, 1, 0}, Shape{5, 3, 1, 0}, Shape{8, 12, 1, 0}, Shape{3, 7, 2, 7},
        Shape{4, 8, 3, 4}, Shape{4, 10, 2, 5}, Shape{6, 13, 4, 7}, Shape{8, 24, 2, 12}})
    for (bool overlap : {false, true}) {
      if (overlap && s.V == 1) continue;  // Megatron-LM refuses it
      const Program p = s.V == 1 ? megatron({{"ranks", s.P}, {"microbatches", s.M}})
                                 : interleaved(s.P, s.M, s.V, s.group, overlap);
      for (int trial = 0; trial < 4; ++trial) {
        auto o = test::uniform(s.P * s.V, 1, 2);
        for (auto& st : o.costs.stages) {
          st.forward = real(0.1, 5);
          st.backward = real(0.1, 5);
        }
        o.network.latency = real(0, 2);
        o.network.bandwidth = real(10, 1000);
        o.network.boundary_bytes = 500;
        o.network.eager_limit = trial % 2 ? 1000 : 0;
        o.network.matching = trial < 2 ? model::Matching::fifo : model::Matching::tag;
        INFO("P=" << s.P << " M=" << s.M << " V=" << s.V << " overlap=" << overlap
                  << " trial=" << trial);
        const auto r = test::run(p, o);
        CHECK_FALSE(r.deadlock);
        CHECK(r.errors.empty());
        ++runs;
      }
    }
  CHECK(runs == 4 * (3 + 2 * 5));
}
