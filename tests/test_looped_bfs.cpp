// looped-bfs (PyTorch ScheduleLoopedBFS): exact per-rank order, closed forms, deadlock verdicts.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "ppsim/schedules/error.hpp"

using namespace ppsim;
using schedules::OpKind;

namespace {
schedules::Program gen(int P, int M, int V) {
  return schedules::generate("looped-bfs", {{"ranks", P}, {"microbatches", M}, {"chunks", V}});
}
}  // namespace

TEST_CASE(
    "looped-bfs: rank r runs stages r, r+P, ...; all forwards chunk by chunk, then backwards "
    "chunk by chunk in reverse, each chunk's microbatches last first (PyTorch's order)",
    "[looped-bfs]") {
  // PyTorch's _calculate_single_rank_operations for P=2, V=2, M=3, without its None padding.
  const auto p = gen(2, 3, 2);
  CHECK(test::rank_line(p, 0) == "0F0,0F1,0F2,2F0,2F1,2F2,2B2,2B1,2B0,0B2,0B1,0B0");
  CHECK(test::rank_line(p, 1) == "1F0,1F1,1F2,3F0,3F1,3F2,3B2,3B1,3B0,1B2,1B1,1B0");
  // P=3, V=3, M=2: rank 1 holds stages 1, 4, 7.
  CHECK(test::rank_line(gen(3, 2, 3), 1) == "1F0,1F1,4F0,4F1,7F0,7F1,7B1,7B0,4B1,4B0,1B1,1B0");
  // The alias resolves to the same generator, and the placement is the loop one.
  const auto q = schedules::generate("ScheduleLoopedBFS", {{"ranks", 2}, {"microbatches", 3}});
  CHECK(test::rank_line(q, 0) == test::rank_line(p, 0));  // chunks default to 2
  for (int s = 0; s < 6; ++s) {
    CHECK(gen(3, 2, 2).place(s).rank == s % 3);
    CHECK(gen(3, 2, 2).place(s).chunk == s / 3);
  }
  // One chunk per rank is GPipe with the backwards in reverse microbatch order.
  CHECK(test::rank_line(gen(3, 3, 1), 2) == "2F0,2F1,2F2,2B2,2B1,2B0");
}

TEST_CASE("looped-bfs rejects chunks < 1 and unknown parameters, naming the key", "[looped-bfs]") {
  auto key_of = [](const schedules::ScheduleParams& params) {
    try {
      schedules::generate("looped-bfs", params);
    } catch (const schedules::ParameterError& e) {
      return e.key();
    }
    return std::string("none");
  };
  CHECK(key_of({{"ranks", 2}, {"microbatches", 2}, {"chunks", 0}}) == "chunks");
  CHECK(key_of({{"ranks", 0}, {"microbatches", 2}}) == "ranks");
  CHECK(key_of({{"ranks", 2}, {"microbatches", 2}, {"microbatch_group_size", 2}}) ==
        "microbatch_group_size");
}

// Free communication, uniform per-stage costs f, b. Rank 0's chunk 0 forwards start at once; each
// later chunk's forwards reach rank 0 after a full round through the P ranks, which the M >= P
// forwards of the previous chunk cover. The last stage then runs all its backwards at once, and
// the backward wave needs (P-1) hops to come back: makespan = V*M*(f+b) + (P-1)(f+b) when M >= P.
TEST_CASE("looped-bfs makespan = (V*M + P-1)(f+b) for M >= P, peak in-flight V*M on every rank",
          "[looped-bfs][closed_form]") {
  const double f = 1.0, b = 2.5;
  for (int P : {1, 2, 3, 4}) {
    for (int V : {1, 2, 3}) {
      for (int M : {P, P + 1, 2 * P + 1}) {
        const auto prog = schedules::lower(gen(P, M, V), {"async", {{"prefetch", 1}}});
        const auto r = test::run(prog, test::uniform(P * V, f, b));
        INFO("P=" << P << " V=" << V << " M=" << M);
        REQUIRE_FALSE(r.deadlock);
        REQUIRE(r.errors.empty());
        CHECK(r.makespan == Approx((V * M + P - 1) * (f + b)));
        for (const auto& m : r.per_rank) CHECK(m.peak_inflight == V * M);
      }
    }
  }
}

// Which comm styles run it. Only async. Where a forward send waits for its receive (blocking,
// batched: rendezvous sends; async-send: the send's WAIT before the next forward), rank P-1's
// forward of microbatch 0 goes round the ring to rank 0's next chunk, whose receive rank 0 posts
// only after all M forwards of its first chunk; rank r, waiting for rank r+1 to take microbatch
// P-1-r, has by then sent it P-1-r earlier ones. Rank 0 reaches microbatch P-1 only when M >= P:
// the cycle is rank r blocked sending microbatch P-1-r to rank r+1 mod P, for every r.
TEST_CASE(
    "looped-bfs: async runs it; rendezvous forward sends deadlock round the ring when "
    "V >= 2 and M >= P",
    "[looped-bfs][deadlock]") {
  for (const auto& lowering : test::all_lowerings()) {
    for (int P : {1, 2, 3, 4}) {
      for (int V : {1, 2, 3}) {
        for (int M : {P - 1, P, P + 2}) {
          if (M < 1) continue;
          const auto r =
              test::run(schedules::lower(gen(P, M, V), lowering), test::uniform(P * V, 1, 2));
          INFO(test::describe(lowering) << " P=" << P << " V=" << V << " M=" << M);
          CHECK(r.errors.empty());
          const bool cycle = lowering.style != "async" && P >= 2 && V >= 2 && M >= P;
          REQUIRE(static_cast<bool>(r.deadlock) == cycle);
          if (!cycle) continue;
          REQUIRE(r.deadlock->cycles.size() == 1);
          const auto& c = r.deadlock->cycles[0];
          REQUIRE(c.size() == static_cast<std::size_t>(P));
          for (int k = 0; k < P; ++k) {
            const auto& b = c[static_cast<std::size_t>(k)];
            const std::string send = std::to_string(k) + "SEND_F" + std::to_string(P - 1 - k);
            CHECK(b.rank == k);
            CHECK(b.peer == (k + 1) % P);
            if (lowering.style == "async-send")
              CHECK(b.waiting_for.rfind(send + "#", 0) == 0);
            else
              CHECK(b.op == send);
          }
        }
      }
    }
  }
}
