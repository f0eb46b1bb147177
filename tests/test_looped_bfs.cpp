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

// Which comm styles run it. With V >= 2 and P >= 2 the forwards go round the ring of ranks (rank
// P-1's chunk c feeds rank 0's chunk c+1), so a blocking send waits for a receive the peer posts
// only after its own forwards; styles that send asynchronously run it.
TEST_CASE("looped-bfs: which comm styles deadlock", "[looped-bfs][deadlock]") {
  for (const auto& lowering : test::all_lowerings()) {
    for (int P : {2, 3, 4}) {
      for (int V : {1, 2, 3}) {
        const int M = P + 1;
        const auto r =
            test::run(schedules::lower(gen(P, M, V), lowering), test::uniform(P * V, 1, 2));
        INFO(test::describe(lowering) << " P=" << P << " V=" << V << " M=" << M);
        CHECK(r.errors.empty());
        const bool blocking_sends = lowering.style == "blocking" || lowering.style == "batched";
        CHECK(static_cast<bool>(r.deadlock) == (blocking_sends && V >= 2));
      }
    }
  }
}
