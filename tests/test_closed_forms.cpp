// Closed forms the simulator must reproduce with uniform stages and free communication.
#include <catch2/catch.hpp>

#include "helpers.hpp"

using namespace ppsim;
using CommStyle = std::string_view;

namespace {
constexpr CommStyle kAllStyles[] = {"blocking", "async-send", "batched", "async"};
constexpr CommStyle kDeadlockFreeStyles[] = {"async-send", "batched", "async"};

// `kind` in each of `styles` for P = 1..8 and M = 1..max_m at uniform costs F and B runs in the
// fill-and-drain time: makespan (M+P-1)(F+B), bubble_fraction (P-1)/(M+P-1). `check(r, P, M)`
// checks the rest.
template <typename Styles, typename Check>
void check_fill_drain(const char* kind, const Styles& styles, int max_m, double F, double B,
                      Check&& check) {
  for (CommStyle style : styles) {
    for (int P = 1; P <= 8; ++P) {
      for (int M = 1; M <= max_m; ++M) {
        const auto prog = test::lowered(kind, P, M, 1, style);
        const auto r = sim::simulate(prog, test::uniform(P, F, B));
        INFO("style=" << style << " P=" << P << " M=" << M);
        REQUIRE_FALSE(r.deadlock);
        CHECK(r.makespan == Approx((M + P - 1) * (F + B)));
        CHECK(r.bubble_fraction == Approx(double(P - 1) / (M + P - 1)).margin(1e-12));
        check(r, P, M);
      }
    }
  }
}
}  // namespace

TEST_CASE("closed_forms.gpipe_bubble_fraction_p_1", "[closed_form][gpipe]") {
  // GPipe bubble_fraction = (P-1)/(M+P-1), makespan = (M+P-1)(F+B), every comm style
  check_fill_drain("gpipe", kAllStyles, 12, 1.0, 2.0, [](const sim::SimResult& r, int, int M) {
    for (const auto& m : r.per_rank) CHECK(m.peak_inflight == M);  // GPipe holds every microbatch
  });
}

TEST_CASE("closed_forms.1f1b_bubble_fraction_p_1", "[closed_form][1f1b]") {
  // 1F1B bubble_fraction = (P-1)/(M+P-1), makespan = (M+P-1)(F+B), peak in-flight on rank r =
  // min(P-r, M)
  const double F = 1.5, B = 3.0;
  const auto rest = [&](const sim::SimResult& r, int P, int M) {
    REQUIRE(r.errors.empty());
    // bubble relative to the ideal M(F+B) (Megatron's convention) = (P-1)/M
    CHECK(r.bubble_vs_ideal == Approx(double(P - 1) / M).margin(1e-12));
    for (const auto& m : r.per_rank) {
      CHECK(m.peak_inflight == std::min(P - m.rank, M));
      CHECK(m.busy == Approx(M * (F + B)));
      CHECK(m.idle == Approx(r.makespan - m.busy));
    }
  };
  check_fill_drain("1f1b", kDeadlockFreeStyles, 16, F, B, rest);
}

// Only the async lowering runs interleaved programs: the others deadlock (test_deadlock.cpp).
TEST_CASE("closed_forms.interleaved_1f1b_bubble_vs_ideal", "[closed_form][interleaved]") {
  // Interleaved 1F1B bubble_vs_ideal = (P-1)/(V*M) with per-chunk costs
  const double f = 1.0, b = 2.0;  // per virtual stage (chunk)
  for (int prefetch : {1, -1}) {
    for (int P : {3, 4, 5, 8}) {
      for (int V : {2, 3, 4}) {
        for (int M : {P, 2 * P, 4 * P}) {
          const auto prog = test::lowered("interleaved-1f1b", P, M, V, "async", prefetch);
          const auto r = sim::simulate(prog, test::uniform(P * V, f, b));
          INFO("prefetch=" << prefetch << " P=" << P << " V=" << V << " M=" << M);
          REQUIRE_FALSE(r.deadlock);
          REQUIRE(r.errors.empty());
          CHECK(r.bubble_vs_ideal == Approx(double(P - 1) / (V * M)).margin(1e-12));
          CHECK(r.makespan == Approx(V * M * (f + b) + (P - 1) * (f + b)));
        }
      }
    }
  }
}

TEST_CASE("closed_forms.gpipe_1f1b_move_2_p", "[closed_form][comm]") {
  // Communication volume: GPipe/1F1B move 2(P-1)*M*boundary bytes, interleaved 2(PV-1)*M*boundary
  const std::int64_t bytes = 3 << 20;
  for (int P = 1; P <= 6; ++P) {
    for (int M : {1, 4, 9}) {
      for (const char* kind : {"gpipe", "1f1b"}) {
        auto o = test::uniform(P, 1, 2);
        o.network.boundary_bytes = bytes;
        const auto r = sim::simulate(test::lowered(kind, P, M), o);
        INFO(kind << " P=" << P << " M=" << M);
        CHECK(r.comm_bytes == 2LL * (P - 1) * M * bytes);
        for (const auto& m : r.per_rank) {
          // interior ranks send an activation forward and a gradient backward per microbatch
          const int links = (m.rank > 0 ? 1 : 0) + (m.rank + 1 < P ? 1 : 0);
          CHECK(m.sent_bytes == links * M * bytes);
          CHECK(m.recv_bytes == links * M * bytes);
        }
      }
    }
  }
  for (int V : {2, 3}) {
    const int P = 4, M = 8;
    auto o = test::uniform(P * V, 1, 2);
    o.network.boundary_bytes = bytes;
    const auto r = sim::simulate(test::lowered("interleaved-1f1b", P, M, V), o);
    CHECK(r.comm_bytes == 2LL * (P * V - 1) * M * bytes);
  }
}

TEST_CASE("closed_forms.transfer_time_latency_bytes_bandwidth", "[closed_form][comm]") {
  // Transfer time = latency + bytes/bandwidth: 1F1B P=2 M=1 makespan = 2F + 2B + 2(latency +
  // bytes/bw)
  for (CommStyle style : kAllStyles) {
    auto o = test::uniform(2, 1.0, 2.0);
    o.network.latency = 0.25;
    o.network.bandwidth = 1000;
    o.network.boundary_bytes = 500;  // 0.5 time units on the wire
    const auto r = sim::simulate(test::lowered("1f1b", 2, 1, 1, style), o);
    INFO(style);
    CHECK(r.makespan == Approx(2 * 1.0 + 2 * 2.0 + 2 * (0.25 + 0.5)));
  }
}

TEST_CASE("closed_forms.1f1b_peak_rank_r_static", "[closed_form][memory]") {
  // Memory: 1F1B peak on rank r = static*chunks + min(P-r, M)*activation, GPipe = static +
  // M*activation
  const std::int64_t act = 1 << 20, stat = 7 << 20;
  for (int P = 1; P <= 6; ++P) {
    for (int M = 1; M <= 10; ++M) {
      auto o = test::uniform(P, 1, 2);
      o.memory.activation_bytes = act;
      o.memory.static_bytes = stat;
      const auto r1 = sim::simulate(test::lowered("1f1b", P, M), o);
      const auto rg = sim::simulate(test::lowered("gpipe", P, M), o);
      for (int r = 0; r < P; ++r) {
        CHECK(r1.per_rank[r].peak_memory_bytes == stat + std::min(P - r, M) * act);
        CHECK(rg.per_rank[r].peak_memory_bytes == stat + M * act);
      }
    }
  }
  // Interleaved: static bytes count once per chunk on the rank.
  auto o = test::uniform(8, 1, 2);
  o.memory.static_bytes = stat;
  const auto ri = sim::simulate(test::lowered("interleaved-1f1b", 4, 8, 2), o);
  for (const auto& m : ri.per_rank) CHECK(m.peak_memory_bytes == 2 * stat);
}

TEST_CASE("closed_forms.forward_outputs_live_until_their", "[memory]") {
  // Memory: forward outputs live until their backward, or only until sent with deallocate_outputs
  // GPipe P=2 M=4, blocking: rank 0 keeps 4 stashes + 4 sent outputs, then posts RECV_B0 (+1
  // buffer).
  const std::int64_t A = 1000, b = 10;
  auto o = test::uniform(2, 1, 2);
  o.memory.activation_bytes = A;
  o.network.boundary_bytes = b;
  const auto prog = test::lowered("gpipe", 2, 4, 1, "blocking");
  CHECK(sim::simulate(prog, o).per_rank[0].peak_memory_bytes == 4 * A + 5 * b);
  o.memory.deallocate_outputs = true;
  CHECK(sim::simulate(prog, o).per_rank[0].peak_memory_bytes == 4 * A + 1 * b);
}

TEST_CASE("closed_forms.split_backward_releases_activation_weight", "[memory]") {
  // Memory: split backward releases activation - weight_stash at I and the rest at W
  // One rank, two microbatches: F0 F1 I0 I1 W0 W1. Peak = 2A; after I0 and I1, 2*ws remain until
  // the Ws.
  const auto prog = schedules::Program::parse("0F0,0F1,0I0,0I1,0W0,0W1\n");
  auto o = test::uniform(1, 1, 2);
  o.memory.activation_bytes = 100;
  o.memory.weight_stash_bytes = 30;
  record::Trace trace;
  record::TraceRecorder rec(trace);
  const auto r = sim::simulate(prog, o, &rec);
  CHECK(r.per_rank[0].peak_memory_bytes == 200);
  CHECK(r.per_rank[0].peak_inflight == 2);
  CHECK(r.makespan == Approx(2 * 1.0 + 4 * 1.0));
  // After I1 ends (t=4) the two weight stashes remain; the microbatches stay in flight until W.
  std::int64_t at4 = -1;
  int inflight4 = -1;
  for (const auto& c : trace.counters)
    if (c.time <= 4.0) {
      at4 = c.memory_bytes;
      inflight4 = c.inflight;
    }
  CHECK(at4 == 60);
  CHECK(inflight4 == 2);
  CHECK(trace.counters.back().memory_bytes == 0);
  CHECK(trace.counters.back().inflight == 0);
}

TEST_CASE("closed_forms.transfers_directed_link_run_after", "[comm]") {
  // Transfers on one directed link run one after another
  // Cheap compute, slow wire: GPipe P=2 M=6 async sends queue on link 0->1.
  auto o = test::uniform(2, 0.1, 0.2);
  o.network.latency = 0.5;
  o.network.bandwidth = 100;
  o.network.boundary_bytes = 100;  // 1.5 per transfer
  record::Trace trace;
  record::TraceRecorder rec(trace);
  const auto r = sim::simulate(test::lowered("gpipe", 2, 6, 1, "async", -1), o, &rec);
  REQUIRE_FALSE(r.deadlock);
  double last_end = -1;
  int forward = 0;
  for (const auto& t : trace.transfers) {
    if (t.src_rank != 0) continue;
    CHECK(t.end - t.start == Approx(1.5));
    CHECK(t.start >= last_end - 1e-12);
    last_end = t.end;
    ++forward;
  }
  CHECK(forward == 6);
  // Six back-to-back transfers starting when F0 ends at 0.1: the last activation lands at 0.1 +
  // 6*1.5.
  CHECK(last_end == Approx(0.1 + 6 * 1.5));
}
