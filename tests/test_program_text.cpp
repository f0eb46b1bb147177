// The op-list text form: op_text, Program::to_text / Program::parse, placement inference,
// ParseError positions and tensor_of.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "helpers.hpp"
#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/op.hpp"
#include "ppsim/schedules/program.hpp"
#include "ppsim/schedules/semantics.hpp"

using namespace ppsim::schedules;
using CommStyle = std::string_view;

namespace {

struct LoweredCase {
  std::string kind;
  int P, M, V;
  CommStyle style;
  int prefetch;
  std::string name() const {
    return kind + " P=" + std::to_string(P) + " M=" + std::to_string(M) +
           " V=" + std::to_string(V) + " style=" + std::string(style) +
           " prefetch=" + std::to_string(prefetch);
  }
};

// Every comm style (async with several prefetch depths) over small gpipe, 1f1b and interleaved
// runs.
std::vector<LoweredCase> lowered_cases() {
  std::vector<LoweredCase> cases;
  for (const auto& s : ppsim::test::all_lowerings()) {
    for (const char* kind : {"gpipe", "1f1b"})
      for (int P : {1, 2, 4})
        for (int M : {1, 3, 6}) {
          // megatron models 1f1b and interleaved-1f1b only
          if (s.style == "megatron" && std::string_view(kind) == "gpipe") continue;
          cases.push_back({kind, P, M, 1, s.style, static_cast<int>(s.params.get("prefetch", 1))});
        }
    for (int P : {3, 4})
      for (int V : {2, 3})
        for (int M : {P, 2 * P})
          cases.push_back({"interleaved-1f1b", P, M, V, s.style,
                           static_cast<int>(s.params.get("prefetch", 1))});
  }
  return cases;
}

using ppsim::test::parse_error_of;

// The ParseError of `text`, at `line` and `column`.
ParseError check_parse_error(const std::string& text, int line, int column) {
  INFO("text: '" << text << "'");
  const ParseError e = parse_error_of(text);
  CHECK(e.line() == line);
  CHECK(e.column() == column);
  return e;
}

}  // namespace

TEST_CASE("program_text.compute_ops_stage_f_b", "[program_text]") {
  // op_text: compute ops are <stage><F|B|I|W><microbatch>
  CHECK(op_text(Op::compute(OpKind::F, 2, 0)) == "2F0");
  CHECK(op_text(Op::compute(OpKind::B, 0, 1)) == "0B1");
  CHECK(op_text(Op::compute(OpKind::I, 0, 5)) == "0I5");
  CHECK(op_text(Op::compute(OpKind::W, 0, 5)) == "0W5");
  CHECK(op_text(Op::compute(OpKind::F, 12, 345)) == "12F345");
}

TEST_CASE("program_text.blocking_comm_ops_stage_send", "[program_text]") {
  // op_text: blocking comm ops are <stage><SEND_F|RECV_F|SEND_B|RECV_B><microbatch>
  CHECK(op_text(Op::comm(OpKind::SEND_F, 1, 3)) == "1SEND_F3");
  CHECK(op_text(Op::comm(OpKind::RECV_F, 1, 3)) == "1RECV_F3");
  CHECK(op_text(Op::comm(OpKind::SEND_B, 1, 3)) == "1SEND_B3");
  CHECK(op_text(Op::comm(OpKind::RECV_B, 0, 1)) == "0RECV_B1");
}

TEST_CASE("program_text.async_comm_op_appends_request", "[program_text]") {
  // op_text: an async comm op appends #<request id>
  const Op send = Op::comm(OpKind::SEND_F, 1, 3, 7);
  CHECK(send.async);
  CHECK(op_text(send) == "1SEND_F3#7");
  CHECK(op_text(Op::comm(OpKind::RECV_B, 2, 0, 0)) == "2RECV_B0#0");
  CHECK_FALSE(Op::comm(OpKind::SEND_F, 1, 3).async);
}

TEST_CASE("program_text.program_op_text_wait_lists", "[program_text]") {
  // Program::op_text: WAIT lists its request ids separated by semicolons
  Program p(1, make_placement(PlacementKind::loop, 2, 1));
  p.push(0, Op::comm(OpKind::SEND_F, 0, 0, 7));
  p.push(0, Op::comm(OpKind::RECV_B, 0, 0, 8));
  const std::vector<std::int32_t> ids = {7, 8};
  p.push_wait(0, ids);
  const std::vector<std::int32_t> one = {3};
  p.push_wait(1, one);
  CHECK(p.op_text(0, p.ops(0)[2]) == "WAIT(7;8)");
  CHECK(p.op_text(1, p.ops(1)[0]) == "WAIT(3)");
  // Non-WAIT ops print as the free op_text does; the free one cannot see the ids.
  CHECK(p.op_text(0, p.ops(0)[0]) == "0SEND_F0#7");
  CHECK(op_text(p.ops(0)[2]) == "WAIT");
  CHECK(p.to_text() == "0SEND_F0#7,0RECV_B0#8,WAIT(7;8)\nWAIT(3)\n");
}

TEST_CASE("program_text.program_parse_reads_op_kind", "[program_text]") {
  // Program::parse reads every op kind and WAIT ids back
  const Program p = Program::parse(
      "0F0,0SEND_F0#7,0RECV_B0#8,WAIT(7;8),0I0,0W0\n"
      "1RECV_F0,1F0,1B0,1SEND_B0\n");
  REQUIRE(p.ranks() == 2);
  REQUIRE(p.ops(0).size() == 6);
  REQUIRE(p.ops(1).size() == 4);
  CHECK(p.ops(0)[0] == Op::compute(OpKind::F, 0, 0));
  CHECK(p.ops(0)[1] == Op::comm(OpKind::SEND_F, 0, 0, 7));
  CHECK(p.ops(0)[2] == Op::comm(OpKind::RECV_B, 0, 0, 8));
  CHECK(p.ops(0)[3].kind == OpKind::WAIT);
  CHECK(p.ops(0)[3].list_size == 2);
  const auto ids = p.wait_ids(0, p.ops(0)[3]);
  CHECK(std::vector<std::int32_t>(ids.begin(), ids.end()) == std::vector<std::int32_t>{7, 8});
  CHECK(p.ops(0)[4] == Op::compute(OpKind::I, 0, 0));
  CHECK(p.ops(0)[5] == Op::compute(OpKind::W, 0, 0));
  CHECK(p.ops(1)[0] == Op::comm(OpKind::RECV_F, 1, 0));
  CHECK(p.ops(1)[3] == Op::comm(OpKind::SEND_B, 1, 0));
}

TEST_CASE("program_text.program_parse_ignores_comment_lines", "[program_text]") {
  // Program::parse ignores '#' comment lines, spaces and a trailing comma, a blank line is an
  // error
  const Program p =
      Program::parse("# two ranks\n 0F0 , 0SEND_F0 ,\r\n# next\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  CHECK(parse_error_of("# two ranks\n 0F0 , 0SEND_F0 ,\r\n\n1RECV_F0,1F0,1B0,1SEND_B0\n").line() ==
        3);
  REQUIRE(p.ranks() == 2);
  CHECK(p.op_text(0, p.ops(0)[0]) == "0F0");
  CHECK(p.op_text(0, p.ops(0)[1]) == "0SEND_F0");
  CHECK(p.ops(0).size() == 2);
  CHECK(p.ops(1).size() == 4);
}

TEST_CASE("program_text.text_then_parse_identity_ops", "[program_text]") {
  // to_text then parse is the identity on ops, WAIT ids and placement (all comm styles)
  for (const LoweredCase& c : lowered_cases()) {
    INFO(c.name());
    const Program original = ppsim::test::lowered(c.kind, c.P, c.M, c.V, c.style, c.prefetch);
    const std::string text = original.to_text();
    const Program parsed = Program::parse(text);
    REQUIRE(parsed.ranks() == original.ranks());
    CHECK(parsed.microbatches() == original.microbatches());
    CHECK(parsed.stages() == original.stages());
    CHECK(parsed.chunks() == original.chunks());
    CHECK(parsed.placement() == original.placement());
    for (int r = 0; r < original.ranks(); ++r) {
      INFO("rank " << r);
      const auto& a = original.ops(r);
      const auto& b = parsed.ops(r);
      REQUIRE(a.size() == b.size());
      bool same = true;
      for (std::size_t i = 0; i < a.size() && same; ++i) {
        same = a[i] == b[i] && original.op_text(r, a[i]) == parsed.op_text(r, b[i]);
        if (same && a[i].kind == OpKind::WAIT) {
          const auto wa = original.wait_ids(r, a[i]);
          const auto wb = parsed.wait_ids(r, b[i]);
          same = std::vector<std::int32_t>(wa.begin(), wa.end()) ==
                 std::vector<std::int32_t>(wb.begin(), wb.end());
        }
        if (!same)
          FAIL_CHECK("op " << i << ": " << original.op_text(r, a[i]) << " became "
                           << parsed.op_text(r, b[i]));
      }
    }
    CHECK(parsed.to_text() == text);
  }
}

TEST_CASE("program_text.lowered_async_programs_carry_async", "[program_text]") {
  // lowered async programs carry async ops and WAITs through the text form
  // Guards the round-trip test above against passing vacuously on blocking-only programs.
  const Program p = ppsim::test::lowered("1f1b", 2, 2, 1, "async", 1);
  const std::string text = p.to_text();
  CHECK(text.find('#') != std::string::npos);
  CHECK(text.find("WAIT(") != std::string::npos);
  const Program q = Program::parse(text);
  int async_ops = 0, waits = 0;
  for (int r = 0; r < q.ranks(); ++r)
    for (const Op& op : q.ops(r)) {
      async_ops += op.async ? 1 : 0;
      waits += op.kind == OpKind::WAIT ? 1 : 0;
    }
  CHECK(async_ops > 0);
  CHECK(waits > 0);
}

TEST_CASE("program_text.stage_lives_rank_runs_compute", "[program_text]") {
  // placement inference: a stage lives on the rank that runs its compute ops
  // Comm ops name stage 1 on rank 0 only as a peer; the compute ops put it on rank 1.
  const Program p = Program::parse("0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  REQUIRE(p.stages() == 2);
  CHECK(p.place(0) == StagePlace{0, 0});
  CHECK(p.place(1) == StagePlace{1, 0});
  CHECK(p.microbatches() == 1);
  CHECK(p.chunks() == 1);
}

TEST_CASE("program_text.chunks_rank_numbered_stage_order", "[program_text]") {
  // placement inference: chunks on a rank are numbered in stage order (loop and V shapes)
  SECTION("loop: stage s on rank s mod P, chunk s / P") {
    const Program p = Program::parse("0F0,2F0\n1F0,3F0\n");
    CHECK(p.placement() == make_placement(PlacementKind::loop, 2, 2));
    CHECK(p.chunks() == 2);
  }
  SECTION("v: rank 0 holds stages 0 and 3, rank 1 holds 1 and 2") {
    const Program p = Program::parse("0F0,3F0\n1F0,2F0\n");
    CHECK(p.placement() == make_placement(PlacementKind::v, 2, 2));
    CHECK(p.place(3) == StagePlace{0, 1});
    CHECK(p.place(2) == StagePlace{1, 1});
  }
}

TEST_CASE("program_text.m_more_largest_microbatch", "[program_text]") {
  // placement inference: M is one more than the largest microbatch
  const Program p = Program::parse("0F4,0B4\n");
  CHECK(p.microbatches() == 5);
  CHECK(p.stages() == 1);
  CHECK(p.ranks() == 1);
}

TEST_CASE("program_text.stage_compute_op_placed_comm", "[program_text]") {
  // placement inference: a stage with no compute op is placed by its comm ops
  const Program p = Program::parse("0F0,0SEND_F0\n1RECV_F0\n");
  REQUIRE(p.stages() == 2);
  CHECK(p.rank_of(1) == 1);
}

TEST_CASE("program_text.unknown_op_name_points_token", "[program_text]") {
  // ParseError: an unknown op name points at its token (line = rank + 1, 1-based column)
  const ParseError e = check_parse_error("0F0,0X1", 1, 5);
  CHECK(std::string(e.what()).find("0X1") != std::string::npos);
  check_parse_error("0F0,0SEND_F0\n1RECV_F0,1F0,1Q0", 2, 14);
  check_parse_error("0F0,  0X1", 1, 7);
  // Comment lines count as lines.
  check_parse_error("# comment\n# more\n0F0,0X1", 3, 5);
}

TEST_CASE("program_text.empty_op_between_commas_reported", "[program_text]") {
  // ParseError: an empty op between commas is reported at the empty field
  check_parse_error("0F0,,0B0", 1, 5);
  check_parse_error(",0F0", 1, 1);
}

TEST_CASE("program_text.wait_needs_more_integer_ids", "[program_text]") {
  // ParseError: WAIT needs one or more integer ids inside parentheses
  struct Case {
    std::string text;
    int column;
  };
  for (const Case& c : std::vector<Case>{{"0F0,WAIT()", 5},
                                         {"0F0,WAIT(1;x)", 5},
                                         {"0F0,WAIT(1;)", 5},
                                         {"0F0,WAIT(;1)", 5},
                                         {"0F0,WAIT(-1)", 5},
                                         {"0F0,WAIT", 5},
                                         {"0F0,WAIT(1", 5},
                                         {"WAIT[1]", 1}}) {
    check_parse_error(c.text, 1, c.column);
  }
}

TEST_CASE("program_text.only_comm_ops_take_request", "[program_text]") {
  // ParseError: only comm ops take a #request id
  check_parse_error("0F0#3", 1, 1);
  CHECK(parse_error_of("0F0,0B0#1").column() == 5);
  CHECK_NOTHROW(Program::parse("0F0,0SEND_F0#3\n1RECV_F0#0,WAIT(0),1F0\n"));
}

TEST_CASE("program_text.stage_op_name_microbatch_must", "[program_text]") {
  // ParseError: stage, op name and microbatch must all be present and non-negative
  for (const std::string bad : {"F0", "0F", "0F-1", "0Fx", "-1F0", "0SEND_F", "0SEND_X0",
                                "0SEND_F0#", "0SEND_F0#x", "0SEND_F0#-2", "0F99999999999"}) {
    check_parse_error("0F0," + bad, 1, 5);
  }
}

TEST_CASE("program_text.stage_whose_compute_ops_appear", "[program_text]") {
  // ParseError: a stage whose compute ops appear on two ranks names the second rank's line
  const ParseError e = parse_error_of("0F0,0B0\n0F1,0B1\n");
  CHECK(e.line() == 2);
  CHECK(e.column() >= 1);
  CHECK(std::string(e.what()).find("stage 0") != std::string::npos);
}

TEST_CASE("program_text.empty_text_only_comments_has", "[program_text]") {
  // ParseError: empty text (or only comments) has no ranks
  for (const std::string text : {"", "\n\n", "# only a comment\n", "   \n"}) {
    check_parse_error(text, 1, 1);
  }
}

TEST_CASE("program_text.stage_below_largest_appears_op", "[program_text]") {
  // ParseError: a stage below the largest that appears in no op cannot be placed
  // Stage 0 is never mentioned; stage 1 is.
  CHECK_THROWS_AS(Program::parse("1F0,1B0\n"), ParseError);
  // A SEND_F from the last stage names no stage more: validation reports it as bad_comm.
  CHECK(Program::parse("0F0,0SEND_F0,0B0\n").stages() == 1);
}

TEST_CASE("program_text.send_f_s_m_recv", "[program_text]") {
  // tensor_of: SEND_F(s,m) and RECV_F(s+1,m) carry the activation stage s produces
  const Program p(3, make_placement(PlacementKind::loop, 5, 1));
  const Semantics sem(p);
  for (int s = 0; s < 4; ++s)
    for (int m = 0; m < 3; ++m) {
      const TensorId send = sem.tensor_of(Op::comm(OpKind::SEND_F, s, m));
      const TensorId recv = sem.tensor_of(Op::comm(OpKind::RECV_F, s + 1, m));
      CHECK(send == recv);
      CHECK(send == TensorId{false, s, m});
      // Async ops carry the same tensor as blocking ones.
      CHECK(sem.tensor_of(Op::comm(OpKind::SEND_F, s, m, 9)) == send);
    }
}

TEST_CASE("program_text.send_b_s_1_m", "[program_text]") {
  // tensor_of: SEND_B(s+1,m) and RECV_B(s,m) carry the gradient stage s+1 produces
  const Program p(3, make_placement(PlacementKind::loop, 5, 1));
  const Semantics sem(p);
  for (int s = 0; s < 4; ++s)
    for (int m = 0; m < 3; ++m) {
      const TensorId send = sem.tensor_of(Op::comm(OpKind::SEND_B, s + 1, m));
      const TensorId recv = sem.tensor_of(Op::comm(OpKind::RECV_B, s, m));
      CHECK(send == recv);
      CHECK(send == TensorId{true, s + 1, m});
      // The gradient across a boundary is a different tensor from the activation across it.
      CHECK_FALSE(send == sem.tensor_of(Op::comm(OpKind::SEND_F, s, m)));
      CHECK(sem.tensor_index(send) !=
            sem.tensor_index(sem.tensor_of(Op::comm(OpKind::SEND_F, s + 1, m))));
    }
}

TEST_CASE("program_text.comm_op_s_peer_rank", "[program_text]") {
  // peer_of: a comm op's peer is the rank of the neighbouring stage it names
  const Program p = Program::parse("0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  const Semantics sem(p);
  CHECK(sem.peer_of(p.ops(0)[1]) == 1);
  CHECK(sem.peer_of(p.ops(0)[2]) == 1);
  CHECK(sem.peer_of(p.ops(1)[0]) == 0);
  CHECK(sem.peer_of(p.ops(1)[3]) == 0);
  CHECK(sem.peer_of(Op::comm(OpKind::RECV_F, 0, 0)) == -1);  // no stage -1
  CHECK(sem.peer_of(Op::comm(OpKind::SEND_F, 1, 0)) == -1);  // no stage 2
}
