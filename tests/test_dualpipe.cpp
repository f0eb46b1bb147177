// dualpipe (DeepSeek-V3's DualPipe): the exact per-rank order of deepseek-ai/DualPipe's eight
// steps, routes, parameter checks, the README's bubble and activation figures, deadlock verdicts.
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "helpers.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/schedules/error.hpp"
#include "ppsim/sim/analysis.hpp"

using namespace ppsim;
using schedules::Op;
using schedules::OpKind;
using schedules::Program;

namespace {

Program gen(int P, int M) {
  return schedules::generate("dualpipe", {{"ranks", P}, {"microbatches", M}});
}

// One rank's compute ops flattened: a pair contributes its F then its B.
std::vector<Op> flat(const Program& p, int r) {
  std::vector<Op> out;
  for (const Op& op : p.ops(r)) {
    if (schedules::is_composite(op.kind)) {
      for (const Op& part : p.parts(r, op)) out.push_back(part);
    } else if (schedules::is_compute(op.kind)) {
      out.push_back(op);
    }
  }
  return out;
}

}  // namespace

// Derived by hand from dualpipe.py's step() for each rank: phase 0 is the direction entering at
// the rank's own end (down for ranks < P/2, up for the others); h = min(r, P-1-r).
//   1: 2(P/2-h-1) F0   2: h+1 x (F0 F1)   3: P/2-h-1 x (I1 W1 F1)
//   4: M/2-P+h+1 x ((F0;B1) (F1;B0)), the middle ranks' first (F0;B1) not overlapped
//   5: P/2-h-1 x (B1 (F1;B0))   6: h+1 x (B1 B0), split into I from the middle of the step on
//   7: P/2-h-1 x (W I0)   8: h+1 x W, the Ws in the order their Is ran.
// Stages: rank r runs stage r (down, microbatches 0..M/2-1) and 2P-1-r (up, M/2..M-1).
TEST_CASE("dualpipe.exact_per_rank_order_dualpipe", "[dualpipe]") {
  // dualpipe: exact per-rank order of DualPipe's eight steps, P=2 M=4, P=4 M=8, P=6 M=12
  const auto p2 = gen(2, 4);
  test::check_rank_lines(p2, {{0, "0F0,3F2,0F1,3B2,(3F3;0B0)OVERLAP_F_B,3B3,0I1,0W1"},
                              {1, "2F2,1F0,2F3,1B0,(1F1;2B2)OVERLAP_F_B,1B1,2I3,2W3"}});

  const auto p4 = gen(4, 8);
  test::check_rank_lines(p4, {{0,
                               "0F0,0F1,0F2,7F4,7I4,7W4,7F5,(0F3;7B5)OVERLAP_F_B,(7F6;0B0)OVERLAP_"
                               "F_B,7B6,(7F7;0B1)OVERLAP_F_B,7B7,0I2,0W2,0I3,0W3"},
                              {1,
                               "1F0,6F4,1F1,6F5,1F2,6B4,(6F6;1B0)OVERLAP_F_B,(1F3;6B5)OVERLAP_F_B,("
                               "6F7;1B1)OVERLAP_F_B,6B6,1B2,6I7,1I3,6W7,1W3"},
                              {2,
                               "5F4,2F0,5F5,2F1,5F6,2B0,(2F2;5B4)OVERLAP_F_B,(5F7;2B1)OVERLAP_F_B,("
                               "2F3;5B5)OVERLAP_F_B,2B2,5B6,2I3,5I7,2W3,5W7"},
                              {3,
                               "4F4,4F5,4F6,3F0,3I0,3W0,3F1,(4F7;3B1)OVERLAP_F_B,(3F2;4B4)OVERLAP_"
                               "F_B,3B2,(3F3;4B5)OVERLAP_F_B,3B3,4I6,4W6,4I7,4W7"}});
  // P=6, M=12: rank 0 runs steps 1, 3, 5 and 7 (h = 0); rank 2 is a middle rank with h = 2 even,
  // so step 6 splits from its second iteration's B0 on.
  const auto p6 = gen(6, 12);
  test::check_rank_lines(p6, {{0,
                               "0F0,0F1,0F2,0F3,0F4,11F6,11I6,11W6,11F7,11I7,11W7,11F8,(0F5;11B8)"
                               "OVERLAP_F_B,(11F9;0B0)OVERLAP_F_B,11B9,(11F10;0B1)OVERLAP_F_B,"
                               "11B10,(11F11;0B2)OVERLAP_F_B,11B11,0I3,0W3,0I4,0W4,0I5,0W5"},
                              {2,
                               "2F0,9F6,2F1,9F7,2F2,9F8,2F3,9B6,(9F9;2B0)OVERLAP_F_B,(2F4;9B7)"
                               "OVERLAP_F_B,(9F10;2B1)OVERLAP_F_B,(2F5;9B8)OVERLAP_F_B,(9F11;2B2)"
                               "OVERLAP_F_B,9B9,2B3,9B10,2I4,9I11,2I5,2W4,9W11,2W5"}});
  // The class name is an alias.
  CHECK(schedules::generate("DualPipe", {{"ranks", 4}, {"microbatches", 8}}).to_text() ==
        p4.to_text());
}

TEST_CASE("dualpipe.two_stages_per_rank_parameters", "[dualpipe]") {
  // dualpipe: two stages per rank (parameters 2x), two routes, each microbatch runs every stage of
  // its route once: one F, and one B or an I followed later by its W
  for (int P : {2, 4, 6, 8, 10}) {
    for (int M : {2 * P, 2 * P + 2, 3 * P, 4 * P + 2}) {
      if (M % 2) continue;
      const auto p = gen(P, M);
      INFO("P=" << P << " M=" << M);
      REQUIRE(p.stages() == 2 * P);
      const auto& routes = p.routes();
      REQUIRE(routes.count() == 2);
      for (int s = 0; s < P; ++s) {
        CHECK(routes.path(0)[static_cast<std::size_t>(s)] == s);
        CHECK(routes.path(1)[static_cast<std::size_t>(s)] == P + s);
        CHECK(p.rank_of(s) == s);              // down: stage s on rank s
        CHECK(p.rank_of(P + s) == P - 1 - s);  // up: stage P+s on rank P-1-s
      }
      for (int r = 0; r < P; ++r) CHECK(p.chunks_on(r) == 2);
      for (int m = 0; m < M; ++m) CHECK(routes.route_of(m) == (m < M / 2 ? 0 : 1));

      std::map<std::pair<int, int>, std::string> seen;  // (stage, mb) -> kinds in order
      for (int r = 0; r < P; ++r)
        for (const Op& op : flat(p, r)) {
          INFO("rank " << r << " op " << p.op_text(r, op));
          CHECK(p.rank_of(op.stage) == r);
          CHECK(routes.on_route(op.stage, op.microbatch));
          seen[{op.stage, op.microbatch}] += std::string(schedules::to_string(op.kind));
        }
      // Every (stage on the route, microbatch) exactly once, nothing else.
      CHECK(seen.size() == static_cast<std::size_t>(P * M));
      for (const auto& [key, kinds] : seen) {
        INFO("stage " << key.first << " mb " << key.second);
        CHECK((kinds == "FB" || kinds == "FIW"));
      }
    }
  }
}

TEST_CASE("dualpipe.dualpipe_rejects_odd_p_odd", "[dualpipe]") {
  // dualpipe rejects odd P, odd M and M < 2P, saying which rule failed
  auto error = [](int P, int M) {
    try {
      gen(P, M);
    } catch (const schedules::ParameterError& e) {
      return e.key() + ": " + e.what();
    }
    return std::string("none");
  };
  CHECK_THAT(error(3, 6), Catch::Matchers::StartsWith("ranks: ") &&
                              Catch::Matchers::Contains("even number of ranks (got 3)"));
  CHECK_THAT(error(4, 9), Catch::Matchers::StartsWith("microbatches: ") &&
                              Catch::Matchers::Contains("even number of microbatches (got 9)"));
  CHECK_THAT(error(4, 6), Catch::Matchers::StartsWith("microbatches: ") &&
                              Catch::Matchers::Contains("microbatches >= 2 * ranks = 8 (got 6)"));
  CHECK_THAT(error(1, 2), Catch::Matchers::StartsWith("ranks: "));  // declared minimum 2
  CHECK(error(2, 4) == "none");
  CHECK(error(4, 8) == "none");
}

namespace {
// F = I = W = a (so B = 2a, the zero-bubble paper's assumption), overlapped pair X, free comm.
sim::SimOptions costs(int P, double a, double X) {
  auto o = test::uniform(2 * P, a, 2 * a);
  for (auto& c : o.costs.stages) c.overlapped_fb = X;
  return o;
}
}  // namespace

// The README's table: DualPipe bubble (PP/2-1)(F&B + B - 3W), against 1F1B's (PP-1)(F+B). As for
// 1F1B, "bubble" is a rank's idle time, makespan - busy, with free communication. It is exact
// under the assumption F = I = W (B = F + W = 2W) and 2F <= F&B <= F + B (the pair overlaps at
// most down to two forwards' time): the middle ranks P/2-1 and P/2 idle exactly that long and no
// rank longer. Outside it the figure is not exact (e.g. F=1, B=3, W=1, F&B=3, P=8: 8, not 9).
// Busy time: a rank runs M forwards and M backwards, of which `pairs` F+B are overlapped; the
// middle ranks overlap M-P-1 pairs (their first steady F0/B1 is not overlapped).
TEST_CASE("dualpipe.dualpipe_bubble_p_2_1", "[dualpipe][closed_form]") {
  // dualpipe bubble = (P/2-1)(F&B + B - 3W) on the middle ranks, <= on all, F = I = W
  for (int P : {2, 4, 6, 8, 10}) {
    for (int M : {2 * P, 2 * P + 2, 4 * P + 6}) {
      for (double a : {1.0, 0.5, 1.25}) {
        for (double x : {2.0, 2.5, 3.0}) {  // F&B in units of F, from 2F up to F + B
          const double F = a, B = 2 * a, W = a, X = x * a;
          const auto prog = schedules::lower(gen(P, M), {"async", {{"prefetch", 1}}});
          const auto r = test::run(prog, costs(P, a, X));
          INFO("P=" << P << " M=" << M << " F=" << F << " F&B=" << X);
          REQUIRE_FALSE(r.deadlock);
          REQUIRE(r.errors.empty());
          const double bubble = (P / 2 - 1) * (X + B - 3 * W);
          const double mid_busy = M * (F + B) - (M - P - 1) * (F + B - X);
          CHECK(r.per_rank[static_cast<std::size_t>(P / 2 - 1)].busy == Approx(mid_busy));
          CHECK(r.per_rank[static_cast<std::size_t>(P / 2 - 1)].idle ==
                Approx(bubble).margin(1e-9));
          CHECK(r.per_rank[static_cast<std::size_t>(P / 2)].idle == Approx(bubble).margin(1e-9));
          CHECK(r.makespan == Approx(mid_busy + bubble));
          for (const auto& m : r.per_rank) CHECK(m.idle <= bubble + 1e-9);
        }
      }
    }
  }
}

// The README's activation column: PP+1 microbatches' activations (one stage's worth each) per
// rank, against 1F1B's PP on rank 0. A microbatch is in flight from its F until its B, or its W
// when split. Each rank runs P forwards before its first backward, and its first overlapped pair
// (or the middle ranks' F0 before B1) starts one more forward before the backward frees one.
// Parameters 2x: static_bytes counts both stages a rank holds.
TEST_CASE("dualpipe.peak_flight_p_1_rank", "[dualpipe][closed_form]") {
  // dualpipe activations: peak in-flight P+1 on every rank, static memory 2x
  for (int P : {2, 4, 6, 8}) {
    for (int M : {2 * P, 2 * P + 2, 4 * P}) {
      auto o = costs(P, 1, 2.5);
      o.memory.activation_bytes = 1000;
      o.memory.weight_stash_bytes = 1000;  // everything held until W, as in-flight counts it
      o.memory.static_bytes = 7;
      for (const auto& lowering : {schedules::LoweringOptions{"async", {{"prefetch", 1}}},
                                   schedules::LoweringOptions{"async", {{"prefetch", -1}}}}) {
        const auto r = test::run(schedules::lower(gen(P, M), lowering), o);
        INFO("P=" << P << " M=" << M << " " << test::describe(lowering));
        REQUIRE_FALSE(r.deadlock);
        for (const auto& m : r.per_rank) {
          CHECK(m.peak_inflight == P + 1);
          CHECK(m.peak_memory_bytes == 2 * 7 + (P + 1) * 1000);
        }
      }
    }
  }
}

TEST_CASE("dualpipe.dualpipe_transfers_follow_microbatch_s", "[dualpipe][routes]") {
  // dualpipe transfers follow each microbatch's route: down for the first half, up for the second
  const int P = 4, M = 8;
  const auto prog = schedules::lower(gen(P, M), {"async", {{"prefetch", 1}}});
  auto o = costs(P, 1, 2.5);
  o.network.boundary_bytes = 10;
  record::Trace trace;
  record::TraceRecorder recorder(trace);
  const auto r = sim::simulate(prog, o, &recorder);
  REQUIRE_FALSE(r.deadlock);
  // Each microbatch crosses P-1 boundaries forward and P-1 backward.
  REQUIRE(trace.transfers.size() == static_cast<std::size_t>(2 * (P - 1) * M));
  test::for_each_transfer(prog, trace, [&](const record::TransferEvent& t, const Op& send) {
    const bool down = (send.kind == OpKind::SEND_F) == (send.microbatch < M / 2);
    CHECK(t.dst_rank == t.src_rank + (down ? 1 : -1));
  });
}

// DualPipe posts every transfer with batch_isend_irecv, i.e. asynchronously. Where a send blocks
// until its receive is posted (blocking, batched: rendezvous sends; async-send: the forward send's
// WAIT before the next forward), the two middle ranks deadlock at once: in step 2 rank P/2-1 sends
// its first down forward (microbatch 0) to rank P/2 while rank P/2 sends its first up forward
// (microbatch M/2) to rank P/2-1, and each posts the receive for the other's only afterwards.
// Eager sends no larger than eager_limit complete locally, and every style runs.
TEST_CASE("dualpipe.async_runs_prefetch_styles_rendezvous", "[dualpipe][deadlock]") {
  // dualpipe: async runs at every prefetch, the styles with rendezvous sends deadlock in the
  // middle ranks' first forward sends, eager sends run every style
  for (const auto& lowering : test::all_lowerings()) {
    for (int P : {2, 4, 6, 8}) {
      for (int M : {2 * P, 2 * P + 2, 6 * P}) {
        const auto compute = gen(P, M);
        if (!test::accepts(lowering, compute)) continue;  // megatron models 1F1B only
        const auto prog = schedules::lower(compute, lowering);
        INFO(test::describe(lowering) << " P=" << P << " M=" << M);
        auto o = costs(P, 1, 2.5);
        o.network.boundary_bytes = 100;
        const auto r = test::run(prog, o);
        CHECK(r.errors.empty());
        if (lowering.style == "async") {
          CHECK_FALSE(r.deadlock);
        } else {
          const auto& c = test::two_rank_cycle(r);
          const int lo = P / 2 - 1, hi = P / 2;
          CHECK(c[0].rank == lo);
          CHECK(c[0].peer == hi);
          CHECK(c[1].rank == hi);
          CHECK(c[1].peer == lo);
          const std::string down = std::to_string(lo) + "SEND_F0";
          const std::string up = std::to_string(3 * P / 2 - 1) + "SEND_F" + std::to_string(M / 2);
          if (lowering.style == "async-send") {
            CHECK(c[0].waiting_for.rfind(down + "#", 0) == 0);
            CHECK(c[1].waiting_for.rfind(up + "#", 0) == 0);
          } else {
            CHECK(c[0].op == down);
            CHECK(c[1].op == up);
          }
        }
        o.network.eager_limit = 100;
        const auto eager = test::run(prog, o);
        CHECK_FALSE(eager.deadlock);
        CHECK(eager.errors.empty());
      }
    }
  }
}
