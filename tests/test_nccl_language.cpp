// The op-list side of comm.semantics nccl: group markers in the text form, their validation, the
// config keys of each model, and the lowerings that write groups.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "error_of.hpp"
#include "helpers.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/schedules/validation.hpp"

using namespace ppsim;
using schedules::Diagnostic;
using schedules::OpKind;
using schedules::Program;

namespace {

std::vector<std::string> kinds_of(const std::vector<Diagnostic>& ds) {
  std::vector<std::string> out;
  for (const auto& d : ds)
    out.push_back(d.kind + "@" + std::to_string(d.rank) + ":" + std::to_string(d.position));
  return out;
}

config::Config config_of(const std::string& text) {
  return config::parse_config(nlohmann::json::parse(text), "test.json");
}

}  // namespace

TEST_CASE("nccl_language.group_markers_parse_print_back", "[nccl][text]") {
  // Group markers parse, print back and take no stage
  const std::string text =
      "0F0,GROUP_START,0SEND_F0#0,0RECV_B0#1,GROUP_END,WAIT(0;1),0B0\n"
      "1RECV_F0#0,WAIT(0),1F0,1B0,GROUP_START,GROUP_START,1SEND_B0#1,GROUP_END,GROUP_END,WAIT(1)\n";
  const Program p = Program::parse(text);
  CHECK(p.to_text() == text);
  CHECK(p.stages() == 2);
  CHECK(p.microbatches() == 1);
  REQUIRE(p.ops(0).size() == 7);
  CHECK(p.ops(0)[1].kind == OpKind::GROUP_START);
  CHECK(p.ops(0)[4].kind == OpKind::GROUP_END);
  CHECK(schedules::is_group_marker(OpKind::GROUP_END));
  CHECK_FALSE(schedules::is_comm(OpKind::GROUP_START));
  CHECK(schedules::validate(p).empty());
  // A marker with a stage is no op the language has.
  const auto e =
      test::error_of<schedules::ParseError>([] { Program::parse("0GROUP_START,0F0\n"); });
  CHECK(std::string(e.what()).find("GROUP_START or GROUP_END") != std::string::npos);
}

TEST_CASE("nccl_language.groups_must_balance_nothing_waits", "[nccl][validation]") {
  // Groups must balance and nothing waits inside one
  // A GROUP_END with no group open; a group never closed (reported at its GROUP_START).
  const auto end_alone = schedules::validate(
      Program::parse("0F0,0SEND_F0#0,GROUP_END,WAIT(0),0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n"));
  REQUIRE(!end_alone.empty());
  CHECK(end_alone[0].kind == "unbalanced_group");
  CHECK(end_alone[0].rank == 0);
  CHECK(end_alone[0].position == 2);
  CHECK(end_alone[0].fatal);
  const auto open =
      schedules::validate(Program::parse("0F0,GROUP_START,GROUP_START,0SEND_F0#0,GROUP_END,WAIT(0),"
                                         "0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n"));
  CHECK(kinds_of(open) == std::vector<std::string>{"blocking_in_group@0:5", "blocking_in_group@0:6",
                                                   "unbalanced_group@0:1"});
  CHECK(open[2].message.find("1 GROUP_END is missing") != std::string::npos);
  // A blocking receive inside a group waits for a kernel that launches at GROUP_END.
  const auto blocking = schedules::validate(Program::parse(
      "0F0,0SEND_F0,0RECV_B0,0B0\nGROUP_START,1RECV_F0,GROUP_END,1F0,1B0,1SEND_B0\n"));
  REQUIRE(!blocking.empty());
  CHECK(blocking[0].kind == "blocking_in_group");
  CHECK(blocking[0].rank == 1);
  CHECK(blocking[0].position == 1);
  CHECK(blocking[0].message.find("group opened at op 0") != std::string::npos);
  // Compute ops inside a group are fine (the host computes while the group is open).
  CHECK(schedules::validate(
            Program::parse("0F0,GROUP_START,0SEND_F0#0,0F1,0SEND_F1#1,GROUP_END,0RECV_B0#2,"
                           "0RECV_B1#3,WAIT(0;1;2;3),0B0,0B1\n"
                           "1RECV_F0,1RECV_F1,1F0,1F1,1B0,1SEND_B0,1B1,1SEND_B1\n"))
            .empty());
}

TEST_CASE("nccl_language.buffer_released_before_wait_under", "[nccl][validation]") {
  // NCCL keeps a sent tensor alive: no buffer_released_before_wait under nccl
  const Program p = Program::parse(
      "0F0,0SEND_F0#0,0RECV_B0#1,WAIT(1),0B0,WAIT(0)\n"
      "1RECV_F0,1F0,1B0,1SEND_B0\n");
  CHECK(kinds_of(schedules::validate(p)) ==
        std::vector<std::string>{"buffer_released_before_wait@0:4"});
  CHECK(schedules::validate(p, {.send_buffers_released_early = true}).empty());
}

TEST_CASE("nccl_language.comm_semantics_keys_model", "[nccl][config]") {
  // comm.semantics and the keys of each model
  const std::string head =
      R"({"schedule": {"kind": "1f1b", "ranks": 4, "microbatches": 8}, "comm": )";
  const config::Config mpi = config_of(head + "{}}");
  CHECK(mpi.network.semantics == model::P2pSemantics::mpi);
  CHECK(mpi.network.matching == model::Matching::tag);
  CHECK_FALSE(mpi.lowering.groups);

  const config::Config nccl =
      config_of(head + R"({"semantics": "nccl", "nccl_buffer_bytes": 65536, "nccl_streams": "peer",
                 "nccl_max_group_ops": 3}})");
  CHECK(nccl.network.semantics == model::P2pSemantics::nccl);
  CHECK(nccl.network.matching == model::Matching::fifo);
  CHECK(nccl.network.nccl_buffer_bytes == 65536);
  CHECK(nccl.network.nccl_streams == model::NcclStreams::peer);
  CHECK(nccl.network.nccl_max_group_ops == 3);
  CHECK(nccl.lowering.groups);
  CHECK(config_of(head + R"({"semantics": "nccl", "matching": "fifo"}})").network.matching ==
        model::Matching::fifo);

  auto fails = [&](const std::string& comm) {
    return test::error_of([&] { config_of(head + comm + "}"); });
  };
  const auto tag = fails(R"({"semantics": "nccl", "matching": "tag"})");
  CHECK(tag.key() == "comm.matching");
  CHECK(std::string(tag.what()).find("NCCL has no tags") != std::string::npos);
  const auto eager = fails(R"({"semantics": "nccl", "eager_limit": 100})");
  CHECK(eager.key() == "comm.eager_limit");
  CHECK(std::string(eager.what()).find("comm.nccl_buffer_bytes") != std::string::npos);
  for (const char* key : {"nccl_buffer_bytes", "nccl_streams", "nccl_max_group_ops"}) {
    const auto e = fails(fmt::format(R"({{"{}": 1}})", key));
    CHECK(e.key() == std::string("comm.") + key);
    CHECK(std::string(e.what()).find("only used under comm.semantics \"nccl\"") !=
          std::string::npos);
  }
  CHECK(fails(R"({"semantics": "gloo"})").key() == "comm.semantics");
  CHECK(fails(R"({"semantics": "nccl", "nccl_streams": "channel"})").key() == "comm.nccl_streams");
  CHECK(fails(R"({"semantics": "nccl", "nccl_max_group_ops": -1})").key() ==
        "comm.nccl_max_group_ops");
}

TEST_CASE("nccl_language.under_nccl_batched_megatron_write", "[nccl][lowering]") {
  // Under nccl, batched and megatron write each batch as a group, the others none
  auto lower = [](const std::string& kind, int V, const std::string& style, bool groups) {
    schedules::ScheduleParams params{{"ranks", 4}, {"microbatches", 8}};
    if (V > 1) params.set("chunks", V);
    schedules::LoweringOptions l{style, {}};
    l.groups = groups;
    return schedules::lower(schedules::generate(kind, params), l);
  };
  auto markers = [](const Program& p) {
    int n = 0;
    for (int r = 0; r < p.ranks(); ++r)
      for (const auto& op : p.ops(r)) n += schedules::is_group_marker(op.kind);
    return n;
  };
  for (const char* style : {"async", "async-send", "blocking"}) {
    CAPTURE(style);
    CHECK(markers(lower("1f1b", 1, style, true)) == 0);
  }
  // Without groups the program is the one lowered before groups existed.
  const Program plain = lower("1f1b", 1, "batched", false);
  const Program grouped = lower("1f1b", 1, "batched", true);
  CHECK(markers(plain) == 0);
  // Rank 1 of 1F1B P=4 M=8: each steady-state pair (send + receive) is a group, nothing else.
  CHECK(
      test::rank_line(grouped, 1)
          .find("GROUP_START,1SEND_F2#0,1RECV_B0#1,GROUP_END,WAIT(0;1),1B0,GROUP_START,1SEND_B0#2,"
                "1RECV_F3#3,GROUP_END,WAIT(2;3)") != std::string::npos);
  for (int r = 0; r < grouped.ranks(); ++r) {
    // Dropping the markers gives back the program without groups, op for op.
    schedules::OpList ops;
    for (const auto& op : grouped.ops(r))
      if (!schedules::is_group_marker(op.kind)) ops.push_back(op);
    CHECK(ops == plain.ops(r));
  }
  CHECK(schedules::validate(grouped).empty());
  // Megatron's batch_isend_irecv batches are groups; with overlap_p2p_comm its _p2p_ops are not.
  const Program meg = lower("interleaved-1f1b", 2, "megatron", true);
  CHECK(markers(meg) > 0);
  CHECK(schedules::validate(meg).empty());
  schedules::ScheduleParams params{{"ranks", 4}, {"microbatches", 8}, {"chunks", 2}};
  schedules::LoweringOptions overlap{"megatron", {}};
  overlap.params.set("overlap_p2p_comm", 1);
  overlap.groups = true;
  CHECK(markers(schedules::lower(schedules::generate("interleaved-1f1b", params), overlap)) == 0);
}
