// zbv: PyTorch's ScheduleZBVZeroBubble order, the V placement, zero idle inside each rank's window
// when F = I = W with free communication, and the activation peak P * M_B.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include "error_of.hpp"
#include "helpers.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/config/sweep.hpp"
#include "ppsim/schedules/error.hpp"
#include "ppsim/sim/analysis.hpp"
#include "v_cycle.hpp"

using namespace ppsim;
using schedules::OpKind;

namespace {
schedules::Program zbv(int P, int M) {
  return schedules::generate("zbv", {{"ranks", P}, {"microbatches", M}});
}
}  // namespace

TEST_CASE("zbv.rank_r_holds_stage_r", "[zbv]") {
  // zbv: rank r holds stage r (chunk 0) and stage 2P-1-r (chunk 1)
  for (int P = 1; P <= 6; ++P) {
    const auto p = zbv(P, 2 * P);
    REQUIRE(p.stages() == 2 * P);
    for (int r = 0; r < P; ++r) {
      CHECK(p.place(r) == schedules::StagePlace{r, 0});
      CHECK(p.place(2 * P - 1 - r) == schedules::StagePlace{r, 1});
    }
  }
}

// Expected lines written by following ScheduleZBVZeroBubble._calculate_single_rank_operations by
// hand (warm-up 2(P-r)-1 F0, r x (F1 F0), P-r x (F1 I1 W1); steady F0 I0 W0 F1 I1 W1; cool-down
// r x (I0 I1), P-r x (I0 W0), remaining W1 then W0), with PyTorch's None entries dropped.
TEST_CASE("zbv.per_rank_order_equals_pytorch", "[zbv]") {
  // zbv: per-rank order equals PyTorch's ScheduleZBVZeroBubble
  test::check_v_orders(
      "zbv", {
                 {2,
                  4,
                  {"0F0,0F1,0F2,3F0,3I0,3W0,3F1,3I1,3W1,0F3,0I0,0W0,3F2,3I2,3W2,0I1,0W1,3F3,3I3,"
                   "3W3,0I2,0W2,0I3,0W3",
                   "1F0,2F0,1F1,2F1,2I0,2W0,1F2,1I0,1W0,2F2,2I1,2W1,1F3,1I1,1W1,2F3,2I2,2W2,1I2,"
                   "2I3,1I3,1W2,2W3,1W3"}},
                 {3,
                  5,
                  {"0F0,0F1,0F2,0F3,0F4,5F0,5I0,5W0,5F1,5I1,5W1,5F2,5I2,5W2,0I0,0W0,5F3,5I3,5W3,"
                   "0I1,0W1,5F4,5I4,5W4,0I2,0W2,0I3,0W3,0I4,0W4",
                   "1F0,1F1,1F2,4F0,1F3,4F1,4I0,4W0,4F2,4I1,4W1,1F4,1I0,1W0,4F3,4I2,4W2,1I1,1W1,"
                   "4F4,4I3,4W3,1I2,4I4,1I3,1W2,1I4,1W3,4W4,1W4",
                   "2F0,3F0,2F1,3F1,2F2,3F2,3I0,3W0,2F3,2I0,2W0,3F3,3I1,3W1,2F4,2I1,2W1,3F4,3I2,"
                   "3W2,2I2,3I3,2I3,3I4,2I4,2W2,3W3,3W4,2W3,2W4"}},
                 // M < 2P-1: PyTorch plans 2P-1 microbatches and drops the missing ones.
                 {4,
                  3,
                  {"0F0,0F1,0F2,7F0,7I0,7W0,7F1,7I1,7W1,7F2,7I2,7W2,0I0,0W0,0I1,0W1,0I2,0W2",
                   "1F0,1F1,1F2,6F0,6F1,6I0,6W0,6F2,6I1,6W1,6I2,6W2,1I0,1W0,1I1,1W1,1I2,1W2",
                   "2F0,2F1,2F2,5F0,5F1,5F2,5I0,5W0,5I1,5W1,2I0,2W0,5I2,5W2,2I1,2W1,2I2,2W2",
                   "3F0,4F0,3F1,4F1,3F2,4F2,4I0,4W0,3I0,3W0,4I1,4W1,3I1,3W1,4I2,4W2,3I2,3W2"}},
                 {4,
                  8,
                  {"0F0,0F1,0F2,0F3,0F4,0F5,0F6,7F0,7I0,7W0,7F1,7I1,7W1,7F2,7I2,7W2,7F3,7I3,7W3,"
                   "0F7,0I0,0W0,7F4,7I4,7W4,0I1,0W1,7F5,7I5,7W5,0I2,0W2,7F6,7I6,7W6,0I3,0W3,7F7,"
                   "7I7,7W7,0I4,0W4,0I5,0W5,0I6,0W6,0I7,0W7",
                   "1F0,1F1,1F2,1F3,1F4,6F0,1F5,6F1,6I0,6W0,6F2,6I1,6W1,6F3,6I2,6W2,1F6,1I0,1W0,"
                   "6F4,6I3,6W3,1F7,1I1,1W1,6F5,6I4,6W4,1I2,1W2,6F6,6I5,6W5,1I3,1W3,6F7,6I6,6W6,"
                   "1I4,6I7,1I5,1W4,1I6,1W5,1I7,1W6,6W7,1W7",
                   "2F0,2F1,2F2,5F0,2F3,5F1,2F4,5F2,5I0,5W0,5F3,5I1,5W1,2F5,2I0,2W0,5F4,5I2,5W2,"
                   "2F6,2I1,2W1,5F5,5I3,5W3,2F7,2I2,2W2,5F6,5I4,5W4,2I3,2W3,5F7,5I5,5W5,2I4,5I6,"
                   "2I5,5I7,2I6,2W4,2I7,2W5,5W6,5W7,2W6,2W7",
                   "3F0,4F0,3F1,4F1,3F2,4F2,3F3,4F3,4I0,4W0,3F4,3I0,3W0,4F4,4I1,4W1,3F5,3I1,3W1,"
                   "4F5,4I2,4W2,3F6,3I2,3W2,4F6,4I3,4W3,3F7,3I3,3W3,4F7,4I4,4W4,3I4,4I5,3I5,4I6,"
                   "3I6,4I7,3I7,3W4,4W5,4W6,4W7,3W5,3W6,3W7"}},
             });
  // The PyTorch class name is an alias.
  CHECK(
      schedules::generate("ScheduleZBVZeroBubble", {{"ranks", 4}, {"microbatches", 8}}).to_text() ==
      zbv(4, 8).to_text());
}

TEST_CASE("zbv.rank_runs_f_i_w", "[zbv]") {
  // zbv: each rank runs F, I and W once for each of its two stages and M microbatches
  for (int P = 1; P <= 8; ++P) {
    for (int M = 1; M <= 4 * P + 1; ++M) {
      const auto p = zbv(P, M);
      for (int r = 0; r < P; ++r) {
        INFO("P=" << P << " M=" << M << " rank " << r);
        std::set<std::tuple<int, int, int>> seen;
        for (const auto& op : p.ops(r)) {
          REQUIRE((op.kind == OpKind::F || op.kind == OpKind::I || op.kind == OpKind::W));
          REQUIRE((op.stage == r || op.stage == 2 * P - 1 - r));
          REQUIRE(op.microbatch < M);
          CHECK(seen.insert({static_cast<int>(op.kind), op.stage, op.microbatch}).second);
        }
        CHECK(seen.size() == 6 * static_cast<std::size_t>(M));
      }
    }
  }
  // Far more ranks than microbatches: the rounds PyTorch plans for the missing microbatches are
  // skipped, and every rank still runs its 6M ops (warm-up order: F0, then F1 for the top ranks).
  const auto wide = zbv(3000, 1);
  for (int r : {0, 1, 1500, 2999}) {
    const auto line = test::rank_line(wide, r);
    const std::string a = std::to_string(r), b = std::to_string(5999 - r);
    CHECK(line == a + "F0," + b + "F0," + b + "I0," + b + "W0," + a + "I0," + a + "W0");
  }
}

// ZB-V's claim (Qi et al. section 6): with T_F = T_I = T_W and free communication the steady
// state has no bubble. Precisely: rank r's first compute op starts at r*T (the V fills one stage
// per T) and from there it computes without a gap to its last W: last compute end - first compute
// start == busy = 6*M*T on every rank. The makespan is 6*M*T + (P-1)*T, every rank idles (P-1)*T
// (the fill), and bubble_vs_ideal = (P-1)/(6M). This needs M >= 2P-1 (enough microbatches to fill
// the V) and communication that never holds a sender: zero latency and bandwidth cost, and either
// eager sends or receives posted at least 2 compute ops ahead. With rendezvous sends and receives
// posted 1 op ahead (prefetch 1, the default) a rank that sent a gradient waits for it before its
// next backward, and the receiver posts it only one op before its own I: P >= 3 then loses time.
TEST_CASE("zbv.f_i_w_free_communication", "[zbv][closed_form]") {
  // zbv: F = I = W, free communication, M >= 2P-1: every rank computes without a gap from r*T to
  // r*T + 6MT
  const double T = 1.0;
  struct Comm {
    int prefetch;
    bool eager;
  };
  for (const Comm comm : {Comm{2, false}, Comm{-1, false}, Comm{0, true}, Comm{1, true}}) {
    for (int P = 2; P <= 8; ++P) {
      for (int M : {2 * P - 1, 2 * P, 3 * P, 4 * P}) {
        const auto prog = test::lowered("zbv", P, M, 2, "async", comm.prefetch);
        auto o = test::uniform(2 * P, T, 2 * T);
        o.network.eager_limit = comm.eager ? 1 : 0;  // boundary_bytes = 0: every send is eager
        record::Trace trace;
        record::TraceRecorder recorder(trace);
        const auto r = sim::simulate(prog, o, &recorder);
        INFO("prefetch=" << comm.prefetch << " eager=" << comm.eager << " P=" << P << " M=" << M);
        REQUIRE_FALSE(r.deadlock);
        REQUIRE(r.errors.empty());
        CHECK(r.makespan == Approx(6 * M * T + (P - 1) * T));
        CHECK(r.bubble_vs_ideal == Approx(double(P - 1) / (6 * M)).margin(1e-12));
        std::vector<double> first(static_cast<std::size_t>(P), 1e300), last(first.size(), 0.0);
        for (const auto& sp : trace.spans) {
          if (sp.kind != record::SpanKind::compute) continue;
          auto& f = first[static_cast<std::size_t>(sp.rank)];
          auto& l = last[static_cast<std::size_t>(sp.rank)];
          f = std::min(f, sp.start);
          l = std::max(l, sp.end);
        }
        for (const auto& m : r.per_rank) {
          const auto rank = static_cast<std::size_t>(m.rank);
          CHECK(m.busy == Approx(6 * M * T));
          CHECK(m.idle == Approx((P - 1) * T));
          CHECK(first[rank] == Approx(m.rank * T));
          CHECK(last[rank] - first[rank] == Approx(m.busy));
        }
      }
    }
  }
}

TEST_CASE("zbv.rendezvous_sends_prefetch_1_ranks", "[zbv][closed_form]") {
  // zbv: with rendezvous sends and prefetch 1, ranks P >= 3 wait on gradient sends
  for (int P = 2; P <= 6; ++P) {
    const int M = 3 * P;
    const auto r =
        sim::simulate(test::lowered("zbv", P, M, 2, "async", 1), test::uniform(2 * P, 1, 2));
    INFO("P=" << P);
    REQUIRE_FALSE(r.deadlock);
    if (P == 2)
      CHECK(r.makespan == Approx(6 * M + 1));
    else
      CHECK(r.makespan > 6 * M + (P - 1));
  }
}

// A chunk holds half a rank's layers, so M_B (one microbatch's activations of a whole 1F1B stage)
// is two stashes. Peak live stashes on rank r: min(2P, 2M, M+r+1), i.e. 2P = P * M_B once
// M >= 2P-1. I and W of a microbatch are adjacent whenever a forward follows, so the peak does not
// depend on how much of the stash W keeps.
TEST_CASE("zbv.peak_activation_rank_r_min", "[zbv][memory]") {
  // zbv: peak activation on rank r = min(2P, 2M, M+r+1) stashes (P * M_B for M >= 2P-1)
  const std::int64_t A = 1000, S = 7;
  for (std::int64_t weight_stash : {std::int64_t{0}, A / 2, A}) {
    for (int P = 1; P <= 8; ++P) {
      for (int M = 1; M <= 4 * P; ++M) {
        const auto r = test::simulate_v_memory("zbv", P, M, A, weight_stash, S);
        INFO("P=" << P << " M=" << M << " weight_stash=" << weight_stash);
        REQUIRE_FALSE(r.deadlock);
        for (const auto& m : r.per_rank) {
          const int stashes = std::min({2 * P, 2 * M, M + m.rank + 1});
          CHECK(m.peak_memory_bytes == 2 * S + stashes * A);
          if (M >= 2 * P - 1) CHECK(stashes == 2 * P);
        }
      }
    }
  }
}

// Forward activations cross each link in both directions (chunk 0 down, chunk 1 up). Rank P-1 turns
// microbatch 0 around and sends stage P's output back to rank P-2, which is sending stage P-2's
// output of microbatch 1 down to it: when forward sends rendezvous before the rank moves on
// (blocking; async-send waits them before the next forward; batched pairs only opposite-direction
// sends), both wait for a receive the other posts later. Only `async` runs zbv; with one
// microbatch there is nothing to cross and every style runs it.
TEST_CASE("zbv.only_async_style_runs_m", "[zbv][deadlock]") {
  // zbv: only the async style runs it for M >= 2, blocking, async-send and batched deadlock
  // between ranks P-2 and P-1 (stage P-2's forward of microbatch 1 against stage P's of microbatch
  // 0)
  for (int P = 1; P <= 6; ++P)
    for (int M : {1, 2, P, 2 * P - 1, 2 * P, 3 * P + 1}) test::check_v_lowerings("zbv", P, M);
}

TEST_CASE("zbv.comm_bytes_2_2p_2", "[zbv]") {
  // zbv: comm_bytes = 2 * (2P-2) * M * boundary_bytes
  for (int P = 1; P <= 6; ++P)
    for (int M : {1, 2, 2 * P, 3 * P}) test::check_v_comm_bytes("zbv", P, M);
}

// PyTorch's ScheduleZBVZeroBubble takes exactly two stages per rank; the declaration says so, and
// the config reader and `ppsim list` read it from there.
TEST_CASE("zbv.zbv_refuses_anything_but_two", "[zbv]") {
  // zbv refuses anything but two chunks per rank, naming the rule
  for (int V : {1, 3, 4}) {
    const auto e = test::error_of<schedules::ParameterError>([&] {
      schedules::generate("zbv", {{"ranks", 4}, {"microbatches", 8}, {"chunks", V}});
    });
    CHECK(e.key() == "chunks");
    CHECK_THAT(e.what(), Catch::Contains("chunks must lie in [2, 2], got " + std::to_string(V)));
  }
  CHECK(schedules::generate("zbv", {{"ranks", 4}, {"microbatches", 8}, {"chunks", 2}}).chunks() ==
        2);
  const auto e = test::error_of<config::ConfigError>([] {
    config::parse_config(nlohmann::json::parse(R"({"schedule": {"kind": "zbv", "ranks": 2,
                                                  "microbatches": 4, "chunks": 3}})"),
                         "zbv.json");
  });
  CHECK_THAT(e.what(), Catch::Contains("key 'schedule.chunks': expected 2 (zbv takes only 2), got "
                                       "number 3"));
}

// Sweeping from a one-chunk config (`ppsim compare configs/1f1b.json --schedules 1f1b,zbv`) runs
// zbv with its two chunks, each costing half a 1F1B stage, so per-rank work stays the same.
TEST_CASE("zbv.zbv_sweep_chunk_config_v", "[zbv][sweep]") {
  // zbv in a sweep from a one-chunk config: V = 2, per-chunk costs halved
  const auto base = config::parse_config(nlohmann::json::parse(R"({
    "schedule": {"kind": "1f1b", "ranks": 4, "microbatches": 8},
    "costs": {"forward": 2.0, "backward_input": 2.0, "backward_weight": 2.0}
  })"),
                                         "base.json");
  const auto configs = config::sweep(base, {{"1f1b", "zbv", "dualpipev"}, {8}, {3}});
  REQUIRE(configs.size() == 3);
  const auto one = sim::analyze(configs[0]);
  for (std::size_t i = 1; i < 3; ++i) {
    INFO(configs[i].name);
    CHECK(config::prepare(configs[i]).program->chunks() == 2);
    const auto r = sim::analyze(configs[i]);
    REQUIRE(r.ok());
    for (std::size_t k = 0; k < 4; ++k)
      CHECK(r.metrics->per_rank[k].busy == Approx(one.metrics->per_rank[k].busy));
  }
}
