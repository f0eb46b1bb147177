// Zero-bubble schedules: ZB-H1 and ZB-H2 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR
// 2024) and PyTorch's ScheduleInterleavedZeroBubble. Exact op orders, the paper's memory formulas,
// unit-time bubbles, its Table 5 bubble rates, and PyTorch's own test artifact.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <optional>
#include <sstream>

#include "helpers.hpp"
#include "ppsim/schedules/error.hpp"

using namespace ppsim;

namespace {

schedules::Program gen(const char* kind, int P, int M, int V = 0) {
  schedules::ScheduleParams params{{"ranks", P}, {"microbatches", M}};
  if (V != 0) params.set("chunks", V);
  return schedules::generate(kind, params);
}

std::string error_key(const char* kind, int P, int M, int V = 0) {
  try {
    gen(kind, P, M, V);
  } catch (const schedules::ParameterError& e) {
    return e.key();
  }
  return "accepted";
}

// F, I and W costs per stage; `backward` of a fused B is I + W.
sim::SimOptions costs(int stages, double f, double i, double w, double latency = 0) {
  sim::SimOptions o;
  sim::StageCost c;
  c.forward = f;
  c.backward_input = i;
  c.backward_weight = w;
  c.backward = i + w;
  o.costs = sim::CostModel::uniform(stages, c);
  o.network.latency = latency;
  return o;
}

schedules::Program lowered(const schedules::Program& p, std::string style = "async",
                           std::int64_t prefetch = 1) {
  schedules::LoweringOptions l{std::move(style), {}};
  if (l.style == "async") l.params.set("prefetch", prefetch);
  return schedules::lower(p, l);
}

// The paper's per-rank time: from a rank's first compute op start to its last compute op end,
// the longest over ranks (its scheduler's "stage time"; communication ops do not count).
double longest_rank_span(const schedules::Program& compute, const sim::SimOptions& o,
                         std::int64_t prefetch = 1) {
  const auto p = lowered(compute, "async", prefetch);
  record::Trace trace;
  record::TraceRecorder rec(trace);
  const auto r = sim::simulate(p, o, &rec);
  REQUIRE_FALSE(r.deadlock);
  REQUIRE(schedules::validate(p).empty());
  std::vector<double> first(static_cast<std::size_t>(p.ranks()), 1e300);
  std::vector<double> last(static_cast<std::size_t>(p.ranks()), -1e300);
  for (const auto& s : trace.spans) {
    if (s.kind != record::SpanKind::compute) continue;
    const auto u = static_cast<std::size_t>(s.rank);
    first[u] = std::min(first[u], s.start);
    last[u] = std::max(last[u], s.end);
  }
  double longest = 0;
  for (std::size_t u = 0; u < first.size(); ++u) longest = std::max(longest, last[u] - first[u]);
  return longest;
}

// Per-rank peak memory with the given stash sizes and no communication buffers.
std::vector<std::int64_t> peaks(const schedules::Program& compute, std::int64_t m_b,
                                std::int64_t m_w) {
  auto o = costs(compute.stages(), 1, 1, 1);
  o.memory.activation_bytes = m_b;
  o.memory.weight_stash_bytes = m_w;
  const auto r = sim::simulate(lowered(compute), o);
  REQUIRE_FALSE(r.deadlock);
  std::vector<std::int64_t> out;
  for (const auto& rank : r.per_rank) out.push_back(rank.peak_memory_bytes);
  return out;
}

// PyTorch CSV row -> our text: its "B" in a zero-bubble schedule is the input backward (I) in
// the artifact's format; a blank cell is an idle step with no op.
std::string from_pytorch_row(const std::string& row) {
  std::string out, cell;
  std::istringstream in(row);
  while (std::getline(in, cell, ',')) {
    if (cell.empty()) continue;
    if (const auto b = cell.find('B'); b != std::string::npos) cell[b] = 'I';
    if (!out.empty()) out += ',';
    out += cell;
  }
  return out;
}

}  // namespace

// ---- ZB-H1 -------------------------------------------------------------------------------------

TEST_CASE("zero_bubble.rank_r_warms_up_p", "[zb][generators]") {
  // zb-h1: rank r warms up with P-r-1 forwards, then F, I, W with each W r steps late
  const auto p = gen("zb-h1", 4, 6);
  test::check_rank_lines(
      p, {{0, "0F0,0F1,0F2,0F3,0I0,0W0,0F4,0I1,0W1,0F5,0I2,0W2,0I3,0W3,0I4,0W4,0I5,0W5"},
          {1, "1F0,1F1,1F2,1I0,1F3,1I1,1W0,1F4,1I2,1W1,1F5,1I3,1W2,1I4,1W3,1I5,1W4,1W5"},
          {2, "2F0,2F1,2I0,2F2,2I1,2F3,2I2,2W0,2F4,2I3,2W1,2F5,2I4,2W2,2I5,2W3,2W4,2W5"},
          {3, "3F0,3I0,3F1,3I1,3F2,3I2,3F3,3I3,3W0,3F4,3I4,3W1,3F5,3I5,3W2,3W3,3W4,3W5"}});
  // F and I in the order of 1F1B (its B read as I).
  for (int P = 1; P <= 6; ++P)
    for (int M = 1; M <= 9; ++M) {
      const auto zb = gen("zb-h1", P, M), ref = gen("1f1b", P, M);
      for (int r = 0; r < P; ++r) {
        schedules::OpList fi;
        for (auto op : zb.ops(r)) {
          if (op.kind == schedules::OpKind::W) continue;
          if (op.kind == schedules::OpKind::I) op.kind = schedules::OpKind::B;
          fi.push_back(op);
        }
        CHECK(fi == ref.ops(r));
      }
    }
}

TEST_CASE("zero_bubble.zb_h1_peak_memory_rank", "[zb][memory]") {
  // zb-h1 peak memory on rank i (1-based) = (P-i+1) M_B + (i-1) M_W when M >= P
  const std::int64_t m_b = 1000, m_w = 300;
  for (int P = 1; P <= 8; ++P)
    for (int M = P; M <= 3 * P + 1; ++M) {
      INFO("P=" << P << " M=" << M);
      const auto got = peaks(gen("zb-h1", P, M), m_b, m_w);
      for (int i = 1; i <= P; ++i)
        CHECK(got[static_cast<std::size_t>(i - 1)] == (P - i + 1) * m_b + (i - 1) * m_w);
    }
  // Fewer microbatches than ranks: rank 0 never holds P stashes, so the formula is an upper bound.
  CHECK(peaks(gen("zb-h1", 4, 2), m_b, m_w)[0] == 2 * m_b);
}

TEST_CASE("zero_bubble.zb_h1_f_i_w", "[zb][closed-form]") {
  // zb-h1 with F = I = W = 1 and free communication: the longest rank runs 3M + (P-1), the paper's
  // bubble (P-1)(T_F + T_I - T_W), when M >= P
  for (int P = 1; P <= 8; ++P)
    for (int M = P; M <= 2 * P + 2; ++M) {
      INFO("P=" << P << " M=" << M);
      CHECK(longest_rank_span(gen("zb-h1", P, M), costs(P, 1, 1, 1)) == Approx(3 * M + P - 1));
    }
}

// ---- ZB-H2 -------------------------------------------------------------------------------------

TEST_CASE("zero_bubble.rank_r_warms_up_2", "[zb][generators]") {
  // zb-h2: rank r warms up with 2(P-r)-2 forwards, then F, I, W with each W 2r steps late
  const auto p = gen("zb-h2", 3, 6);
  test::check_rank_lines(
      p, {{0, "0F0,0F1,0F2,0F3,0F4,0I0,0W0,0F5,0I1,0W1,0I2,0W2,0I3,0W3,0I4,0W4,0I5,0W5"},
          {1, "1F0,1F1,1F2,1I0,1F3,1I1,1F4,1I2,1W0,1F5,1I3,1W1,1I4,1W2,1I5,1W3,1W4,1W5"},
          {2, "2F0,2I0,2F1,2I1,2F2,2I2,2F3,2I3,2F4,2I4,2W0,2F5,2I5,2W1,2W2,2W3,2W4,2W5"}});
  // The warm-up is capped at M.
  CHECK(test::rank_line(gen("zb-h2", 3, 2), 0) == "0F0,0F1,0I0,0W0,0I1,0W1");
}

TEST_CASE("zero_bubble.zb_h2_peak_memory_rank", "[zb][memory]") {
  // zb-h2 peak memory on rank i (1-based) = (2P-2i+1) M_B + (2i-2) M_W when M >= 2P-1
  const std::int64_t m_b = 1000, m_w = 300;
  for (int P = 1; P <= 8; ++P)
    for (int M = 2 * P - 1; M <= 4 * P; ++M) {
      INFO("P=" << P << " M=" << M);
      const auto got = peaks(gen("zb-h2", P, M), m_b, m_w);
      for (int i = 1; i <= P; ++i)
        CHECK(got[static_cast<std::size_t>(i - 1)] ==
              (2 * P - 2 * i + 1) * m_b + (2 * i - 2) * m_w);
    }
  // Rank 0 holds at most 2P-1 = 7 full stashes, whatever M.
  CHECK(peaks(gen("zb-h2", 4, 40), m_b, m_w)[0] == 7 * m_b);
}

TEST_CASE("zero_bubble.zb_h2_f_i_w", "[zb][closed-form]") {
  // zb-h2 with F = I = W = 1 and free communication has no bubble: every rank runs 3M from its
  // first op to its last, when M >= 2P-1
  for (int P = 1; P <= 8; ++P)
    for (int M = 2 * P - 1; M <= 3 * P + 2; ++M) {
      INFO("P=" << P << " M=" << M);
      CHECK(longest_rank_span(gen("zb-h2", P, M), costs(P, 1, 1, 1)) == Approx(3 * M));
    }
  // One microbatch short, rank 0 waits one step for its first gradient.
  CHECK(longest_rank_span(gen("zb-h2", 4, 6), costs(4, 1, 1, 1)) > 3 * 6);
}

// ---- Published figures -------------------------------------------------------------------------

TEST_CASE("zero_bubble.zero_bubble_paper_table_5", "[zb][published]") {
  // Zero-bubble paper, Table 5 (p = 8): bubble rate = (longest rank span - M(T_F+T_B+T_W)) /
  // longest rank span, for 1F1B (B and W fused), ZB-H1 and ZB-H2, to 4 decimals
  struct Row {
    int m;
    double f, b, w, comm, one_f_one_b, h1, h2;
  };
  // The paper's measured T_F, T_B, T_W, T_comm (ms) and its bubble rates.
  const Row rows[] = {{24, 18.522, 18.086, 9.337, 0.601, 0.2431, 0.1585, 0.1083},
                      {32, 18.513, 18.086, 9.331, 0.626, 0.1985, 0.1242, 0.0837},
                      {64, 18.546, 18.097, 9.321, 0.762, 0.1240, 0.0674, 0.0444},
                      {24, 29.718, 29.444, 19.927, 0.527, 0.2347, 0.1323, 0.0698}};
  const int P = 8;
  for (const Row& row : rows) {
    INFO("m=" << row.m << " T_F=" << row.f);
    const auto o = costs(P, row.f, row.b, row.w, row.comm);
    const double ideal = row.m * (row.f + row.b + row.w);
    auto rate = [&](const char* kind) {
      const double span = longest_rank_span(gen(kind, P, row.m), o);
      return std::round((span - ideal) / span * 1e4) / 1e4;
    };
    CHECK(rate("1f1b") == Approx(row.one_f_one_b).margin(1e-9));
    CHECK(rate("zb-h1") == Approx(row.h1).margin(1e-9));
    CHECK(rate("zb-h2") == Approx(row.h2).margin(1e-9));
  }
}

// ---- Interleaved zero bubble (PyTorch) ---------------------------------------------------------

TEST_CASE("zero_bubble.interleaved_zb_equals_pytorch_s", "[zb][interleaved-zb]") {
  // interleaved-zb equals PyTorch's artifact zb1p_2rank_2stagep_compute.csv (P=2, V=2, M=8) action
  // for action
  // test/distributed/pipelining/artifacts/zb1p_2rank_2stagep_compute.csv, one row per rank.
  const std::string artifact[] = {
      "0F0,0F1,2F0,,2F1,2B0,2W0,0F2,2B1,2W1,0F3,0B0,0W0,2F2,0B1,0W1,2F3,2B2,2W2,0F4,2B3,2W3,0F5,"
      "0B2,0W2,2F4,0B3,0W3,2F5,2B4,2W4,0F6,2B5,2W5,0F7,0B4,0W4,2F6,0B5,0W5,2F7,2B6,2W6,2B7,2W7,"
      "0B6,0W6,0B7,0W7",
      ",1F0,1F1,3F0,3B0,3F1,3B1,3W0,1F2,1B0,3W1,1F3,1B1,1W0,3F2,3B2,1W1,3F3,3B3,3W2,1F4,1B2,3W3,"
      "1F5,1B3,1W2,3F4,3B4,1W3,3F5,3B5,3W4,1F6,1B4,3W5,1F7,1B5,1W4,3F6,3B6,1W5,3F7,3B7,3W6,1B6,"
      "3W7,1B7,1W6,1W7"};
  const auto p = gen("interleaved-zb", 2, 8, 2);
  REQUIRE(p.ranks() == 2);
  for (int r = 0; r < 2; ++r) CHECK(test::rank_line(p, r) == from_pytorch_row(artifact[r]));
}

TEST_CASE("zero_bubble.interleaved_zb_follows_pytorch_s", "[zb][interleaved-zb]") {
  // interleaved-zb follows PyTorch's algorithm: rounds of max(1, M/P), warm-up (V-1)*per_round +
  // P-1-r, W r steps late
  // Orders derived by following ScheduleInterleavedZeroBubble step by step (idle steps dropped).
  // P=4, V=2, M=8: 2 rounds of 4; rank 3 warms up with 4 forwards, its first W after 3 I.
  const auto a = gen("interleaved-zb", 4, 8, 2);
  test::check_rank_lines(a, {{0,
                              "0F0,0F1,0F2,0F3,4F0,4F1,4F2,4F3,4I0,4W0,0F4,4I1,4W1,0F5,4I2,4W2,0F6,"
                              "4I3,4W3,0F7,0I0,0W0,4F4,0I1,0W1,4F5,0I2,0W2,4F6,0I3,0W3,4F7,4I4,4W4,"
                              "4I5,4W5,4I6,4W6,4I7,4W7,0I4,0W4,0I5,0W5,0I6,0W6,0I7,0W7"},
                             {3,
                              "3F0,3F1,3F2,3F3,7F0,7I0,7F1,7I1,7F2,7I2,7F3,7I3,7W0,3F4,3I0,7W1,3F5,"
                              "3I1,7W2,3F6,3I2,7W3,3F7,3I3,3W0,7F4,7I4,3W1,7F5,7I5,3W2,7F6,7I6,3W3,"
                              "7F7,7I7,7W4,3I4,7W5,3I5,7W6,3I6,7W7,3I7,3W4,3W5,3W6,3W7"}});
  // P=3, V=3, M=4: one round of 4 (M/P = 1); rank 0's warm-up (3-1)*4 + 2 = 10 forwards covers
  // chunks 0 and 1 and two microbatches of chunk 2.
  const auto b = gen("interleaved-zb", 3, 4, 3);
  test::check_rank_lines(
      b, {{0,
           "0F0,0F1,0F2,0F3,3F0,3F1,3F2,3F3,6F0,6F1,6F2,6I0,6W0,6F3,6I1,6W1,6I2,6W2,6I3,6W3,3I0,"
           "3W0,3I1,3W1,3I2,3W2,3I3,3W3,0I0,0W0,0I1,0W1,0I2,0W2,0I3,0W3"},
          {2,
           "2F0,2F1,2F2,2F3,5F0,5F1,5F2,5F3,8F0,8I0,8F1,8I1,8F2,8I2,8W0,8F3,8I3,8W1,5I0,8W2,5I1,"
           "8W3,5I2,5W0,5I3,5W1,2I0,5W2,2I1,5W3,2I2,2W0,2I3,2W1,2W2,2W3"}});
  // P=4, V=2, M=10: 2 rounds of 5 microbatches.
  const auto c = gen("interleaved-zb", 4, 10, 2);
  CHECK(test::rank_line(c, 1) ==
        "1F0,1F1,1F2,1F3,1F4,5F0,5F1,5F2,5I0,5F3,5I1,5W0,5F4,5I2,5W1,1F5,5I3,5W2,1F6,5I4,5W3,1F7,"
        "1I0,5W4,1F8,1I1,1W0,1F9,1I2,1W1,5F5,1I3,1W2,5F6,1I4,1W3,5F7,5I5,1W4,5F8,5I6,5W5,5F9,5I7,"
        "5W6,5I8,5W7,5I9,5W8,1I5,5W9,1I6,1W5,1I7,1W6,1I8,1W7,1I9,1W8,1W9");
}

TEST_CASE("zero_bubble.interleaved_zb_chunk_per_rank", "[zb][interleaved-zb]") {
  // interleaved-zb with one chunk per rank is ZB-H1: PyTorch's ScheduleInterleavedZeroBubble on
  // one stage per rank gives zb-h1's order whenever it accepts M
  for (int P = 1; P <= 6; ++P)
    for (int M = 1; M <= 3 * P + 2; ++M) {
      if (error_key("interleaved-zb", P, M, 1) != "accepted") continue;
      INFO("P=" << P << " M=" << M);
      const auto a = gen("interleaved-zb", P, M, 1), b = gen("zb-h1", P, M);
      for (int r = 0; r < P; ++r) CHECK(a.ops(r) == b.ops(r));
    }
}

TEST_CASE("zero_bubble.interleaved_zb_rejects_what_pytorch", "[zb][interleaved-zb]") {
  // interleaved-zb rejects what PyTorch rejects: M not a multiple of max(1, M/P)
  CHECK(error_key("interleaved-zb", 4, 9, 2) == "microbatches");   // 2 rounds, 9 % 2 = 1
  CHECK(error_key("interleaved-zb", 4, 13, 2) == "microbatches");  // 3 rounds, 13 % 3 = 1
  CHECK(error_key("interleaved-zb", 4, 10, 2) == "accepted");      // 2 rounds of 5
  CHECK(error_key("interleaved-zb", 4, 6, 2) == "accepted");       // 1 round of 6
  CHECK(error_key("interleaved-zb", 4, 3, 2) == "accepted");       // fewer than P: 1 round
  CHECK(error_key("interleaved-zb", 4, 8, 0) == "accepted");       // chunks default to 2
  try {
    gen("interleaved-zb", 4, 9, 2);
  } catch (const schedules::ParameterError& e) {
    CHECK(std::string(e.what()).find("max(1, M / P) = 2 rounds") != std::string::npos);
  }
}

// ---- Comm styles -------------------------------------------------------------------------------

namespace {
// PyTorch's rule for the microbatches of one round; 0 when it rejects M.
int per_round(int P, int M) {
  const int rounds = std::max(1, M / P);
  return M % rounds == 0 ? M / rounds : 0;
}
std::optional<record::Deadlock> deadlock_of(const schedules::Program& compute,
                                            const schedules::LoweringOptions& l,
                                            sim::Matching matching = sim::Matching::tag) {
  const auto p = schedules::lower(compute, l);
  auto o = costs(p.stages(), 1, 1, 1);
  o.network.matching = matching;
  const auto r = test::run(p, o);
  CHECK(r.errors.empty());
  return r.deadlock;
}
// Calls `check(compute, P, V, M)` for each interleaved-zb program PyTorch accepts with P ranks in
// [p_lo, p_hi], V = 1..3 chunks and M = 1..max_m(P) microbatches, the sizes as context.
template <typename MaxM, typename F>
void for_each_interleaved_zb(int p_lo, int p_hi, MaxM max_m, F&& check) {
  for (int P = p_lo; P <= p_hi; ++P)
    for (int V = 1; V <= 3; ++V)
      for (int M = 1; M <= max_m(P); ++M) {
        if (per_round(P, M) == 0) continue;
        INFO("P=" << P << " V=" << V << " M=" << M);
        check(gen("interleaved-zb", P, M, V), P, V, M);
      }
}
}  // namespace

TEST_CASE("zero_bubble.order_has_cyclic_dependency_async", "[zb][interleaved-zb][deadlock]") {
  // interleaved-zb: its order has no cyclic dependency (async, receives posted at the start, runs
  // to the end), with prefetch 1 the async style deadlocks exactly when a round holds P+2 or more
  // microbatches
  const schedules::LoweringOptions all{"async", {{"prefetch", -1}}};
  const schedules::LoweringOptions one{"async", {{"prefetch", 1}}};
  for_each_interleaved_zb(
      1, 6, [](int P) { return 3 * P + 2; },
      [&](const schedules::Program& compute, int P, int V, int M) {
        CHECK_FALSE(deadlock_of(compute, all));
        // A gradient send is waited before the rank's next backward; the receiver posts its
        // receive one compute op ahead, and with P+2 or more microbatches per round it is still
        // waiting for a forward that comes after that backward.
        CHECK(static_cast<bool>(deadlock_of(compute, one)) == (V >= 2 && per_round(P, M) >= P + 2));
      });
  // P=4, M=6 (one round of 6): rank 0 waits for rank 3 to take 4SEND_B0, rank 3 for the forward
  // 7F5 from rank 2, and so on back to rank 0, whose 4F5 comes after its next backward.
  const auto d = deadlock_of(gen("interleaved-zb", 4, 6, 2), one);
  REQUIRE(d);
  REQUIRE(d->cycles.size() == 1);
  CHECK(d->describe().find("rank 0 blocked in WAIT(10;15;17) on 4SEND_B0#15 -> rank 3; rank 3 "
                           "blocked in WAIT(22) on 7RECV_F5#22 -> rank 2") != std::string::npos);
}

TEST_CASE("zero_bubble.interleaved_zb_v_2_deadlocks", "[zb][interleaved-zb][deadlock]") {
  // interleaved-zb with V >= 2 deadlocks under async-send and batched iff M >= P (the warm-up
  // forward sends around the ring of stages), under blocking iff M >= 2
  for_each_interleaved_zb(
      2, 5, [](int P) { return 2 * P + 2; },
      [](const schedules::Program& compute, int P, int V, int M) {
        for (const char* style : {"async-send", "batched"})
          CHECK(static_cast<bool>(deadlock_of(compute, {style, {}})) == (V >= 2 && M >= P));
        CHECK(static_cast<bool>(deadlock_of(compute, {"blocking", {}})) == (M >= 2));
      });
  // The ring: each rank blocked in the forward send to the next, rank P-1 to rank 0.
  const auto d = deadlock_of(gen("interleaved-zb", 3, 3, 2), {"batched", {}});
  REQUIRE(d);
  CHECK(d->describe() ==
        "cycle: rank 0 blocked in 0SEND_F2 -> rank 1; rank 1 blocked in 1SEND_F1 -> rank 2; rank 2 "
        "blocked in 2SEND_F0 -> rank 0");
}

TEST_CASE("zero_bubble.zb_h1_runs_under_style", "[zb][deadlock]") {
  // zb-h1 runs under every style but blocking (like 1F1B), zb-h2's deeper warm-up also deadlocks
  // async-send once M >= 3 and batched once M >= 2P: rank r waits on a forward send that rank r+1
  // takes only after its blocking gradient send
  for (int P = 2; P <= 6; ++P)
    for (int M = 1; M <= 2 * P + 2; ++M) {
      INFO("P=" << P << " M=" << M);
      for (const auto& l : test::all_lowerings()) {
        INFO(test::describe(l));
        // megatron models 1F1B only: it refuses both (their I and W ops).
        if (!test::accepts(l, gen("zb-h1", P, M)) || !test::accepts(l, gen("zb-h2", P, M)))
          continue;
        const bool blocking = l.style == "blocking";
        CHECK(static_cast<bool>(deadlock_of(gen("zb-h1", P, M), l)) == (blocking && M >= 2));
        const bool h2 = static_cast<bool>(deadlock_of(gen("zb-h2", P, M), l));
        if (l.style == "async") CHECK_FALSE(h2);
        if (blocking) CHECK(h2 == (M >= 2));
        if (l.style == "async-send") CHECK(h2 == (M >= 3));
        if (l.style == "batched") CHECK(h2 == (M >= 2 * P));
      }
    }
  const auto d = deadlock_of(gen("zb-h2", 2, 4), {"async-send", {}});
  REQUIRE(d);
  CHECK(d->describe() ==
        "cycle: rank 0 blocked in WAIT(1) on 0SEND_F1#1 -> rank 1; rank 1 blocked in 1SEND_B0 -> "
        "rank 0");
}

TEST_CASE("zero_bubble.interleaved_zb_p_2_under", "[zb][interleaved-zb]") {
  // interleaved-zb with P = 2 under fifo matching: forward and gradient messages share each link
  // in different orders at the two ends, reported as message-order mismatches
  const auto p = schedules::lower(gen("interleaved-zb", 2, 8, 2), {"async", {{"prefetch", -1}}});
  auto o = costs(p.stages(), 1, 1, 1);
  o.network.matching = sim::Matching::fifo;
  const auto r = sim::simulate(p, o);
  REQUIRE_FALSE(r.errors.empty());
  for (const auto& e : r.errors) CHECK(e.kind == "message_order_mismatch");
  o.network.matching = sim::Matching::tag;
  CHECK(sim::simulate(p, o).errors.empty());
}
