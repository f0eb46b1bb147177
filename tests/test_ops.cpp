// Ops: kinds classified by their table (not by the enum's order), composite OVERLAP_F_B ops and
// PyTorch's resource actions parsed, carried, validated and simulated.
#include <catch2/catch.hpp>

#include "error_of.hpp"
#include "helpers.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/semantics.hpp"
#include "ppsim/sim/analysis.hpp"

using namespace ppsim;
using schedules::Op;
using schedules::OpClass;
using schedules::OpKind;
using schedules::Program;

TEST_CASE("ops.kind_has_table_row_classification", "[ops]") {
  // Op kinds: every kind has one table row, classification reads the table
  REQUIRE(schedules::kOpKindCount == 15);
  for (std::size_t k = 0; k < schedules::kOpKindCount; ++k) {
    const auto kind = static_cast<OpKind>(k);
    const auto& info = schedules::info(kind);
    INFO(info.name);
    CHECK(schedules::is_compute(kind) == (info.cls == OpClass::compute));
    CHECK(schedules::is_comm(kind) == (info.cls == OpClass::p2p));
    CHECK((schedules::is_send(kind) || schedules::is_recv(kind)) == schedules::is_comm(kind));
    CHECK_FALSE((schedules::is_send(kind) && schedules::is_recv(kind)));
  }
  CHECK(schedules::is_compute(OpKind::OVERLAP_F_B));
  CHECK(schedules::is_composite(OpKind::OVERLAP_F_B));
  CHECK_FALSE(schedules::is_compute(OpKind::WAIT));
  CHECK(schedules::info(OpKind::UNSHARD).cls == OpClass::resource);
  CHECK(schedules::info(OpKind::REDUCE_GRAD).cls == OpClass::resource);
  CHECK(schedules::info(OpKind::GROUP_START).cls == OpClass::group);
  CHECK(schedules::info(OpKind::SEND_B).backward);
  CHECK_FALSE(schedules::info(OpKind::SEND_F).backward);
  // 16 bytes: growing it costs 1 byte in 16 of every program and every copy of one.
  CHECK(sizeof(Op) == 16);
}

TEST_CASE("ops.0f7_7b3_overlap_f_b", "[ops][program_text]") {
  // OVERLAP_F_B: (0F7 with 7B3)OVERLAP_F_B parses into one op with two parts and prints back
  // Two ranks, V placement of 4 stages: stages 0 and 3 on rank 0, stages 1 and 2 on rank 1.
  const auto parse_row0 = Program::parse(
      "0F0,0F1,(0F2;3B0)OVERLAP_F_B,3F0,3B1,3B2,0B0,0B1,0B2\n"
      "1F0,2F0,1F1,2F1,1F2,2F2,2B0,1B0,2B1,1B1,2B2,1B2\n");
  const Op& ov = parse_row0.ops(0)[2];
  CHECK(ov.kind == OpKind::OVERLAP_F_B);
  REQUIRE(parse_row0.parts(0, ov).size() == 2);
  CHECK(parse_row0.parts(0, ov)[0] == Op::compute(OpKind::F, 0, 2));
  CHECK(parse_row0.parts(0, ov)[1] == Op::compute(OpKind::B, 3, 0));
  CHECK(parse_row0.op_text(0, ov) == "(0F2;3B0)OVERLAP_F_B");
  CHECK(Program::parse(parse_row0.to_text()).to_text() == parse_row0.to_text());
  // Placement comes from the parts too.
  CHECK(parse_row0.rank_of(3) == 0);
}

TEST_CASE("ops.overlap_f_b_must_hold", "[ops][program_text]") {
  // OVERLAP_F_B must hold a forward and then a backward
  for (const char* bad : {"(0F0)OVERLAP_F_B", "(0B0;0F1)OVERLAP_F_B", "(0F0;0F1)OVERLAP_F_B",
                          "(0F0;0B0;0B1)OVERLAP_F_B", "(0F0;0B0)OVERLAP", "(0F0;0B0"}) {
    INFO(bad);
    CHECK_THROWS_AS(Program::parse(bad), schedules::ParseError);
  }
}

TEST_CASE("ops.overlapped_f_b_runs_both", "[ops][sim]") {
  // An overlapped F&B runs both parts in one slot of F + B and has both parts' effects
  // Rank 1 runs 1F1 together with the backward 1B0 of the previous microbatch.
  const Program p = Program::parse(
      "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
      "1RECV_F0,1F0,1RECV_F1,(1F1;1B0)OVERLAP_F_B,1SEND_B0,1B1,1SEND_B1\n");
  CHECK(schedules::validate(p).empty());
  auto o = test::uniform(2, 1.0, 2.0);
  o.memory.activation_bytes = 100;
  const auto r = sim::simulate(p, o);
  REQUIRE_FALSE(r.deadlock);
  CHECK(r.per_rank[1].busy == 1.0 + 3.0 + 2.0);  // F, overlapped F+B, B
  // At most two microbatches live on rank 1: the overlapped op stashes 1 and frees 0.
  CHECK(r.per_rank[1].peak_inflight == 2);
  CHECK(r.per_rank[1].peak_memory_bytes == 200);
  // Lowering carries the composite over with its parts and adds both parts' transfers.
  const Program compute = Program::parse("0F0,0F1,0B0,0B1\n1F0,(1F1;1B0)OVERLAP_F_B,1B1\n");
  for (const auto& l : test::all_lowerings()) {
    INFO(test::describe(l));
    if (!test::accepts(l, compute)) continue;
    const Program lowered = schedules::lower(compute, l);
    CHECK(schedules::validate(lowered).empty());
    CHECK(lowered.op_text(1, lowered.ops(1)[0]).find("RECV_F0") != std::string::npos);
    bool found = false;
    for (const Op& op : lowered.ops(1))
      if (op.kind == OpKind::OVERLAP_F_B) {
        found = true;
        CHECK(lowered.op_text(1, op) == "(1F1;1B0)OVERLAP_F_B");
      }
    CHECK(found);
  }
}

TEST_CASE("ops.unshard_reshard_reduce_grad_parsed", "[ops]") {
  // UNSHARD, RESHARD, REDUCE_GRAD: parsed, printed, validated, carried at no cost
  const Program p = Program::parse(
      "0UNSHARD,0F0,0SEND_F0,0RECV_B0,0B0,0REDUCE_GRAD,0RESHARD\n"
      "1UNSHARD,1RECV_F0,1F0,1B0,1SEND_B0,1REDUCE_GRAD,1RESHARD\n");
  CHECK(p.ops(0)[0].kind == OpKind::UNSHARD);
  CHECK(p.op_text(0, p.ops(0)[5]) == "0REDUCE_GRAD");
  CHECK(Program::parse(p.to_text()).to_text() == p.to_text());
  CHECK(schedules::validate(p).empty());
  const auto r = sim::simulate(p, test::uniform(2, 1, 2));
  CHECK_FALSE(r.deadlock);
  CHECK(r.ops_executed == p.total_ops());
  CHECK(r.makespan == 6.0);  // F, F, B, B on the critical path; the resource ops take no time
  // A microbatch number or a request id on a resource op is an error.
  CHECK_THROWS_AS(Program::parse("0UNSHARD1\n"), schedules::ParseError);
  CHECK_THROWS_AS(Program::parse("0RESHARD#1\n"), schedules::ParseError);
}

TEST_CASE("ops.wait_holds_most_65535_request", "[ops]") {
  // A WAIT holds at most 65535 request ids: more is refused, not truncated
  std::string text = "0F0,0B0,WAIT(";
  for (int i = 0; i < 65536; ++i) {
    if (i > 0) text += ';';
    text += std::to_string(i);
  }
  text += ")\n";
  CHECK_THROWS_WITH(Program::parse(text), Catch::Contains("at most 65535"));
  Program p(1, schedules::make_placement(schedules::PlacementKind::loop, 1, 1));
  std::vector<std::int32_t> ids(65536, 0);
  CHECK_THROWS_AS(p.push_wait(0, ids), schedules::ParameterError);
}

TEST_CASE("ops.simulate_refuses_comm_op_without", "[ops]") {
  // simulate() refuses a comm op without a peer in a program never validated, also one it saw
  // ahead of a compute op's end
  // Rank 0 resumes after 0F0 with 0RECV_F0 a few ops ahead: the engine looks at it then (to
  // prefetch its tensor's record) before it posts it; stage 0 has no previous stage.
  const Program p = Program::parse("0F0,0F1,0RECV_F0#0,WAIT(0)\n1F0,1F1\n");
  REQUIRE(p.ranks() == 2);
  const auto e = test::error_of<sim::SimulationError>(
      [&] { sim::simulate(p, test::uniform(p.stages(), 1, 2)); });
  CHECK(std::string(e.what()) == "rank 0 op 2: 0RECV_F0#0 has no peer on another rank");
}

TEST_CASE("ops.program_chunks_counts_rank_s", "[ops]") {
  // Program::chunks_on counts each rank's stages, for every placement
  // Counted once when the Program is made (a scan of the placement per rank made lowering
  // quadratic in ranks, bench/wide_pipelines.py); checked here against a count of the placement.
  using schedules::make_placement;
  using schedules::PlacementKind;
  for (const auto kind : {PlacementKind::loop, PlacementKind::v})
    for (const int ranks : {1, 2, 5, 8})
      for (const int chunks : {1, 2, 3}) {
        const Program p(4, make_placement(kind, ranks, chunks));
        for (int r = 0; r < ranks; ++r) CHECK(p.chunks_on(r) == chunks);
        CHECK(p.chunks_on(ranks) == 0);  // past the last rank, and below the first
        CHECK(p.chunks_on(-1) == 0);
      }
  // Uneven: rank 0 runs stages 0 and 2, rank 1 stage 1, rank 2 none (IDLE in the text form).
  Program uneven(2, {{0, 0}, {1, 0}, {0, 1}});
  uneven.ensure_ranks(3);
  CHECK(uneven.chunks_on(0) == 2);
  CHECK(uneven.chunks_on(1) == 1);
  CHECK(uneven.chunks_on(2) == 0);
}

TEST_CASE("ops.compute_only_lists_keep_unshard", "[ops][lowering]") {
  // ops.resource_actions_lowered: compute-only lists keep UNSHARD/RESHARD/REDUCE_GRAD
  // OPLISTS.md: a compute-only list with PyTorch's resource actions is lowered like any other;
  // each action stays right before the compute op it preceded and takes no time.
  const std::string with = R"({"schedule": {"kind": "custom", "ops": [
      "0UNSHARD,0F0,0F1,0B0,0RESHARD,0B1,0REDUCE_GRAD",
      "1UNSHARD,1F0,1B0,1F1,1B1,1REDUCE_GRAD"]}, "comm": {"style": "STYLE"}})";
  const std::string without = R"({"schedule": {"kind": "custom", "ops": [
      "0F0,0F1,0B0,0B1", "1F0,1B0,1F1,1B1"]}, "comm": {"style": "STYLE"}})";
  auto load = [](std::string text, const std::string& style) {
    text.replace(text.find("STYLE"), 5, style);
    return config::parse_config(nlohmann::json::parse(text), "resource.json");
  };
  for (const std::string style : {"async", "async-send", "batched", "blocking", "megatron"}) {
    INFO(style);
    const auto a = sim::analyze(load(with, style));
    const auto b = sim::analyze(load(without, style));
    // The same verdict either way (blocking sends deadlock this order, with or without them).
    CHECK(a.verdict().text() == b.verdict().text());
    REQUIRE(a.metrics);
    CHECK(a.metrics->makespan == b.metrics->makespan);
    // The lowered lists are the plain ones with the actions put back in place.
    for (int r = 0; r < 2; ++r) {
      std::string got, want;
      for (const Op& op : a.program->ops(r))
        if (schedules::info(op.kind).cls != schedules::OpClass::resource)
          got += a.program->op_text(r, op) + ",";
      for (const Op& op : b.program->ops(r)) want += b.program->op_text(r, op) + ",";
      CHECK(got == want);
    }
    const std::string rank0 = a.program->to_text().substr(0, a.program->to_text().find('\n'));
    CHECK(rank0.find("0UNSHARD,0F0") != std::string::npos);
    CHECK(rank0.find("0RESHARD,0B1") != std::string::npos);
    CHECK(rank0.ends_with("0REDUCE_GRAD"));
  }
}
