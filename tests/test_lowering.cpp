// Lowering: where each comm style puts its sends, receives and waits.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "ppsim/schedules/validation.hpp"

using namespace ppsim;
using CommStyle = std::string_view;

TEST_CASE("lowering.receive_right_before_consumer_send", "[lowering]") {
  // blocking: receive right before the consumer, send right after the producer
  const auto p = test::lowered("1f1b", 2, 2, 1, "blocking");
  test::check_rank_lines(p, {{0, "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1"},
                             {1, "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1"}});
}

TEST_CASE("lowering.forward_sends_async_waited_end", "[lowering]") {
  // async-send: forward sends async, waited at the end of the step (before the next forward)
  const auto p = test::lowered("1f1b", 3, 3, 1, "async-send");
  // rank 1: warm-up F0; steady F1/B0, F2/B1; cool-down B2. Each forward send is waited before the
  // next forward, or before the backward that frees its buffer.
  CHECK(test::rank_line(p, 1) ==
        "1RECV_F0,1F0,1SEND_F0#0,WAIT(0),1RECV_F1,1F1,1SEND_F1#1,1RECV_B0,1B0,1SEND_B0,"
        "WAIT(1),1RECV_F2,1F2,1SEND_F2#2,1RECV_B1,1B1,1SEND_B1,WAIT(2),1RECV_B2,1B2,1SEND_B2");
}

TEST_CASE("lowering.send_forward_recv_backward_send", "[lowering]") {
  // batched: send_forward+recv_backward and send_backward+recv_forward posted together, waited
  // together
  const auto p = test::lowered("1f1b", 3, 3, 1, "batched");
  CHECK(test::rank_line(p, 1) ==
        "1RECV_F0,1F0,1SEND_F0,1RECV_F1,1F1,1SEND_F1#0,1RECV_B0#1,WAIT(0;1),1B0,1SEND_B0#2,1RECV_"
        "F2#3,WAIT(2;3),"
        "1F2,1SEND_F2#4,1RECV_B1#5,WAIT(4;5),1B1,1SEND_B1,1RECV_B2,1B2,1SEND_B2");
}

TEST_CASE("lowering.receives_posted_prefetch_compute_ops", "[lowering]") {
  // async: receives posted `prefetch` compute ops ahead and waited at use, sends waited before
  // their buffer is reused or freed
  const auto p1 = test::lowered("gpipe", 2, 2, 1, "async", 1);
  // prefetch 1: the receive for compute op i is posted before compute op i-1.
  test::check_rank_lines(
      p1, {{0, "0F0,0SEND_F0#0,0RECV_B0#1,0F1,0SEND_F1#2,0RECV_B1#3,WAIT(0;1),0B0,WAIT(2;3),0B1"},
           {1,
            "1RECV_F0#0,1RECV_F1#1,WAIT(0),1F0,WAIT(1),1F1,1B0,1SEND_B0#2,WAIT(2),1B1,1SEND_B1#3,"
            "WAIT(3)"}});
  const auto p0 = test::lowered("gpipe", 2, 2, 1, "async", 0);
  CHECK(test::rank_line(p0, 1) ==
        "1RECV_F0#0,WAIT(0),1F0,1RECV_F1#1,WAIT(1),1F1,1B0,1SEND_B0#2,WAIT(2),1B1,1SEND_B1#3,WAIT("
        "3)");
  const auto pa = test::lowered("gpipe", 2, 2, 1, "async", -1);
  CHECK(test::rank_line(pa, 0) ==
        "0RECV_B0#0,0RECV_B1#1,0F0,0SEND_F0#2,0F1,0SEND_F1#3,WAIT(0;2),0B0,WAIT(1;3),0B1");
}

TEST_CASE("lowering.lowered_program_validates_clean_keeps", "[lowering]") {
  // Every lowered program validates clean and keeps the generator's compute order
  for (const auto& lowering : test::all_lowerings()) {
    for (const auto& g : schedules::Registry::instance().all()) {
      for (const auto& params : g.test_params) {
        const int P = params.ranks();
        const auto compute = schedules::generate(g.name, params);
        if (!test::accepts(lowering, compute)) continue;
        const auto p = schedules::lower(compute, lowering);
        INFO(g.name << " P=" << P << " M=" << params.microbatches() << " "
                    << test::describe(lowering));
        CHECK(schedules::validate(p).empty());
        for (int r = 0; r < P; ++r) {
          schedules::OpList kept;
          for (const auto& op : p.ops(r))
            if (schedules::is_compute(op.kind)) kept.push_back(op);
          CHECK(kept == compute.ops(r));
        }
      }
    }
  }
}
