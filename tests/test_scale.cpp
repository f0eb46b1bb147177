// Programs far larger than the bundled configs in one dimension (ranks, microbatch ids, WAIT ids,
// independent deadlock cycles): the verdicts stay exact and the passes stay proportional to the
// ops (memory and time are measured by tests/scale_check.sh, not asserted here).
#include <catch2/catch.hpp>
#include <string>

#include "helpers.hpp"
#include "ppsim/schedules/validation.hpp"
#include "ppsim/viz/json_report.hpp"

using namespace ppsim;

TEST_CASE("scale.blocking_1f1b_50_000_ranks", "[scale][deadlock]") {
  // Blocking 1F1B on 50,000 ranks: one cycle between the last two ranks, the rest waiting
  const int P = 50000;
  auto o = test::uniform(P, 1, 2);
  o.network.boundary_bytes = 1 << 20;
  const auto r = sim::simulate(test::lowered("1f1b", P, 4, 1, "blocking"), o);
  REQUIRE(r.deadlock);
  const auto& d = *r.deadlock;
  REQUIRE(d.cycles.size() == 1);
  CHECK(d.cycles_total == 1);
  CHECK_FALSE(d.cut());
  const auto& c = d.cycles[0];
  REQUIRE(c.size() == 2);
  CHECK(c[0].rank == 49998);
  CHECK(c[0].op == "49998SEND_F1");
  CHECK(c[0].peer == 49999);
  CHECK(c[1].rank == 49999);
  CHECK(c[1].op == "49999SEND_B0");
  CHECK(c[1].peer == 49998);
  CHECK(d.unmatched.empty());
  // The chain behind the cycle: every other rank waits on the next one.
  REQUIRE(d.blocked.size() == static_cast<std::size_t>(P - 2));
  for (std::size_t i = 0; i < d.blocked.size(); ++i) {
    CHECK(d.blocked[i].rank == static_cast<int>(i));
    CHECK(d.blocked[i].peer == static_cast<int>(i) + 1);
  }
  CHECK(d.describe().rfind("cycle: rank 49998 blocked in 49998SEND_F1 -> rank 49999; rank 49999 "
                           "blocked in 49999SEND_B0 -> rank 49998\n",
                           0) == 0);
}

TEST_CASE("scale.300_independent_deadlocked_pairs_256", "[scale][deadlock]") {
  // 300 independent deadlocked pairs: 256 cycles listed, the report says 44 more
  // Rank 2k blocks sending stage 2k's activation to rank 2k+1, which blocks sending its gradient
  // back: 300 two-rank cycles, one strongly connected component each.
  const int pairs = 300;
  std::string text;
  for (int k = 0; k < pairs; ++k) {
    const std::string a = std::to_string(2 * k), b = std::to_string(2 * k + 1);
    text += a + "F0," + a + "SEND_F0\n" + b + "F0," + b + "B0," + b + "SEND_B0\n";
  }
  const auto prog = schedules::Program::parse(text);
  const auto r = sim::simulate(prog, test::uniform(2 * pairs, 1, 2));
  REQUIRE(r.deadlock);
  const auto& d = *r.deadlock;
  CHECK(d.cycles_total == 300);
  REQUIRE(d.cycles.size() == record::Deadlock::kMaxCycles);
  CHECK(d.cut());
  for (std::size_t k = 0; k < d.cycles.size(); ++k) {
    INFO("cycle " << k);
    REQUIRE(d.cycles[k].size() == 2);
    CHECK(d.cycles[k][0].rank == static_cast<int>(2 * k));
    CHECK(d.cycles[k][0].op == std::to_string(2 * k) + "SEND_F0");
    CHECK(d.cycles[k][1].op == std::to_string(2 * k + 1) + "SEND_B0");
    CHECK(d.cycles[k][1].peer == static_cast<int>(2 * k));
  }
  // The unlisted cycles are counted, not misreported as ranks waiting behind a cycle.
  CHECK(d.blocked.empty());
  CHECK(d.unmatched.empty());
  const std::string text_out = d.describe();
  CHECK(text_out.find("(cut: 44 more cycles not listed)") != std::string::npos);
  CHECK(text_out.find("rank 512 blocked") == std::string::npos);

  record::RunRecord rec;
  rec.metrics = r;
  rec.deadlock = r.deadlock;
  CHECK(rec.verdict().text() == "DEADLOCK (300 cycles)");
  const auto j = viz::to_json(d);
  CHECK(j.at("cycles").size() == 256);
  CHECK(j.at("cycles_total") == 300);
  // Uncut reports keep their old shape.
  CHECK_FALSE(viz::to_json(record::Deadlock{}).contains("cycles_total"));
}

TEST_CASE("scale.program_microbatch_id_10_8", "[scale][validation]") {
  // A program with microbatch id 10^8 is validated and simulated by the cells it touches
  const auto prog = schedules::Program::parse("0F100000000,0B100000000");
  REQUIRE(prog.microbatches() == 100000001);
  const auto diags = schedules::validate(prog);
  // Microbatches 0..99999999 have no ops: two missing_compute each, 1000 listed, in order.
  REQUIRE(diags.size() == 1001);
  CHECK(diags[0].kind == "missing_compute");
  CHECK(diags[0].message == "rank 0: stage 0 microbatch 0: no forward 0F0");
  CHECK(diags[1].message == "rank 0: stage 0 microbatch 0: no backward (0B0 or 0I0 + 0W0)");
  CHECK(diags[999].message ==
        "rank 0: stage 0 microbatch 499: no backward (0B499 or 0I499 + 0W499)");
  CHECK(diags[1000].kind == "too_many_diagnostics");
  CHECK(diags[1000].message == "199999000 more diagnostics were not listed");
  CHECK_FALSE(schedules::has_fatal(diags));

  const auto r = sim::simulate(prog, test::uniform(1, 1, 2));
  CHECK_FALSE(r.deadlock);
  CHECK(r.errors.empty());
  CHECK(r.makespan == 3.0);
  REQUIRE(r.per_rank.size() == 1);
  CHECK(r.per_rank[0].ops_done == 2u);
  CHECK(r.per_rank[0].peak_inflight == 1);
}

TEST_CASE("scale.send_receive_microbatch_10_8", "[scale]") {
  // Sparse cells across ranks: send and receive of microbatch 10^8 match
  const auto prog = schedules::Program::parse(
      "0F100000000,0SEND_F100000000,0RECV_B100000000,0B100000000\n"
      "1RECV_F100000000,1F100000000,1B100000000,1SEND_B100000000\n");
  const auto diags = schedules::validate(prog);
  REQUIRE(diags.size() == 1001);  // only the untouched microbatches
  for (const auto& d : diags)
    CHECK((d.kind == "missing_compute" || d.kind == "too_many_diagnostics"));
  // 2 stages x 10^8 untouched microbatches x 2.
  CHECK(diags.back().message == "399999000 more diagnostics were not listed");
  auto o = test::uniform(2, 1, 2);
  o.network.latency = 0.5;
  const auto r = sim::simulate(prog, o);
  CHECK_FALSE(r.deadlock);
  CHECK(r.makespan == 1 + 0.5 + 1 + 2 + 0.5 + 2);
}

namespace {
// Rank 0 runs n forwards, posts n sends, waits them in one WAIT of n ids, then receives the n
// gradients; rank 1 receives all, computes, sends the gradients back.
schedules::Program wide_wait(int n) {
  std::string r0, r1, ids, back_ids;
  auto add = [](std::string& s, const std::string& op) {
    if (!s.empty()) s += ',';
    s += op;
  };
  for (int m = 0; m < n; ++m) add(r0, "0F" + std::to_string(m));
  for (int m = 0; m < n; ++m) {
    add(r0, "0SEND_F" + std::to_string(m) + "#" + std::to_string(m));
    if (m) {
      ids += ';';
      back_ids += ';';
    }
    ids += std::to_string(m);
    back_ids += std::to_string(n + m);
  }
  add(r0, "WAIT(" + ids + ")");
  for (int m = 0; m < n; ++m) add(r0, "0RECV_B" + std::to_string(m) + "#" + std::to_string(n + m));
  add(r0, "WAIT(" + back_ids + ")");
  for (int m = 0; m < n; ++m) add(r0, "0B" + std::to_string(m));
  for (int m = 0; m < n; ++m) add(r1, "1RECV_F" + std::to_string(m) + "#" + std::to_string(m));
  add(r1, "WAIT(" + ids + ")");
  for (int m = 0; m < n; ++m) add(r1, "1F" + std::to_string(m));
  for (int m = 0; m < n; ++m) add(r1, "1B" + std::to_string(m));
  for (int m = 0; m < n; ++m) add(r1, "1SEND_B" + std::to_string(m) + "#" + std::to_string(n + m));
  add(r1, "WAIT(" + back_ids + ")");
  return schedules::Program::parse(r0 + "\n" + r1 + "\n");
}
}  // namespace

TEST_CASE("scale.wait_65_535_requests_completes", "[scale][wait]") {
  // A WAIT on 65,535 requests completes when its last request does
  const int n = 65535;
  const auto prog = wide_wait(n);
  CHECK(schedules::validate(prog).empty());
  auto o = test::uniform(2, 1, 2);
  o.network.latency = 0.5;  // one link each way: the n transfers finish 0.5 apart
  const auto r = sim::simulate(prog, o);
  CHECK_FALSE(r.deadlock);
  CHECK(r.errors.empty());
  // Rank 0: n forwards, n sends (n * 0.5), rank 1's 3n of compute, n gradients, n backwards.
  CHECK(r.makespan == 6.0 * n + 2 * 0.5 * n);
  CHECK(r.per_rank[0].ops_done == prog.ops(0).size());
  // The n sends and n receives are all in flight at once: the engine's endpoint table grew
  // through several doublings (each into memory faulted in ahead) and kept every record.
  CHECK(r.endpoint_records >= 2 * static_cast<std::size_t>(n));
}

TEST_CASE("scale.diagnostics_wait_65_535_ids", "[scale][wait][validation]") {
  // Diagnostics on a WAIT of 65,535 ids name it by its first ids and its count
  std::string ids;
  for (int i = 0; i < 65535; ++i) {
    if (i) ids += ';';
    ids += std::to_string(i);
  }
  const auto diags = schedules::validate(schedules::Program::parse("0F0,0B0,WAIT(" + ids + ")"));
  REQUIRE(diags.size() == 1001);
  const std::string label = "WAIT(0;1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;\u2026 65535 ids)";
  CHECK(diags[0].kind == "unknown_request");
  CHECK(diags[0].op == label);
  CHECK(diags[0].message ==
        "rank 0 op 2 (" + label + "): request #0 was never posted before this WAIT");
  CHECK(diags[1000].message == "64535 more diagnostics were not listed");
}

TEST_CASE("scale.engine_memory_follows_comm_ops", "[scale][memory]") {
  // Engine memory follows the comm ops in flight: 1F1B holds as many records at M=2048 as at M=64
  // Under mpi semantics a comm op's record is reused once its rank is past it, its buffer is
  // released and its transfer has started; 1F1B keeps at most P-r activations in flight per rank.
  const int P = 8;
  auto records = [&](int M, std::string_view style) {
    const auto prog = test::lowered("1f1b", P, M, 1, style);
    auto o = test::uniform(P, 1, 2);
    o.network.latency = 0.25;
    o.network.bandwidth = 1e6;
    o.network.boundary_bytes = 1 << 20;
    o.memory.activation_bytes = 1 << 24;
    const auto r = sim::simulate(prog, o);
    REQUIRE_FALSE(r.deadlock);
    // 1F1B bubble with comm: more than (P-1)/(M+P-1), the closed form without it.
    CHECK(r.bubble_fraction > static_cast<double>(P - 1) / (M + P - 1));
    return r.endpoint_records;
  };
  for (const auto* style : {"async", "async-send", "batched", "megatron"}) {
    INFO(style);
    const std::size_t small = records(64, style), large = records(2048, style);
    CHECK(large == small);
    CHECK(large <= static_cast<std::size_t>(8 * P * P));  // 2048 * 4 * (P-1) comm ops in all
  }
}

TEST_CASE("scale.under_nccl_semantics_engine_keeps", "[scale][memory][nccl]") {
  // Under nccl semantics the engine keeps every comm op's record (its streams name them)
  auto o = test::uniform(4, 1, 2);
  o.network.semantics = model::P2pSemantics::nccl;
  o.network.matching = model::Matching::fifo;
  const auto prog = test::lowered("1f1b", 4, 32, 1, "async");
  const auto r = sim::simulate(prog, o);  // (one stream per rank: it hangs, which changes nothing)
  std::size_t comm = 0;
  for (int rank = 0; rank < prog.ranks(); ++rank)
    for (const auto& op : prog.ops(rank)) comm += schedules::is_comm(op.kind);
  CHECK(r.endpoint_records == comm);
}
