// schedules::validate: one hand-written program per diagnostic kind, checked field by field, and
// every generated + lowered program of every comm style validating clean.
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "ppsim/schedules/program.hpp"
#include "ppsim/schedules/validation.hpp"

using namespace ppsim::schedules;
using CommStyle = std::string_view;

namespace {

// The fields a test pins down, and the parts the message must hold where it matters.
struct Expect {
  std::string kind;
  int rank;
  int position;
  std::string op;
  bool fatal;
  std::vector<std::string> says = {};
};

std::string describe(const std::vector<Diagnostic>& ds) {
  std::ostringstream out;
  for (const Diagnostic& d : ds)
    out << "  " << d.kind << " rank=" << d.rank << " pos=" << d.position << " op='" << d.op
        << "' fatal=" << d.fatal << ": " << d.message << "\n";
  return out.str();
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The diagnostics must be exactly `expected`, in order.
void check_diagnostics(const std::vector<Diagnostic>& got, const std::vector<Expect>& expected) {
  INFO("diagnostics:\n" << describe(got));
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("diagnostic " << i);
    CHECK(got[i].kind == expected[i].kind);
    CHECK(got[i].rank == expected[i].rank);
    CHECK(got[i].position == expected[i].position);
    CHECK(got[i].op == expected[i].op);
    CHECK(got[i].fatal == expected[i].fatal);
    CHECK_FALSE(got[i].message.empty());
    for (const std::string& part : expected[i].says) CHECK(contains(got[i].message, part));
  }
  CHECK(has_fatal(got) ==
        std::any_of(expected.begin(), expected.end(), [](const Expect& e) { return e.fatal; }));
}

std::vector<Diagnostic> validate_text(const std::string& text) {
  return validate(Program::parse(text));
}

// A program in the text form and the diagnostics it must have, in a section of its own.
struct TextCase {
  std::string section;
  std::string text;
  std::vector<Expect> expected;
};
void check_sections(const std::vector<TextCase>& cases) {
  for (const TextCase& c : cases) {
    DYNAMIC_SECTION(c.section) {
      check_diagnostics(validate_text(c.text), c.expected);
    }
  }
}

// Two ranks, one stage each, one microbatch, all blocking: the reference clean program.
const std::string kRank0 = "0F0,0SEND_F0,0RECV_B0,0B0";
const std::string kRank1 = "1RECV_F0,1F0,1B0,1SEND_B0";

}  // namespace

TEST_CASE("validation.correct_two_rank_blocking_program", "[validation]") {
  // validate: a correct two-rank blocking program has no diagnostics
  const auto ds = validate_text(kRank0 + "\n" + kRank1 + "\n");
  check_diagnostics(ds, {});
  CHECK_FALSE(has_fatal(ds));
}

TEST_CASE("validation.correct_program_async_ops_split", "[validation]") {
  // validate: a correct program with async ops and split I/W backward has no diagnostics
  check_diagnostics(validate_text("0F0,0SEND_F0#0,0RECV_B0#1,WAIT(0;1),0I0,0W0\n"
                                  "1RECV_F0#0,WAIT(0),1F0,1I0,1SEND_B0#1,1W0,WAIT(1)\n"),
                    {});
}

TEST_CASE("validation.stage_s_microbatch_m_fatal", "[validation]") {
  // validate out_of_range: stage >= S or microbatch >= M is fatal at the op
  Program p = Program::parse(kRank0 + "\n" + kRank1 + "\n");
  SECTION("microbatch beyond M") {
    p.push(0, Op::compute(OpKind::F, 0, 5));
    check_diagnostics(validate(p), {{"out_of_range", 0, 4, "0F5", true, {"microbatch in [0, 1)"}}});
  }
  SECTION("stage beyond S") {
    p.push(1, Op::comm(OpKind::SEND_F, 7, 0));
    check_diagnostics(validate(p),
                      {{"out_of_range", 1, 4, "7SEND_F0", true, {"stage must be in [0, 2)"}}});
  }
}

TEST_CASE("validation.op_naming_stage_placed_another", "[validation]") {
  // validate wrong_rank: an op naming a stage placed on another rank is fatal
  // 0RECV_B0 belongs on rank 0 (stage 0 lives there); rank 1 issues it.
  check_diagnostics(validate_text(kRank0 + "\n" + kRank1 + ",0RECV_B0\n"),
                    {{"wrong_rank", 1, 4, "0RECV_B0", true, {"stage 0 lives on rank 0"}}});
}

TEST_CASE("validation.comm_op_across_boundary_does", "[validation]") {
  // validate bad_comm: a comm op across a boundary that does not exist is fatal
  check_sections({
      {"RECV_F of the first stage has no previous neighbour",
       "0RECV_F0,0F0,0B0\n",
       {{"bad_comm", 0, 0, "0RECV_F0", true, {"no previous neighbour"}}}},
      {"SEND_B of the first stage has no previous neighbour",
       "0F0,0B0,0SEND_B0\n",
       {{"bad_comm", 0, 2, "0SEND_B0", true}}},
  });
  SECTION("SEND_F of the last stage has no next neighbour") {
    Program p = Program::parse("0F0,0B0\n");
    p.push(0, Op::comm(OpKind::SEND_F, 0, 0));
    check_diagnostics(validate(p), {{"bad_comm", 0, 2, "0SEND_F0", true, {"no next neighbour"}}});
  }
  check_sections({
      {"neighbouring stages on the same rank need no communication",
       "0F0,0SEND_F0,1F0,1B0,0B0\n",
       {{"bad_comm", 0, 1, "0SEND_F0", true, {"same rank 0"}}}},
  });
}

TEST_CASE("validation.compute_op_whose_input_comes", "[validation]") {
  // validate missing_receive: a compute op whose input comes from another rank needs a receive
  // before it
  check_sections({
      {"forward without RECV_F",
       kRank0 + "\n1F0,1B0,1SEND_B0\n",
       {{"missing_receive", 1, 0, "1F0", false, {"activation"}},
        {"unmatched_send", 0, 1, "0SEND_F0", false, {"rank 1 never receives it"}}}},
      {"backward without RECV_B",
       "0F0,0SEND_F0,0B0\n" + kRank1 + "\n",
       {{"missing_receive", 0, 2, "0B0", false, {"gradient"}},
        {"unmatched_send", 1, 3, "1SEND_B0", false}}},
      {"a receive after the consumer does not count",
       kRank0 + "\n1F0,1RECV_F0,1B0,1SEND_B0\n",
       {{"missing_receive", 1, 0, "1F0", false}}},
  });
}

TEST_CASE("validation.compute_op_may_read_async", "[validation]") {
  // validate read_before_wait: a compute op may not read an async receive's buffer before its WAIT
  check_sections({
      {"forward reads an unwaited RECV_F",
       kRank0 + "\n1RECV_F0#0,1F0,WAIT(0),1B0,1SEND_B0\n",
       {{"read_before_wait", 1, 1, "1F0", false, {"request #0"}}}},
      {"backward reads an unwaited RECV_B",
       "0F0,0SEND_F0,0RECV_B0#3,0B0,WAIT(3)\n" + kRank1 + "\n",
       {{"read_before_wait", 0, 3, "0B0", false}}},
  });
}

TEST_CASE("validation.dependencies_must_run_first_f", "[validation]") {
  // validate order: dependencies must run first (F(s-1) before F(s), F before B/I, I before W,
  // producer before its send)
  check_sections({
      {"F(s) before F(s-1) on the same rank", "1F0,0F0,1B0,0B0\n", {{"order", 0, 0, "1F0", true}}},
      {"B before F", "0B0,0F0\n", {{"order", 0, 0, "0B0", true, {"runs before 0F0"}}}},
      {"I before F", "0I0,0F0,0W0\n", {{"order", 0, 0, "0I0", true}}},
      {"B(s) before B(s+1) on the same rank", "0F0,1F0,0B0,1B0\n", {{"order", 0, 2, "0B0", true}}},
      {"W before I", "0F0,0W0,0I0\n", {{"order", 0, 1, "0W0", true, {"runs before 0I0"}}}},
      {"SEND_F before the forward that produces it",
       "0SEND_F0,0F0,0RECV_B0,0B0\n" + kRank1 + "\n",
       {{"order", 0, 0, "0SEND_F0", true}}},
      {"SEND_B before the backward that produces it",
       kRank0 + "\n1RECV_F0,1F0,1SEND_B0,1B0\n",
       {{"order", 1, 2, "1SEND_B0", true}}},
  });
}

TEST_CASE("validation.validate_buffer_released_before_wait", "[validation]") {
  // validate buffer_released_before_wait: the backward frees the forward output, so an async
  // SEND_F must be waited first
  check_sections({
      {"full backward",
       "0F0,0SEND_F0#0,0RECV_B0,0B0,WAIT(0)\n" + kRank1 + "\n",
       {{"buffer_released_before_wait",
         0,
         3,
         "0B0",
         false,
         {"Cannot lock pointer to unbound buffer", "request #0"}}}},
      {"input-gradient half I",
       "0F0,0SEND_F0#0,0RECV_B0,0I0,WAIT(0),0W0\n" + kRank1 + "\n",
       {{"buffer_released_before_wait", 0, 3, "0I0", false}}},
      {"waited before the backward is fine",
       "0F0,0SEND_F0#0,WAIT(0),0RECV_B0,0B0\n" + kRank1 + "\n",
       {}},
  });
}

TEST_CASE("validation.tensor_sent_received_once", "[validation]") {
  // validate duplicate_comm: one tensor is sent (or received) once
  check_sections({
      {"send twice",
       "0F0,0SEND_F0,0SEND_F0,0RECV_B0,0B0\n" + kRank1 + "\n",
       {{"duplicate_comm", 0, 2, "0SEND_F0", true}}},
      {"receive twice, the second async",
       kRank0 + "\n1RECV_F0,1RECV_F0#0,WAIT(0),1F0,1B0,1SEND_B0\n",
       {{"duplicate_comm", 1, 1, "1RECV_F0#0", true},
        // The duplicate is dropped, so its request id was never posted.
        {"unknown_request", 1, 2, "WAIT(0)", true}}},
  });
}

TEST_CASE("validation.request_id_names_async_op", "[validation]") {
  // validate duplicate_request: a request id names one async op per rank
  check_sections({
      {"id reused while the first is outstanding",
       "0F0,0SEND_F0#1,0RECV_B0#1,WAIT(1),0B0\n" + kRank1 + "\n",
       {{"duplicate_request", 0, 2, "0RECV_B0#1", true, {"#1 is used twice on rank 0"}}}},
      {"id reused after it was waited",
       "0F0,0SEND_F0#1,WAIT(1),0RECV_B0#1,WAIT(1),0B0\n" + kRank1 + "\n",
       {{"duplicate_request", 0, 3, "0RECV_B0#1", true}, {"double_wait", 0, 4, "WAIT(1)", true}}},
      {"the same id on two ranks is fine",
       "0F0,0SEND_F0#0,WAIT(0),0RECV_B0,0B0\n"
       "1RECV_F0#0,WAIT(0),1F0,1B0,1SEND_B0\n",
       {}},
  });
}

TEST_CASE("validation.request_waited_once", "[validation]") {
  // validate double_wait: a request is waited once
  check_sections({
      {"two WAITs",
       "0F0,0SEND_F0#0,WAIT(0),WAIT(0),0RECV_B0,0B0\n" + kRank1 + "\n",
       {{"double_wait", 0, 3, "WAIT(0)", true, {"#0 was already waited"}}}},
      {"one WAIT listing the id twice",
       "0F0,0SEND_F0#0,WAIT(0;0),0RECV_B0,0B0\n" + kRank1 + "\n",
       {{"double_wait", 0, 2, "WAIT(0;0)", true}}},
  });
}

TEST_CASE("validation.wait_names_only_ids_already", "[validation]") {
  // validate unknown_request: a WAIT names only ids already posted on its rank
  check_sections({
      {"id never posted",
       "0F0,0SEND_F0,WAIT(5),0RECV_B0,0B0\n" + kRank1 + "\n",
       {{"unknown_request", 0, 2, "WAIT(5)", true, {"#5 was never posted"}}}},
      {"WAIT before the post, which then is never waited",
       "0F0,WAIT(0),0SEND_F0#0,0RECV_B0,0B0\n" + kRank1 + "\n",
       {{"unknown_request", 0, 1, "WAIT(0)", true},
        {"buffer_released_before_wait", 0, 4, "0B0", false},
        {"never_waited", 0, 2, "0SEND_F0#0", false}}},
      {"id posted on another rank",
       "0F0,0SEND_F0#0,WAIT(0),0RECV_B0,WAIT(9),0B0\n"
       "1RECV_F0#9,WAIT(9),1F0,1B0,1SEND_B0\n",
       {{"unknown_request", 0, 4, "WAIT(9)", true}}},
  });
}

TEST_CASE("validation.async_request_waited_before_program", "[validation]") {
  // validate never_waited: every async request is waited before the program ends, reported at the
  // op that posted it, by increasing id
  check_diagnostics(validate_text("0F0,0SEND_F0#2,WAIT(2),0RECV_B0,0B0\n"
                                  "1RECV_F0,1F0,1B0,1SEND_B0#7\n"),
                    {{"never_waited", 1, 3, "1SEND_B0#7", false, {"request #7 is never waited"}}});

  // Two outstanding requests: listed by id (#4 posted after #5), not by position. The backward
  // also reads the unwaited gradient and frees the unwaited activation.
  check_diagnostics(validate_text("0F0,0SEND_F0#5,0RECV_B0#4,0B0\n" + kRank1 + "\n"),
                    {{"read_before_wait", 0, 3, "0B0", false},
                     {"buffer_released_before_wait", 0, 3, "0B0", false},
                     {"never_waited", 0, 2, "0RECV_B0#4", false},
                     {"never_waited", 0, 1, "0SEND_F0#5", false}});
}

TEST_CASE("validation.stage_microbatch_needs_f_b", "[validation]") {
  // validate missing_compute: each (stage, microbatch) needs one F and one B or I + W
  check_sections({
      {"no backward",
       "0F0\n",
       {{"missing_compute", 0, -1, "", false, {"no backward (0B0 or 0I0 + 0W0)"}}}},
      {"no forward (the backward then also runs out of order)",
       "0B0\n",
       {{"order", 0, 0, "0B0", true}, {"missing_compute", 0, -1, "", false, {"no forward 0F0"}}}},
      {"I without W", "0F0,0I0\n", {{"missing_compute", 0, -1, "", false, {"0I0 has no 0W0"}}}},
      // M = 2 because microbatch 1 appears; microbatch 0 has neither forward nor backward.
      {"a microbatch below M that never appears on a stage",
       "0F1,0B1\n",
       {{"missing_compute", 0, -1, "", false, {"stage 0 microbatch 0: no forward"}},
        {"missing_compute", 0, -1, "", false, {"stage 0 microbatch 0: no backward"}}}},
  });
}

TEST_CASE("validation.f_b_i_w_runs", "[validation]") {
  // validate duplicate_compute: an F, B, I or W runs at most once per (stage, microbatch)
  check_sections({
      {"F twice",
       "0F0,0F0,0B0\n",
       {{"duplicate_compute", 0, -1, "", false, {"0F0 appears 2 times"}}}},
      {"B twice", "0F0,0B0,0B0\n", {{"duplicate_compute", 0, -1, "", false}}},
      {"W twice", "0F0,0I0,0W0,0W0\n", {{"duplicate_compute", 0, -1, "", false}}},
  });
}

TEST_CASE("validation.stage_microbatch_uses_full_b", "[validation]") {
  // validate mixed_backward: a (stage, microbatch) uses a full B or a split I + W, not both
  check_diagnostics(validate_text("0F0,0B0,0I0,0W0\n"),
                    {{"mixed_backward", 0, -1, "", false, {"stage 0 microbatch 0"}}});
}

TEST_CASE("validation.validate_unmatched_send_unmatched_recv", "[validation]") {
  // validate unmatched_send / unmatched_recv: every send of a tensor has a receive and vice versa,
  // reported on the rank that has the lone op
  check_sections({
      {"activation received but never sent",
       "0F0,0RECV_B0,0B0\n" + kRank1 + "\n",
       {{"unmatched_recv",
         1,
         0,
         "1RECV_F0",
         false,
         {"activation 0->1 of microbatch 0", "rank 0 never sends it"}}}},
      {"gradient received but never sent",
       kRank0 + "\n1RECV_F0,1F0,1B0\n",
       {{"unmatched_recv", 0, 2, "0RECV_B0", false, {"gradient 1->0 of microbatch 0"}}}},
      // Rank 0 runs its backward as if it were the last stage: missing receive + unmatched send.
      {"gradient sent but never received (no backward reads it either)",
       "0F0,0SEND_F0,0B0\n" + kRank1 + "\n",
       {{"missing_receive", 0, 2, "0B0", false},
        {"unmatched_send",
         1,
         3,
         "1SEND_B0",
         false,
         {"gradient 1->0 of microbatch 0", "rank 1 op 3 (1SEND_B0): sends the gradient"}}}},
  });
}

TEST_CASE("validation.diagnostics_past_1000_summarised_too", "[validation]") {
  // validate: diagnostics past 1000 are summarised by one too_many_diagnostics entry
  // 1001 microbatches with a forward and no backward: 1001 missing_compute.
  std::string text;
  for (int m = 0; m <= 1000; ++m) text += (m ? ",0F" : "0F") + std::to_string(m);
  const auto ds = validate_text(text + "\n");
  REQUIRE(ds.size() == 1001);
  CHECK(ds[999].kind == "missing_compute");
  CHECK(ds.back().kind == "too_many_diagnostics");
  CHECK(ds.back().rank == -1);
  CHECK(ds.back().position == -1);
  CHECK_FALSE(ds.back().fatal);
  CHECK(contains(ds.back().message, "1 more diagnostics"));
}

TEST_CASE("validation.cell_known_only_route_neighbour", "[validation]") {
  // validate: a cell known only as a route neighbour, whose own neighbour no op touches, is
  // checked like any other (sparse cell tables)
  // Found by fuzz_pipeline: microbatch 999 makes the (stage, microbatch) grid (3 x 1000) larger
  // than twice the ops plus 1024, so cells are indexed sparsely. 0F999 gives (0, 999) and its
  // neighbour (1, 999) an index, but not (2, 999); checking (1, 999)'s gradient from stage 2
  // looked that cell up and threw std::logic_error.
  const std::string text =
      "0F0,0SEND_F0,0RECV_B0,0B0,0F999\n"
      "1RECV_F0,1F0,1SEND_F0,1RECV_B0,1B0,1SEND_B0\n"
      "2RECV_F0,2F0,2B0,2SEND_B0\n";
  std::vector<Diagnostic> ds;
  REQUIRE_NOTHROW(ds = validate_text(text));
  // Microbatches 1..998 are absent on all three stages (2 diagnostics each); (0, 999) lacks its
  // backward (1); (1, 999) and (2, 999) lack both (2 each): 5993 in all, no unmatched send or
  // receive. 1000 are listed, the rest counted.
  REQUIRE(ds.size() == 1001);
  CHECK(std::all_of(ds.begin(), ds.end() - 1,
                    [](const Diagnostic& d) { return d.kind == "missing_compute"; }));
  CHECK(ds.back().kind == "too_many_diagnostics");
  CHECK(contains(ds.back().message, "4993 more diagnostics"));
  CHECK_FALSE(has_fatal(ds));
}

TEST_CASE("validation.message_op_diagnostic_starts_rank", "[validation]") {
  // validate: the message of an op diagnostic starts with 'rank R op POS (OP): '
  const auto ds = validate_text(kRank0 + "\n" + kRank1 + ",0RECV_B0\n");
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].message.rfind("rank 1 op 4 (0RECV_B0): ", 0) == 0);
  const auto totals = validate_text("0F0\n");
  REQUIRE(totals.size() == 1);
  CHECK(totals[0].message.rfind("rank 0: ", 0) == 0);
}

TEST_CASE("validation.generated_lowered_program_comm_styles", "[validation]") {
  // validate: every generated + lowered program (all comm styles) has zero diagnostics
  int programs = 0;
  for (const auto& s : ppsim::test::all_lowerings()) {
    auto check = [&](const std::string& kind, int P, int M, int V) {
      if (s.style == "megatron" && kind == "gpipe") return;  // it models 1f1b and interleaved only
      INFO(kind << " P=" << P << " M=" << M << " V=" << V << " style=" << ppsim::test::describe(s));
      const Program p = ppsim::test::lowered(kind, P, M, V, s.style,
                                             static_cast<int>(s.params.get("prefetch", 1)));
      const auto ds = validate(p);
      INFO(describe(ds));
      CHECK(ds.empty());
      // And the same after a trip through the text form.
      CHECK(validate(Program::parse(p.to_text())).empty());
      ++programs;
    };
    for (const char* kind : {"gpipe", "1f1b"})
      for (int P = 1; P <= 5; ++P)
        for (int M = 1; M <= 6; ++M) check(kind, P, M, 1);
    for (int P = 3; P <= 4; ++P)
      for (int V = 2; V <= 3; ++V)
        for (int M : {P, 2 * P}) check("interleaved-1f1b", P, M, V);
  }
  // 7 styles (async at 4 prefetch depths) x (gpipe and 1f1b + interleaved), megatron without gpipe
  CHECK(programs == 7 * (2 * 5 * 6 + 2 * 2 * 2) + (5 * 6 + 2 * 2 * 2));
}

TEST_CASE("validation.deleting_any_single_op_lowered", "[validation]") {
  // validate: deleting any single op of a lowered program produces a diagnostic (every op is
  // needed)
  for (CommStyle style : {"blocking", "async-send", "batched", "async"}) {
    const Program full = ppsim::test::lowered("1f1b", 3, 3, 1, style, 1);
    for (int r = 0; r < full.ranks(); ++r) {
      for (std::size_t i = 0; i < full.ops(r).size(); ++i) {
        Program cut = full;
        cut.ops(r).erase(cut.ops(r).begin() + static_cast<std::ptrdiff_t>(i));
        INFO("style " << style << ", rank " << r << " without op " << i << " ("
                      << full.op_text(r, full.ops(r)[i]) << ")");
        CHECK_FALSE(validate(cut).empty());
      }
    }
  }
}
