// PyTorch pipelining's schedule CSV: reading, writing, the torch lowering and the runtime mapping,
// against PyTorch's own test vectors (tests/data/torch/README.md).
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "helpers.hpp"
#include "paths.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/config/torch_csv_source.hpp"
#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/torch_csv.hpp"

using namespace ppsim;
using schedules::OpKind;
using schedules::Program;
using schedules::TorchCsvForm;

namespace {

std::string data_path(const std::string& name) {
  return std::string(PPSIM_SOURCE_DIR) + "/tests/data/torch/" + name;
}
std::string slurp(const std::string& name) {
  std::ifstream in(data_path(name), std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
std::string crlf(const std::string& lf) {
  std::string out;
  for (char c : lf) out += c == '\n' ? std::string("\r\n") : std::string(1, c);
  return out;
}
// The CSV rows of a program, LF-ended.
std::string csv_of(const Program& p, TorchCsvForm form = TorchCsvForm::compute_comms) {
  return schedules::write_torch_csv(p, form, {}, {}, "\n");
}
// The parse error of `text`: "ROW:CELL: message".
std::string parse_error_of(const std::string& text) {
  try {
    schedules::parse_torch_csv(text);
  } catch (const schedules::ParseError& e) {
    return std::to_string(e.line()) + ":" + std::to_string(e.column()) + ": " + e.what();
  }
  return "no error";
}
// Diagnostics other than the one PyTorch's runtime always earns: it waits its sends only at the
// end of the step, so a backward frees a forward output whose send is still in flight.
std::vector<schedules::Diagnostic> unexpected(std::vector<schedules::Diagnostic> d) {
  std::erase_if(d,
                [](const auto& x) { return x.kind == "buffer_released_before_wait" && !x.fatal; });
  return d;
}
Program torch_lowered(const schedules::TorchCsv& csv, bool merge_bw = false) {
  return schedules::lower(csv.program, {"torch", {{"merge_bw", merge_bw ? 1 : 0}}, csv.steps});
}
// PyTorch's own test of _add_send_recv: stage s on rank s, 2 ranks, 2 microbatches.
const std::string kVectorIn = "0F0,0F1,,0B0,,0B1\n,1F0,1B0,1F1,1B1,\n";
const std::string kVectorOut =
    "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
    "1RECV_F0,1RECV_F1,1F0,1B0,1SEND_B0,1F1,1B1,1SEND_B1\n";

}  // namespace

TEST_CASE("torch_csv.pytorch_s_artifacts_read_write", "[torch]") {
  // torch csv: PyTorch's artifacts read and write back byte for byte
  for (const char* name : {"zb1p_2rank_2stagep_compute.csv", "zb1p_2rank_2stagep_comms.csv",
                           "dualpipev_4rank_10mb.csv"}) {
    INFO(name);
    const std::string bytes = slurp(name);
    REQUIRE(!bytes.empty());
    const auto csv = schedules::parse_torch_csv(bytes);
    CHECK(schedules::write_torch_csv(csv.program, csv.form, csv.steps, csv.cells, "\n") == bytes);
    // Python's csv module ends rows with \r\n; the same file read that way is the same schedule.
    const auto again = schedules::parse_torch_csv(crlf(bytes));
    CHECK(schedules::write_torch_csv(again.program, again.form, again.steps, again.cells) ==
          crlf(bytes));
  }
  const auto zb = schedules::parse_torch_csv(slurp("zb1p_2rank_2stagep_compute.csv"));
  CHECK(zb.form == TorchCsvForm::compute_only);
  REQUIRE(zb.program.ranks() == 2);
  REQUIRE(zb.program.stages() == 4);
  for (int s = 0; s < 4; ++s) CHECK(zb.program.rank_of(s) == s % 2);  // looped placement
  CHECK(zb.program.microbatches() == 8);
  CHECK(zb.steps[0][3] == 4);  // the blank cell after 2F0 is an idle step
  CHECK(zb.steps[1][0] == 1);  // rank 1 starts idle
  CHECK(zb.cells == std::vector<std::int32_t>{49, 49});
  const auto dv = schedules::parse_torch_csv(slurp("dualpipev_4rank_10mb.csv"));
  CHECK(dv.form == TorchCsvForm::compute_only);
  for (int s = 0; s < 8; ++s) CHECK(dv.program.rank_of(s) == std::min(s, 7 - s));  // V
  const auto comms = schedules::parse_torch_csv(slurp("zb1p_2rank_2stagep_comms.csv"));
  CHECK(comms.form == TorchCsvForm::compute_comms);
}

TEST_CASE("torch_csv.pytorch_s_add_send_recv", "[torch]") {
  // torch lowering: PyTorch's _add_send_recv test vector
  const auto csv = schedules::parse_torch_csv(kVectorIn);
  const Program lowered = torch_lowered(csv);
  CHECK(csv_of(lowered) == kVectorOut);
  // The runtime: every transfer posted, each receive waited right before its consumer, the
  // sends at the end.
  test::check_rank_lines(
      lowered,
      {{0, "0F0,0SEND_F0#0,0F1,0SEND_F1#1,0RECV_B0#2,WAIT(2),0B0,0RECV_B1#3,WAIT(3),0B1,WAIT(0;1)"},
       {1,
        "1RECV_F0#0,1RECV_F1#1,WAIT(0),1F0,1B0,1SEND_B0#2,WAIT(1),1F1,1B1,1SEND_B1#3,WAIT(2;3)"}});
  // Rank 0's backwards free the outputs of 0F0 and 0F1 while their sends (requests 0 and 1)
  // are waited only at the end: under Gloo that is "Cannot lock pointer to unbound buffer".
  const auto d = schedules::validate(lowered);
  REQUIRE(d.size() == 2);
  for (std::size_t k = 0; k < 2; ++k) {
    CHECK(d[k].kind == "buffer_released_before_wait");
    CHECK(d[k].rank == 0);
    CHECK(!d[k].fatal);
  }
  CHECK(d[0].position == 6);
  CHECK(d[1].position == 9);
  // 1F1B on 2 ranks, 2 microbatches, F = 1, B = 2, free transfers: (M + P - 1)(F + B) = 9.
  const auto r = test::run(lowered, test::uniform(2, 1, 2));
  CHECK(unexpected(r.errors).empty());
  CHECK(!r.deadlock);
  CHECK(r.makespan == Approx(9));
  // The idle steps take their turn: without them rank 1 receives microbatch 1 later.
  const auto packed = schedules::parse_torch_csv("0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  CHECK(csv_of(torch_lowered(packed)) ==
        "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
        "1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1\n");
}

TEST_CASE("torch_csv.zb1p_compute_artifact_lowers_comms", "[torch]") {
  // torch lowering: zb1p compute artifact lowers to the comms artifact
  const auto compute = schedules::parse_torch_csv(slurp("zb1p_2rank_2stagep_compute.csv"));
  // PyTorch's test merges each I directly followed by its W into a B first (_merge_bw).
  const Program lowered = torch_lowered(compute, /*merge_bw=*/true);
  CHECK(csv_of(lowered) == slurp("zb1p_2rank_2stagep_comms.csv"));
  CHECK(unexpected(schedules::validate(lowered)).empty());
  const auto r = test::run(lowered, test::uniform(4, 1, 2));
  CHECK(unexpected(r.errors).empty());
  CHECK(!r.deadlock);
  // Read as compute_comms, the artifact becomes the same runtime program.
  const auto comms = schedules::parse_torch_csv(slurp("zb1p_2rank_2stagep_comms.csv"));
  CHECK(schedules::torch_runtime(comms.program).to_text() == lowered.to_text());
}

TEST_CASE("torch_csv.dualpipev_artifact_overlapped_pairs_same", "[torch]") {
  // torch lowering: DualPipeV artifact, overlapped pairs and same-rank stages
  const auto dv = schedules::parse_torch_csv(slurp("dualpipev_4rank_10mb.csv"));
  const Program lowered = torch_lowered(dv);
  CHECK(unexpected(schedules::validate(lowered)).empty());
  const auto r = test::run(lowered, test::uniform(8, 1, 2));
  CHECK(unexpected(r.errors).empty());
  CHECK(!r.deadlock);
  // Stages 3 and 4 share rank 3: nothing is sent between them.
  const std::string rows = csv_of(lowered);
  CHECK(rows.find("3SEND_F") == std::string::npos);
  CHECK(rows.find("4RECV_F") == std::string::npos);
  // An overlapped pair sends both of its outputs after it: 0F7 to rank 1, 7B3's gradient too.
  CHECK(rows.find("(0F7;7B3)OVERLAP_F_B,0SEND_F7,7SEND_B3") != std::string::npos);
}

TEST_CASE("torch_csv.schedule_order_can_lower_error", "[torch]") {
  // torch lowering: a schedule no order can lower is an error naming the ranks
  const auto csv = schedules::parse_torch_csv("0B0,0F0\n1F0,1B0\n");
  try {
    (void)torch_lowered(csv);
    FAIL("expected an error");
  } catch (const schedules::ParameterError& e) {
    CHECK(std::string(e.what()).find("rank 0 at 0B0, rank 1 at 1F0") != std::string::npos);
  }
}

TEST_CASE("torch_csv.round_trips_over_generator_comm", "[torch]") {
  // torch csv: round trips over every generator and comm style
  for (const auto& g : schedules::Registry::instance().all()) {
    for (const auto& params : g.test_params) {
      const Program compute = schedules::generate(g.name, params);
      if (compute.routes().count() > 1) {  // dualpipe: a CSV has no routes, so it is refused
        CHECK_THROWS_AS(csv_of(compute, TorchCsvForm::compute_only), schedules::ParameterError);
        continue;
      }
      // compute_only: the compute ops, in order.
      const std::string only = csv_of(compute, TorchCsvForm::compute_only);
      const auto back = schedules::parse_torch_csv(only);
      CHECK(back.program.to_text() == compute.to_text());
      CHECK(csv_of(back.program, TorchCsvForm::compute_only) == only);
      std::vector<schedules::LoweringOptions> styles = test::all_lowerings();
      styles.push_back({"torch", {}});
      for (const auto& l : styles) {
        if (!test::accepts(l, compute)) continue;  // megatron: its loops only
        INFO(g.name << " " << test::describe(l));
        const Program p = schedules::lower(compute, l);
        const std::string rows = csv_of(p);
        const auto csv = schedules::parse_torch_csv(rows);
        CHECK(csv_of(csv.program) == rows);  // import(export(x)) == x, as actions
        if (compute.ranks() > 1) CHECK(csv.form == TorchCsvForm::compute_comms);
        // The runtime's reading of it is a valid program with the same actions.
        const Program runtime = schedules::torch_runtime(csv.program);
        CHECK(csv_of(runtime) == rows);
        for (const auto& d : schedules::validate(runtime)) CHECK(d.fatal == false);
      }
    }
  }
}

TEST_CASE("torch_csv.hostile_input_error_naming_row", "[torch]") {
  // torch csv: hostile input is an error naming row and cell
  CHECK(parse_error_of("") == "0:0: the file is empty: expected one row per rank");
  CHECK(parse_error_of("0F0,0X1\n").starts_with("1:2: bad action '0X1': unknown action type 'X'"));
  CHECK(parse_error_of("0F0,0BW1\n").find("older PyTorch spelled a full backward BW") !=
        std::string::npos);
  CHECK(parse_error_of("F0\n").starts_with("1:1: bad action 'F0': expected a stage number first"));
  CHECK(parse_error_of("0F0\n1F\n") ==
        "2:1: bad action '1F': expected a microbatch number after F");
  CHECK(parse_error_of("0F0,0UNSHARD3\n") ==
        "1:2: bad action '0UNSHARD3': UNSHARD takes no microbatch "
        "number");
  CHECK(parse_error_of("0F0#3\n") == "1:1: bad action '0F0#3': expected only digits after F");
  CHECK(parse_error_of("0F0,WAIT(1)\n").find("WAIT is ppsim's op") != std::string::npos);
  CHECK(parse_error_of("(0F0;1B0)OVERLAP_X\n").find("unknown composite 'OVERLAP_X'") !=
        std::string::npos);
  CHECK(parse_error_of("(0F0)OVERLAP_F_B\n").find("holds two actions") != std::string::npos);
  CHECK(parse_error_of("0F0," + std::string(300, 'F') + "\n") ==
        "1:2: a cell of 300 characters: an action is at most 256");
  // Quoting as Python's csv module does it: a quoted action is an action.
  CHECK(schedules::parse_torch_csv("\"0F0\",0B0\r\n").program.to_text() == "0F0,0B0\n");
  CHECK(parse_error_of("\"0F0,0B0\n").starts_with("1:1: unterminated quoted cell"));
  CHECK(parse_error_of("0F0,0\"B0\n").starts_with("1:2: a quote inside an unquoted cell"));
  CHECK(parse_error_of("\"0F0\"x,0B0\n") == "1:1: text after the closing quote of a quoted cell");
  CHECK(parse_error_of("\"0F0\"\"\"\n").starts_with("1:1: bad action '0F0\"'"));
  // A rank with no actions, or a blank line, is refused (it would renumber the ranks after it).
  CHECK(parse_error_of("0F0\n\n1F0\n").starts_with("2:1: no actions in this row"));
  CHECK(parse_error_of("0F0,0B0\n,,\n").starts_with("2:1: no actions in this row"));
  // compute_comms has no idle steps.
  CHECK(parse_error_of("0F0,0SEND_F0,0B0\n1RECV_F0,,1F0,1B0\n")
            .starts_with("2:2: a blank cell in a "
                         "compute_comms schedule"));
  // Errors of the op lists map back to the cell.
  CHECK(parse_error_of("0F0,,1B0\n1F0\n")
            .starts_with("2:1: stage 1 has compute ops on rank 0 and on "
                         "rank 1"));
  CHECK(parse_error_of("0F0,,0B99999999999\n").starts_with("1:3: "));
  // Ragged rows are PyTorch's own output: kept as they are.
  const auto ragged = schedules::parse_torch_csv("0F0,0B0\n1F0,1B0,,,\n");
  CHECK(ragged.cells == std::vector<std::int32_t>{2, 5});
  CHECK(schedules::write_torch_csv(ragged.program, ragged.form, ragged.steps, ragged.cells) ==
        "0F0,0B0\r\n1F0,1B0,,,\r\n");
  // LF and CRLF read the same; spaces around an action are trimmed, as PyTorch strips them.
  CHECK(schedules::parse_torch_csv("0F0, 1F0\r\n").program.to_text() ==
        schedules::parse_torch_csv("0F0,1F0\n").program.to_text());
}

TEST_CASE("torch_csv.rank_nothing_write_refused", "[torch]") {
  // torch csv: a rank with nothing to write is refused
  const Program p = Program::parse("0F0,0B0\nIDLE\n");
  CHECK_THROWS_AS(schedules::write_torch_csv(p, TorchCsvForm::compute_only),
                  schedules::ParameterError);
}

TEST_CASE("torch_csv.csv_path_config_torch_csv", "[torch]") {
  // torch csv: a .csv path is a config, and the torch-csv source reads files and rows
  const config::Config c = config::load_config(data_path("zb1p_2rank_2stagep_compute.csv"));
  CHECK(c.kind == "torch-csv");
  CHECK(c.name == "zb1p_2rank_2stagep_compute");
  CHECK(c.comm_style() == "torch");
  REQUIRE(config::torch_csv_of(c) != nullptr);
  const config::Prepared run = config::prepare(c);
  CHECK(unexpected(schedules::validate(*run.program)).empty());
  // Inline rows, as `ppsim import` writes them, give the same program.
  nlohmann::json j = {
      {"schedule", {{"kind", "torch-csv"}, {"rows", {"0F0,0F1,,0B0,,0B1", ",1F0,1B0,1F1,1B1,"}}}}};
  const config::Prepared inline_run = config::prepare(config::parse_config(j, "inline.json"));
  CHECK(csv_of(*inline_run.program) == kVectorOut);
  // Errors name the file or the key, the row and the cell.
  j["schedule"]["rows"][1] = ",1F0,1X0";
  try {
    (void)config::parse_config(j, "inline.json");
    FAIL("expected an error");
  } catch (const config::ConfigError& e) {
    CHECK(e.key() == "schedule.rows[1]");
    CHECK(std::string(e.what()).find("cell 3: bad action '1X0'") != std::string::npos);
  }
  j["schedule"]["file"] = "x.csv";
  CHECK_THROWS_AS(config::parse_config(j, "inline.json"), config::ConfigError);  // both
}

TEST_CASE("torch_csv.generator_compute_order_kept_runs", "[torch]") {
  // torch lowering: every generator, compute order kept, runs, only the runtime's hazard
  for (const auto& g : schedules::Registry::instance().all()) {
    for (const auto& params : g.test_params) {
      INFO(g.name << " P=" << params.ranks() << " M=" << params.microbatches());
      const Program compute = schedules::generate(g.name, params);
      const Program p = schedules::lower(compute, {"torch", {}});
      std::size_t sends = 0, boundaries = 0;
      for (int r = 0; r < p.ranks(); ++r) {
        schedules::OpList kept;
        for (const auto& op : p.ops(r)) {
          if (schedules::is_compute(op.kind)) kept.push_back(op);
          sends += schedules::is_send(op.kind) ? 1 : 0;
        }
        CHECK(kept == compute.ops(r));
      }
      // One send per tensor crossing ranks: a forward and a gradient per boundary and microbatch.
      for (int s = 0; s + 1 < compute.stages(); ++s)
        boundaries += compute.rank_of(s) != compute.rank_of(s + 1) ? 1 : 0;
      if (compute.routes().is_linear())
        CHECK(sends == 2 * boundaries * static_cast<std::size_t>(compute.microbatches()));
      CHECK(unexpected(schedules::validate(p)).empty());
      const auto r = test::run(p, test::uniform(compute.stages(), 1, 2));
      CHECK(!r.deadlock);
      CHECK(unexpected(r.errors).empty());
    }
  }
}

TEST_CASE("torch_csv.mutated_artifacts_parse_fail_parseerror", "[torch]") {
  // torch csv: mutated artifacts parse or fail with a ParseError, never otherwise
  const std::string base = slurp("dualpipev_4rank_10mb.csv");
  std::mt19937 rng(20240601);
  const std::string alphabet = "0123456789FIBWSENDRCV_(;),\"\r\n UNSHARD";
  int parsed = 0, refused = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string text = base;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = rng() % text.size();
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0:
          text[at] = c;
          break;
        case 1:
          text.insert(at, 1, c);
          break;
        default:
          text.erase(at, 1);
      }
    }
    try {
      const auto csv = schedules::parse_torch_csv(text);
      // Whatever was read writes back to a text that reads the same.
      const std::string out =
          schedules::write_torch_csv(csv.program, csv.form, csv.steps, csv.cells, "\n");
      const auto again = schedules::parse_torch_csv(out);
      CHECK(schedules::write_torch_csv(again.program, again.form, again.steps, again.cells, "\n") ==
            out);
      ++parsed;
    } catch (const schedules::ParseError& e) {
      CHECK(e.line() >= 0);
      CHECK(e.column() >= 0);
      ++refused;
    }
  }
  CHECK(parsed > 0);
  CHECK(refused > 0);
}

TEST_CASE("torch_csv.torch_lowering_runtime_1_unshard", "[torch]") {
  // torch lowering, runtime=1: UNSHARD/RESHARD/REDUCE_GRAD first, idle steps dropped
  // PyTorch's runtime (_prepare_schedule_with_comms) runs _add_unshard_reshard and
  // _add_reduce_grad before _add_send_recv: each added action takes its turn in a round.
  const auto csv = schedules::parse_torch_csv(kVectorIn);
  const Program p = schedules::lower(csv.program, {"torch", {{"runtime", 1}}, csv.steps});
  CHECK(csv_of(p) ==
        "0UNSHARD,0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1,0REDUCE_GRAD,0RESHARD\n"
        "1UNSHARD,1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1,1REDUCE_GRAD,1RESHARD\n");
  // Before each action the next 3 stages it will use are unsharded and the others resharded;
  // REDUCE_GRAD follows each stage's last W or B (one microbatch here).
  const Program four = Program::parse("0F0,1F0,2F0,3F0,3B0,2B0,1B0,0B0\n");
  CHECK(csv_of(schedules::lower(four, {"torch", {{"runtime", 1}}})) ==
        "0UNSHARD,1UNSHARD,2UNSHARD,0F0,0RESHARD,3UNSHARD,1F0,2F0,3F0,3B0,3REDUCE_GRAD,3RESHARD,"
        "0UNSHARD,2B0,2REDUCE_GRAD,2RESHARD,1B0,1REDUCE_GRAD,1RESHARD,0B0,0REDUCE_GRAD,0RESHARD\n");
  const auto r = test::run(p, test::uniform(2, 1, 2));
  CHECK(!r.deadlock);
  CHECK(r.makespan == Approx(9));  // the added actions take no time
}
