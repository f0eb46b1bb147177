// `custom` op lists: compute ops only are lowered with comm.style exactly as a generator's
// program is; lists that write communication (on any rank) run as written. And where each op of
// a custom program was written (config::ProgramSpec::locate), as `ppsim check` reports it.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "helpers.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/sim/analysis.hpp"
#include "ppsim/viz/json_report.hpp"
#include "ppsim/viz/summary_table.hpp"

using namespace ppsim;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

// The comm section a lowering is written as in a config.
json comm_of(const schedules::LoweringOptions& l) {
  json comm = {{"style", l.style}};
  for (const auto& [k, v] : l.params.values())
    comm[k] = k == "prefetch" && v < 0 ? json("all") : json(v);  // -1 is how "all" is held
  return comm;
}

// Token `index` (0-based, commas split, spaces trimmed) of line `line` (1-based) of `text`, and
// the 1-based column it starts at.
std::pair<std::string, int> token_at(const std::string& text, int line, int column) {
  std::size_t pos = 0;
  for (int l = 1; l < line; ++l) pos = text.find('\n', pos) + 1;
  const std::string row = text.substr(pos, text.find('\n', pos) - pos);
  const std::size_t start = static_cast<std::size_t>(column - 1);
  const std::size_t end = row.find(',', start);
  return {row.substr(start, end == std::string::npos ? std::string::npos : end - start), column};
}

schedules::OpLocator locator(const config::Config& c, const schedules::Program& built) {
  return [&c, &built](int r, int p) { return c.program->locate(built, r, p); };
}

}  // namespace

TEST_CASE("custom_lowering.custom_op_lists_compute_ops", "[custom_lowering][config]") {
  // custom op lists of compute ops only are lowered by comm.style, as a generator's are
  struct Case {
    const char* kind;
    int P, M, V;
  };
  for (const Case k : {Case{"gpipe", 3, 4, 1}, Case{"1f1b", 4, 8, 1},
                       Case{"interleaved-1f1b", 4, 8, 2}, Case{"zb-h1", 3, 6, 1}}) {
    if (!schedules::Registry::instance().find(k.kind)) continue;  // a generator not built here
    json params = {{"kind", k.kind}, {"ranks", k.P}, {"microbatches", k.M}};
    if (k.V != 1) params["chunks"] = k.V;
    schedules::ScheduleParams sp{{"ranks", k.P}, {"microbatches", k.M}};
    if (k.V != 1) sp.set("chunks", k.V);
    const schedules::Program generated_program = schedules::generate(k.kind, sp);
    const std::string compute = generated_program.to_text();
    for (const auto& lowering : test::all_lowerings()) {
      if (!test::accepts(lowering, generated_program)) continue;  // megatron: its loops only
      INFO(k.kind << " " << test::describe(lowering));
      const json generated = {{"schedule", params}, {"comm", comm_of(lowering)}};
      const json custom = {{"schedule", {{"kind", "custom"}, {"ops", compute}}},
                           {"comm", comm_of(lowering)}};
      const config::Config gc = config::parse_config(generated, "generated.json");
      const config::Config cc = config::parse_config(custom, "custom.json");
      CHECK(cc.comm_style() == lowering.style);
      const config::Prepared g = config::prepare(gc), c = config::prepare(cc);
      CHECK(c.program->to_text() == g.program->to_text());
      const record::RunRecord a = sim::analyze(cc);
      CHECK(a.info.comm_style == lowering.style);
      CHECK(a.ok() == sim::analyze(gc).ok());
    }
    // No comm section: the default style, as for a generated schedule.
    const config::Config plain = config::parse_config(
        json{{"schedule", {{"kind", "custom"}, {"ops", compute}}}}, "custom.json");
    CHECK(plain.comm_style() == "async");
    CHECK(config::prepare(plain).program->to_text() ==
          config::prepare(config::parse_config(json{{"schedule", params}}, "g.json"))
              .program->to_text());
  }
}

TEST_CASE("custom_lowering.compute_only_custom_list_keeps", "[custom_lowering][config]") {
  // a compute-only custom list keeps its IDLE ranks through lowering
  for (const auto& lowering : test::all_lowerings()) {
    INFO(test::describe(lowering));
    const json j = {{"schedule", {{"kind", "custom"}, {"ops", {"0F0,0B0", "IDLE", "IDLE"}}}},
                    {"comm", comm_of(lowering)}};
    const schedules::Program compute =
        schedules::Program::parse("0F0,0B0\nIDLE\nIDLE\n", schedules::Routes{});
    if (!test::accepts(lowering, compute)) continue;
    const config::Prepared p = config::prepare(config::parse_config(j, "idle.json"));
    REQUIRE(p.program->ranks() == 3);
    CHECK(p.program->ops(1).empty());
    CHECK(p.program->ops(2).empty());
  }
}

TEST_CASE("custom_lowering.custom_op_lists_write_communication", "[custom_lowering][config]") {
  // custom op lists that write communication run as written, comm.style is refused
  const json j = {
      {"schedule",
       {{"kind", "custom"}, {"ops", {"0F0,0SEND_F0,0RECV_B0,0B0", "1RECV_F0,1F0,1B0,1SEND_B0"}}}}};
  const config::Config c = config::parse_config(j, "w.json");
  CHECK(c.comm_style() == "custom");
  CHECK(config::prepare(c).program->to_text() ==
        "0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  json styled = j;
  styled["comm"] = {{"style", "blocking"}};
  const config::ConfigError e = test::error_of([&] { config::parse_config(styled, "w.json"); });
  CHECK(e.key() == "comm.style");
  CHECK_THAT(e.what(), Contains("its op lists write the communication out"));
  json prefetch = j;
  prefetch["comm"] = {{"prefetch", 2}};
  CHECK(test::error_of([&] { config::parse_config(prefetch, "w.json"); }).key() == "comm.prefetch");
  // A comment that mentions SEND is not communication.
  const config::Config commented = config::parse_config(
      json{{"schedule", {{"kind", "custom"}, {"ops", "# no SEND_F or WAIT here\n0F0,0B0\n"}}}},
      "c.json");
  CHECK(commented.comm_style() == "async");
}

TEST_CASE("custom_lowering.custom_op_lists_communication_some", "[custom_lowering][config]") {
  // custom op lists with communication on some ranks only run as written, and validation names
  // each op left without its transfer
  // Rank 0 writes its sends and receives out; rank 1 writes none.
  const json j = {
      {"schedule", {{"kind", "custom"}, {"ops", {"0F0,0SEND_F0,0RECV_B0,0B0", "1F0,1B0"}}}}};
  const config::Config c = config::parse_config(j, "mixed.json");
  CHECK(c.comm_style() == "custom");
  json styled = j;
  styled["comm"] = {{"style", "async"}};
  CHECK(test::error_of([&] { config::parse_config(styled, "mixed.json"); }).key() == "comm.style");
  const record::RunRecord a = sim::analyze(c);
  CHECK_FALSE(a.ok());
  std::vector<std::string> got;
  for (const auto& d : a.diagnostics)
    got.push_back(d.kind + " " + std::to_string(d.rank) + " " + std::to_string(d.position) + " " +
                  d.op);
  // 1F0 needs 0's activation: no receive; the activation is sent, never received; the gradient
  // rank 0 waits for is never sent.
  CHECK(got == std::vector<std::string>{"missing_receive 1 0 1F0", "unmatched_send 0 1 0SEND_F0",
                                        "unmatched_recv 0 2 0RECV_B0"});
  const std::string text = viz::check_text(a, "mixed.json", locator(c, *a.program));
  CHECK_THAT(text, Contains("missing_receive: rank 1 op 0 (1F0): needs its activation from "
                            "another rank but no receive precedes it [schedule.ops[1] column 1]"));
}

TEST_CASE("custom_lowering.op_custom_program_found_where", "[custom_lowering][check]") {
  // locate: every op of a custom program is found where it was written
  const std::string lowered = test::lowered("1f1b", 4, 6, 1, "async", 1).to_text();
  const std::string compute =
      schedules::generate("1f1b", {{"ranks", 4}, {"microbatches", 6}}).to_text();
  SECTION("written communication, the one-string form with comments and spaces") {
    std::string text = "# four ranks\n";
    for (char ch : lowered) text += ch == ',' ? std::string(", ") : std::string(1, ch);
    const config::Config c =
        config::parse_config(json{{"schedule", {{"kind", "custom"}, {"ops", text}}}}, "t.json");
    const config::Prepared run = config::prepare(c);
    const auto& p = *run.program;
    for (int r = 0; r < p.ranks(); ++r)
      for (int i = 0; i < static_cast<int>(p.ops(r).size()); ++i) {
        const auto at = c.program->locate(p, r, i);
        REQUIRE(at);
        CHECK(at->line == r + 2);
        CHECK(token_at(text, at->line, at->column).first ==
              p.op_text(r, p.ops(r)[static_cast<std::size_t>(i)]));
        CHECK(at->where == "schedule.ops line " + std::to_string(r + 2) + ", column " +
                               std::to_string(at->column));
      }
    CHECK_FALSE(c.program->locate(p, 0, static_cast<int>(p.ops(0).size())));
    CHECK_FALSE(c.program->locate(p, p.ranks(), 0));
  }
  SECTION("compute ops only: the lowered program's ops map back, the added ones say so") {
    json ops = json::array();
    for (int r = 0; r < 4; ++r)
      ops.push_back(test::rank_line(schedules::Program::parse(compute), r));
    const config::Config c =
        config::parse_config(json{{"schedule", {{"kind", "custom"}, {"ops", ops}}}}, "t.json");
    const config::Prepared run = config::prepare(c);
    const auto& p = *run.program;
    std::size_t added = 0;
    for (int r = 0; r < p.ranks(); ++r) {
      const std::string row = ops[static_cast<std::size_t>(r)].get<std::string>() + "\n";
      int last_column = 0;
      for (int i = 0; i < static_cast<int>(p.ops(r).size()); ++i) {
        const auto& op = p.ops(r)[static_cast<std::size_t>(i)];
        const auto at = c.program->locate(p, r, i);
        REQUIRE(at);
        if (schedules::is_comm(op.kind) || op.kind == schedules::OpKind::WAIT) {
          CHECK(at->column == 0);
          // Named after the written op before it (or the first one, for what comes first).
          CHECK(at->where == "added by comm.style, " +
                                 std::string(last_column > 0 ? "after" : "before") +
                                 " the op at schedule.ops[" + std::to_string(r) + "] column " +
                                 std::to_string(last_column > 0 ? last_column : 1));
          ++added;
          continue;
        }
        last_column = at->column;
        CHECK(at->line == 0);  // the array form has no lines
        CHECK(token_at(row, 1, at->column).first == p.op_text(r, op));
        CHECK(at->where ==
              "schedule.ops[" + std::to_string(r) + "] column " + std::to_string(at->column));
      }
    }
    CHECK(added > 0);
  }
}

TEST_CASE("custom_lowering.check_names_rank_position_op", "[check]") {
  // check names the rank, position, op and place of every stuck op of a deadlock
  // configs/1f1b-blocking-deadlock.json, its program written out as a custom schedule.
  const std::string text = test::lowered("1f1b", 4, 8, 1, "blocking").to_text();
  const config::Config c =
      config::parse_config(json{{"schedule", {{"kind", "custom"}, {"ops", text}}},
                                {"costs", {{"forward", 1.0}, {"backward", 2.0}}},
                                {"comm", {{"boundary_bytes", 4194304}, {"eager_limit", 0}}}},
                           "dl.json");
  const record::RunRecord a = sim::analyze(c);
  REQUIRE(a.deadlock);
  const std::string out = viz::check_text(a, "dl.json", locator(c, *a.program));
  const json j = viz::check_json(a, "dl.json", locator(c, *a.program));
  std::size_t stuck = 0;
  auto expect = [&](const record::BlockedOp& b, const json& entry) {
    const auto [token, column] = token_at(text, b.rank + 1, entry.at("column").get<int>());
    CHECK(token == b.op);
    CHECK(entry.at("line") == b.rank + 1);
    CHECK(entry.at("position") == b.position);
    const std::string line = "stuck: rank " + std::to_string(b.rank) + " op " +
                             std::to_string(b.position) + " (" + b.op + ") [schedule.ops line " +
                             std::to_string(b.rank + 1) + ", column " + std::to_string(column) +
                             "], needs rank " + std::to_string(b.peer) + "\n";
    CHECK_THAT(out, Contains(line));
    ++stuck;
  };
  for (std::size_t k = 0; k < a.deadlock->cycles.size(); ++k)
    for (std::size_t i = 0; i < a.deadlock->cycles[k].size(); ++i)
      expect(a.deadlock->cycles[k][i], j["deadlock"]["cycles"][k][i]);
  for (std::size_t i = 0; i < a.deadlock->blocked.size(); ++i)
    expect(a.deadlock->blocked[i], j["deadlock"]["blocked"][i]);
  // The bundled config's cycle: ranks 2 and 3, and ranks 0 and 1 waiting behind it.
  CHECK(stuck == 4);
  CHECK_THAT(out, Contains("stuck: rank 2 op 5 (2SEND_F1)"));
  CHECK_THAT(out, Contains("stuck: rank 3 op 3 (3SEND_B0)"));
}

TEST_CASE("custom_lowering.check_names_rank_position_op_2", "[check]") {
  // check names rank, position, op and line/column for every diagnostic kind tied to an op
  const std::string r0 = "0F0,0SEND_F0,0RECV_B0,0B0", r1 = "1RECV_F0,1F0,1B0,1SEND_B0";
  struct Case {
    const char* kind;
    std::string text;
    const char* matching;
  };
  const std::vector<Case> cases = {
      {"wrong_rank", "0F0,0SEND_F0,1SEND_B0,0RECV_B0,0B0\n" + r1, "tag"},
      {"bad_comm", r0 + "\n1RECV_F0,1F0,1SEND_F0,1B0,1SEND_B0", "tag"},
      {"order", r0 + "\n1RECV_F0,1B0,1F0,1SEND_B0", "tag"},
      {"duplicate_comm", "0F0,0SEND_F0,0SEND_F0,0RECV_B0,0B0\n" + r1, "tag"},
      {"duplicate_request", "0F0,0SEND_F0#1,0RECV_B0#1,WAIT(1),0B0\n" + r1, "tag"},
      {"unknown_request", "0F0,0SEND_F0,WAIT(3),0RECV_B0,0B0\n" + r1, "tag"},
      {"double_wait", "0F0,0SEND_F0#1,WAIT(1),WAIT(1),0RECV_B0,0B0\n" + r1, "tag"},
      {"missing_receive", r0 + "\n1F0,1B0,1SEND_B0", "tag"},
      {"unmatched_send", r0 + "\n1F0,1B0,1SEND_B0", "tag"},
      {"unmatched_recv", "0F0,0RECV_B0,0B0\n" + r1, "tag"},
      {"read_before_wait", r0 + "\n1RECV_F0#0,1F0,WAIT(0),1B0,1SEND_B0", "tag"},
      {"buffer_released_before_wait", "0F0,0SEND_F0#0,0RECV_B0,0B0,WAIT(0)\n" + r1, "tag"},
      {"never_waited", "0F0,0SEND_F0#0,0RECV_B0,0B0\n" + r1, "tag"},
      {"message_order_mismatch",
       "0F0,0F1,0SEND_F1#0,0SEND_F0#1,0RECV_B0,0B0,0RECV_B1,0B1,WAIT(0;1)\n"
       "1RECV_F0,1RECV_F1,1F0,1B0,1SEND_B0,1F1,1B1,1SEND_B1",
       "fifo"}};
  for (const auto& c : cases) {
    INFO(c.kind << ":\n" << c.text);
    const std::string text = "# a comment line\n" + c.text + "\n";
    const config::Config cfg = config::parse_config(
        json{{"schedule", {{"kind", "custom"}, {"ops", text}}},
             {"comm", {{"matching", c.matching}, {"eager_limit", 1}, {"boundary_bytes", 1}}}},
        "k.json");
    const record::RunRecord a = sim::analyze(cfg);
    const std::string out = viz::check_text(a, "k.json", locator(cfg, *a.program));
    INFO(out);
    bool seen = false;
    for (const auto& d : a.diagnostics) {
      seen = seen || d.kind == c.kind;
      if (d.position < 0) continue;
      const auto at = cfg.program->locate(*a.program, d.rank, d.position);
      REQUIRE(at);
      CHECK(at->line == d.rank + 2);  // after the comment line
      CHECK(token_at(text, at->line, at->column).first == d.op);
      CHECK_THAT(d.message, Catch::StartsWith("rank " + std::to_string(d.rank) + " op " +
                                              std::to_string(d.position) + " (" + d.op + ")"));
      CHECK_THAT(out, Contains(d.kind + ": " + d.message + " [" + at->where + "]\n"));
    }
    CHECK(seen);
  }
}
