// dualpipev: PyTorch's ScheduleDualPipeV order (its 4-rank, 10-microbatch artifact and hand-derived
// cases), the activation peak and bubble of DeepSeek's DualPipe README table, comm styles.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include "error_of.hpp"
#include "helpers.hpp"
#include "paths.hpp"
#include "ppsim/schedules/error.hpp"
#include "v_cycle.hpp"

using namespace ppsim;
using schedules::OpKind;

namespace {
schedules::Program dualpipev(int P, int M) {
  return schedules::generate("dualpipev", {{"ranks", P}, {"microbatches", M}});
}

// A PyTorch schedule CSV: one rank per line, cells separated by commas. Its cells use our text
// form already, so a line is compared as a whole (trailing '\r' and blank lines dropped).
std::vector<std::string> read_rank_lines(const std::filesystem::path& path) {
  std::ifstream in(path);
  REQUIRE(in);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}
}  // namespace

TEST_CASE("dualpipev.dualpipev_equals_pytorch_s_artifact", "[dualpipev]") {
  // dualpipev equals PyTorch's artifact dualpipev_4rank_10mb.csv cell for cell
  const auto lines = read_rank_lines(std::filesystem::path(PPSIM_SOURCE_DIR) / "tests" / "data" /
                                     "pytorch" / "dualpipev_4rank_10mb.csv");
  REQUIRE(lines.size() == 4);
  const auto p = dualpipev(4, 10);
  REQUIRE(p.ranks() == 4);
  test::check_rank_lines(p, lines);
  // The text form reads back into the same program (placement inferred: V).
  const auto back = schedules::Program::parse(p.to_text());
  CHECK(back.to_text() == p.to_text());
  CHECK(back.placement() == p.placement());
  CHECK(schedules::generate("DualPipeV", {{"ranks", 4}, {"microbatches", 10}}).to_text() ==
        p.to_text());
}

// Derived by following ScheduleDualPipeV._calculate_single_rank_operations by hand (steps 1-8:
// F0 x 2(P-r-1); (F0 F1) x (r+1); (I1 W F1) x (P-r-1); overlapped pairs x (M-2P+r+1), the bottom
// rank's first pair not overlapped; (B1, F1&B0) x (P-r-1); backwards of both chunks, split from the
// middle pair on; (W, B0) x (P-r-1); the queued W's).
TEST_CASE("dualpipev.per_rank_order_equals_pytorch", "[dualpipev]") {
  // dualpipev: per-rank order equals PyTorch's ScheduleDualPipeV for more (P, M)
  test::check_v_orders(
      "dualpipev",
      {
          {1, 2, {"0F0,1F0,0F1,1B0,(1F1;0B0)OVERLAP_F_B,1B1,0I1,0W1"}},
          {2,
           4,
           {"0F0,0F1,0F2,3F0,3I0,3W0,3F1,(0F3;3B1)OVERLAP_F_B,(3F2;0B0)OVERLAP_F_B,3B2,(3F3;0B1)"
            "OVERLAP_F_B,3B3,0I2,0W2,0I3,0W3",
            "1F0,2F0,1F1,2F1,1F2,2B0,(2F2;1B0)OVERLAP_F_B,(1F3;2B1)OVERLAP_F_B,(2F3;1B1)OVERLAP_F_"
            "B,2B2,1B2,2I3,1I3,2W3,1W3"}},
          {3,
           7,
           {"0F0,0F1,0F2,0F3,0F4,5F0,5I0,5W0,5F1,5I1,5W1,5F2,(0F5;5B2)OVERLAP_F_B,(5F3;0B0)OVERLAP_"
            "F_B,(0F6;5B3)OVERLAP_F_B,(5F4;0B1)OVERLAP_F_B,5B4,(5F5;0B2)OVERLAP_F_B,5B5,(5F6;0B3)"
            "OVERLAP_F_B,5B6,0I4,0W4,0I5,0W5,0I6,0W6",
            "1F0,1F1,1F2,4F0,1F3,4F1,4I0,4W0,4F2,(1F4;4B1)OVERLAP_F_B,(4F3;1B0)OVERLAP_F_B,(1F5;"
            "4B2)OVERLAP_F_B,(4F4;1B1)OVERLAP_F_B,(1F6;4B3)OVERLAP_F_B,(4F5;1B2)OVERLAP_F_B,4B4,("
            "4F6;1B3)OVERLAP_F_B,4B5,1B4,4I6,1I5,4W6,1I6,1W5,1W6",
            "2F0,3F0,2F1,3F1,2F2,3F2,2F3,3B0,(3F3;2B0)OVERLAP_F_B,(2F4;3B1)OVERLAP_F_B,(3F4;2B1)"
            "OVERLAP_F_B,(2F5;3B2)OVERLAP_F_B,(3F5;2B2)OVERLAP_F_B,(2F6;3B3)OVERLAP_F_B,(3F6;2B3)"
            "OVERLAP_F_B,3B4,2B4,3B5,2I5,3I6,2I6,2W5,3W6,2W6"}},
          {4,
           8,
           {"0F0,0F1,0F2,0F3,0F4,0F5,0F6,7F0,7I0,7W0,7F1,7I1,7W1,7F2,7I2,7W2,7F3,(0F7;7B3)OVERLAP_"
            "F_B,(7F4;0B0)OVERLAP_F_B,7B4,(7F5;0B1)OVERLAP_F_B,7B5,(7F6;0B2)OVERLAP_F_B,7B6,(7F7;"
            "0B3)OVERLAP_F_B,7B7,0I4,0W4,0I5,0W5,0I6,0W6,0I7,0W7",
            "1F0,1F1,1F2,1F3,1F4,6F0,1F5,6F1,6I0,6W0,6F2,6I1,6W1,6F3,(1F6;6B2)OVERLAP_F_B,(6F4;1B0)"
            "OVERLAP_F_B,(1F7;6B3)OVERLAP_F_B,(6F5;1B1)OVERLAP_F_B,6B4,(6F6;1B2)OVERLAP_F_B,6B5,("
            "6F7;1B3)OVERLAP_F_B,6B6,1B4,6I7,1I5,6W7,1I6,1W5,1I7,1W6,1W7",
            "2F0,2F1,2F2,5F0,2F3,5F1,2F4,5F2,5I0,5W0,5F3,(2F5;5B1)OVERLAP_F_B,(5F4;2B0)OVERLAP_F_B,"
            "(2F6;5B2)OVERLAP_F_B,(5F5;2B1)OVERLAP_F_B,(2F7;5B3)OVERLAP_F_B,(5F6;2B2)OVERLAP_F_B,"
            "5B4,(5F7;2B3)OVERLAP_F_B,5B5,2B4,5B6,2I5,5I7,2I6,2W5,2I7,5W7,2W6,2W7",
            "3F0,4F0,3F1,4F1,3F2,4F2,3F3,4F3,3F4,4B0,(4F4;3B0)OVERLAP_F_B,(3F5;4B1)OVERLAP_F_B,("
            "4F5;3B1)OVERLAP_F_B,(3F6;4B2)OVERLAP_F_B,(4F6;3B2)OVERLAP_F_B,(3F7;4B3)OVERLAP_F_B,("
            "4F7;3B3)OVERLAP_F_B,4B4,3B4,4B5,3B5,4I6,3I6,4I7,3I7,4W6,3W6,4W7,3W7"}},
      });
}

TEST_CASE("dualpipev.stage_microbatch_rank_runs_f", "[dualpipev]") {
  // dualpipev: each (stage, microbatch) of a rank runs F once and B or I once, W exactly for each
  // I, an overlapped pair is F of one chunk with B of the other
  for (int P = 1; P <= 8; ++P) {
    for (int M = 2 * P; M <= 4 * P + 1; ++M) {
      const auto p = dualpipev(P, M);
      for (int r = 0; r < P; ++r) {
        INFO("P=" << P << " M=" << M << " rank " << r);
        const int s0 = r, s1 = 2 * P - 1 - r;
        std::map<std::tuple<int, int, int>, int> count;  // (kind, stage, mb) -> times
        auto note = [&](const schedules::Op& op) {
          REQUIRE((op.stage == s0 || op.stage == s1));
          REQUIRE(op.microbatch < M);
          ++count[{static_cast<int>(op.kind), op.stage, op.microbatch}];
        };
        for (const auto& op : p.ops(r)) {
          if (op.kind == OpKind::OVERLAP_F_B) {
            const auto parts = p.parts(r, op);
            REQUIRE(parts.size() == 2);
            CHECK(parts[0].kind == OpKind::F);
            CHECK(parts[1].kind == OpKind::B);
            CHECK(parts[0].stage != parts[1].stage);
            for (const auto& part : parts) note(part);
          } else {
            REQUIRE((op.kind == OpKind::F || op.kind == OpKind::B || op.kind == OpKind::I ||
                     op.kind == OpKind::W));
            note(op);
          }
        }
        for (int s : {s0, s1}) {
          for (int m = 0; m < M; ++m) {
            auto n = [&](OpKind k) {
              auto it = count.find({static_cast<int>(k), s, m});
              return it == count.end() ? 0 : it->second;
            };
            CHECK(n(OpKind::F) == 1);
            CHECK(n(OpKind::B) + n(OpKind::I) == 1);
            CHECK(n(OpKind::W) == n(OpKind::I));
          }
        }
      }
    }
  }
}

// DeepSeek's DualPipe README ("Pipeline Bubbles and Memory Usage Comparison"), row DualPipeV, with
// PP = 2P pipeline stages on P devices: bubble (PP/2-1)(F&B + B - 3W), activation PP+1 per device
// (in stashes of one stage for one microbatch). Here F&B costs F + B (an overlapped pair runs its
// parts back to back) and B = I + W.
TEST_CASE("dualpipev.activation_peak_per_rank_2p", "[dualpipev][memory]") {
  // dualpipev: activation peak per rank = 2P+1 stashes (README: PP+1) for every M >= 2P
  const std::int64_t A = 1000, S = 7;
  for (std::int64_t weight_stash : {std::int64_t{0}, A / 2, A}) {
    for (int P = 1; P <= 8; ++P) {
      for (int M : {2 * P, 2 * P + 1, 3 * P, 4 * P}) {
        const auto r = test::simulate_v_memory("dualpipev", P, M, A, weight_stash, S);
        INFO("P=" << P << " M=" << M << " weight_stash=" << weight_stash);
        REQUIRE_FALSE(r.deadlock);
        for (const auto& m : r.per_rank) CHECK(m.peak_memory_bytes == 2 * S + (2 * P + 1) * A);
      }
    }
  }
}

TEST_CASE("dualpipev.f_i_w_t_free", "[dualpipev][closed_form]") {
  // dualpipev: with F = I = W = T and free communication every rank idles exactly the README's
  // (PP/2-1)(F&B + B - 3W) = 2(P-1)T
  for (double T : {1.0, 0.25}) {
    const double F = T, I = T, W = T, B = I + W, FB = F + B;
    for (int prefetch : {1, -1}) {
      for (int P = 1; P <= 8; ++P) {
        for (int M : {2 * P, 2 * P + 1, 3 * P, 4 * P}) {
          const auto prog = test::lowered("dualpipev", P, M, 2, "async", prefetch);
          const auto r = sim::simulate(prog, test::uniform(2 * P, F, B));
          INFO("prefetch=" << prefetch << " T=" << T << " P=" << P << " M=" << M);
          REQUIRE_FALSE(r.deadlock);
          REQUIRE(r.errors.empty());
          const double readme_bubble = (P - 1) * (FB + B - 3 * W);
          CHECK(r.makespan == Approx(2 * M * (F + I + W) + readme_bubble));
          for (const auto& m : r.per_rank) {
            CHECK(m.busy == Approx(2 * M * (F + I + W)));
            CHECK(m.idle == Approx(readme_bubble).margin(1e-9));
          }
        }
      }
    }
  }
}

// Unequal costs: the README's figure is not what this order gives. With F = 2, I = W = 1 every
// rank idles 4(P-1), the README's formula says 3(P-1); with W = 2, F = I = 1 it is 2(P-1) against
// (P-1). (I = 2, F = W = 1 gives 4(P-1) - 1, against 4(P-1).) Recorded so that a change of the
// model or of the order shows up here.
TEST_CASE("dualpipev.idle_per_rank_unequal_costs", "[dualpipev][closed_form]") {
  // dualpipev: idle per rank with unequal costs (not the README's formula)
  struct Costs {
    double f, i, w, idle_per_rank_step;
  };
  for (const Costs c : {Costs{2, 1, 1, 4}, Costs{1, 1, 2, 2}}) {
    for (int P = 2; P <= 6; ++P) {
      const int M = 3 * P;
      auto o = test::uniform(2 * P, c.f, c.i + c.w);
      for (auto& s : o.costs.stages) {
        s.backward_input = c.i;
        s.backward_weight = c.w;
      }
      const auto r = sim::simulate(test::lowered("dualpipev", P, M, 2), o);
      INFO("F=" << c.f << " I=" << c.i << " W=" << c.w << " P=" << P);
      REQUIRE_FALSE(r.deadlock);
      for (const auto& m : r.per_rank) CHECK(m.idle == Approx((P - 1) * c.idle_per_rank_step));
    }
  }
}

// Forward activations cross each link in both directions (chunk 0 down, chunk 1 up), so a style
// whose forward sends rendezvous before the rank moves on deadlocks, as zbv does
// (tests/test_zbv.cpp): only `async` runs it.
TEST_CASE("dualpipev.only_async_style_runs_blocking", "[dualpipev][deadlock]") {
  // dualpipev: only the async style runs it, blocking, async-send and batched deadlock between
  // ranks P-2 and P-1 (stage P-2's forward of microbatch 1 against stage P's of microbatch 0)
  for (int P = 1; P <= 6; ++P)
    for (int M : {2 * P, 2 * P + 1, 3 * P + 1}) test::check_v_lowerings("dualpipev", P, M);
}

TEST_CASE("dualpipev.comm_bytes_2_2p_2", "[dualpipev]") {
  // dualpipev: comm_bytes = 2 * (2P-2) * M * boundary_bytes
  for (int P = 1; P <= 6; ++P)
    for (int M : {2 * P, 3 * P}) test::check_v_comm_bytes("dualpipev", P, M);
}

TEST_CASE("dualpipev.dualpipev_refuses_m_2p_chunks", "[dualpipev]") {
  // dualpipev refuses M < 2P and chunks != 2, naming the rule
  for (int P = 1; P <= 6; ++P) {
    const auto e = test::error_of<schedules::ParameterError>([&] { dualpipev(P, 2 * P - 1); });
    CHECK(e.key() == "microbatches");
    CHECK_THAT(e.what(),
               Catch::Contains("microbatches >= stages = 2 * ranks = " + std::to_string(2 * P)));
    CHECK_NOTHROW(dualpipev(P, 2 * P));
  }
  const auto e = test::error_of<schedules::ParameterError>([] {
    schedules::generate("dualpipev", {{"ranks", 2}, {"microbatches", 8}, {"chunks", 3}});
  });
  CHECK(e.key() == "chunks");
  CHECK_THAT(e.what(), Catch::Contains("chunks must lie in [2, 2], got 3"));
}
