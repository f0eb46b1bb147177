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

TEST_CASE("looped_bfs.rank_r_runs_stages_r", "[looped-bfs]") {
  // looped-bfs: rank r runs stages r, r+P, ..., all forwards chunk by chunk, then backwards chunk
  // by chunk in reverse, each chunk's microbatches last first (PyTorch's order)
  // PyTorch's _calculate_single_rank_operations for P=2, V=2, M=3, without its None padding.
  const auto p = gen(2, 3, 2);
  test::check_rank_lines(p, {{0, "0F0,0F1,0F2,2F0,2F1,2F2,2B2,2B1,2B0,0B2,0B1,0B0"},
                             {1, "1F0,1F1,1F2,3F0,3F1,3F2,3B2,3B1,3B0,1B2,1B1,1B0"}});
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

TEST_CASE("looped_bfs.looped_bfs_rejects_chunks_1", "[looped-bfs]") {
  // looped-bfs rejects chunks < 1 and unknown parameters, naming the key
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
// Every rank holds every microbatch (in flight counts microbatches) and all V*M stashes at its
// peak: GPipe's memory, V times over.
TEST_CASE("looped_bfs.looped_bfs_makespan_v_m", "[looped-bfs][closed_form]") {
  // looped-bfs makespan = (V*M + P-1)(f+b) for M >= P, peak in-flight M, V*M stashes on every rank
  const double f = 1.0, b = 2.5;
  for (int P : {1, 2, 3, 4}) {
    for (int V : {1, 2, 3}) {
      for (int M : {P, P + 1, 2 * P + 1}) {
        const auto prog = schedules::lower(gen(P, M, V), {"async", {{"prefetch", -1}}});
        auto o = test::uniform(P * V, f, b);
        o.memory.activation_bytes = 100;
        o.memory.static_bytes = 3;
        const auto r = test::run(prog, o);
        INFO("P=" << P << " V=" << V << " M=" << M);
        REQUIRE_FALSE(r.deadlock);
        REQUIRE(r.errors.empty());
        CHECK(r.makespan == Approx((V * M + P - 1) * (f + b)));
        for (const auto& m : r.per_rank) {
          CHECK(m.peak_inflight == M);
          CHECK(m.peak_memory_bytes == V * 3 + V * M * 100);
        }
      }
    }
  }
}

// Which comm styles run it: async with prefetch "all" always; the others only for small M.
// - blocking, batched (rendezvous sends), async-send (a forward send waited before the next
//   forward): rank P-1's forward of microbatch 0 goes round the ring to rank 0's next chunk, whose
//   receive rank 0 posts only after all M forwards of its first chunk; rank r, waiting for rank
//   r+1 to take microbatch P-1-r, has sent it the P-1-r earlier ones. Rank 0 reaches microbatch
//   P-1 only when M >= P: then rank r is blocked sending microbatch P-1-r to rank r+1 mod P.
// - async with prefetch k: a rank waits its sent gradient before its next backward and posts a
//   receive k compute ops before its consumer. Rank 0's first backward of its last chunk sends to
//   rank P-1's chunk below, which rank P-1 receives only k ops before it gets there, after its own
//   M backwards of the last chunk; the wave between them holds (k+2) microbatches per rank. When
//   M >= (k+2)P it is full: rank 0 waits on its send of microbatch M-1 to rank P-1, and rank
//   r >= 1 on its send of microbatch M-1-(k+2)r to rank r-1.
TEST_CASE("looped_bfs.forward_ring_deadlock_rendezvous_forward", "[looped-bfs][deadlock]") {
  // looped-bfs: forward-ring deadlock with rendezvous forward sends when V >= 2 and M >= P,
  // backward-ring deadlock under async prefetch k when M >= (k+2)P, prefetch all runs
  for (const auto& lowering : test::all_lowerings()) {
    const bool async = lowering.style == "async";
    const auto k = lowering.params.get("prefetch");
    for (int P : {1, 2, 3, 4}) {
      for (int V : {1, 2, 3}) {
        for (int M = 1; M <= 4 * P + 1; ++M) {
          const auto compute = gen(P, M, V);
          if (!test::accepts(lowering, compute)) continue;  // megatron models 1F1B only
          const auto r = test::run(schedules::lower(compute, lowering), test::uniform(P * V, 1, 2));
          INFO(test::describe(lowering) << " P=" << P << " V=" << V << " M=" << M);
          CHECK(r.errors.empty());
          const bool ring = P >= 2 && V >= 2;
          const bool forward_cycle = ring && !async && M >= P;
          const bool backward_cycle = ring && async && k >= 0 && M >= (k + 2) * P;
          REQUIRE(static_cast<bool>(r.deadlock) == (forward_cycle || backward_cycle));
          if (!r.deadlock) continue;
          REQUIRE(r.deadlock->cycles.size() == 1);
          const auto& c = r.deadlock->cycles[0];
          REQUIRE(c.size() == static_cast<std::size_t>(P));
          for (std::size_t i = 0; i < c.size(); ++i) {
            const auto& b = c[i];
            std::string send;
            if (forward_cycle) {  // the cycle lists ranks 0, 1, ..., P-1
              const int rank = static_cast<int>(i);
              CHECK(b.rank == rank);
              CHECK(b.peer == (rank + 1) % P);
              send = std::to_string(rank) + "SEND_F" + std::to_string(P - 1 - rank);
            } else {  // ranks 0, P-1, P-2, ..., 1
              const int rank = i == 0 ? 0 : P - static_cast<int>(i);
              CHECK(b.rank == rank);
              CHECK(b.peer == (rank + P - 1) % P);
              const int mb = M - 1 - static_cast<int>(k + 2) * rank;
              send = std::to_string((V - 1) * P + rank) + "SEND_B" + std::to_string(mb);
            }
            if (lowering.style == "blocking" || lowering.style == "batched")
              CHECK(b.op == send);
            else  // blocked in a WAIT on the send's request
              CHECK(b.waiting_for.rfind(send + "#", 0) == 0);
          }
        }
      }
    }
  }
}
