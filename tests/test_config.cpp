// Config loading (config/config.hpp): every bad input is a ConfigError that names the source file,
// the key (or line:column) and what was expected; defaults and cost resolution as documented.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "config_test.hpp"
#include "paths.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/config/reader.hpp"
#include "ppsim/record/run_record.hpp"
#include "ppsim/schedules/generator.hpp"
#include "ppsim/schedules/op.hpp"
#include "ppsim/sim/analysis.hpp"

namespace {

using namespace ppsim::test::config_test;

// A temporary file removed at the end of the test.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& text)
      : path_(std::filesystem::temp_directory_path() /
              ("ppsim_test_config_" + std::to_string(::getpid()) + "_" + name)) {
    std::ofstream(path_, std::ios::binary) << text;
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// `base` with the value at a path of object keys ("/comm/style") set, objects created on the way.
json with(json base, const std::string& path, json value) {
  json* node = &base;
  for (std::size_t at = 1; at <= path.size();) {
    const std::size_t slash = std::min(path.find('/', at), path.size());
    node = &(*node)[path.substr(at, slash - at)];
    at = slash + 1;
  }
  *node = std::move(value);
  return base;
}

json schedule(const std::string& kind, int P, int M, int V = 1, int group = 0) {
  json j = minimal();
  j["schedule"] = {{"kind", kind}, {"ranks", P}, {"microbatches", M}, {"chunks", V}};
  if (group > 0) j["schedule"]["microbatch_group_size"] = group;
  return j;
}

config::Config parse(const json& j) {
  return config::parse_config(j, kSource);
}
config::Prepared build(const json& j) {
  return config::prepare(parse(j));
}

}  // namespace

// Each check: the error names the source, the key (as "key 'a.b'") and what was expected.
#define CHECK_CONFIG_ERROR(expr, key_, expected_)                                        \
  do {                                                                                   \
    const config::ConfigError e_ = error_of([&] { (void)(expr); });                      \
    INFO("what(): " << e_.what());                                                       \
    CHECK(e_.source() == kSource);                                                       \
    CHECK(e_.key() == std::string(key_));                                                \
    CHECK_THAT(e_.what(), StartsWith(kSource + ": key '" + std::string(key_) + "': ") && \
                              Contains(expected_));                                      \
  } while (false)

namespace {
// A value at a path of the minimal config that reading it refuses: the error names `key` and says
// `expected`.
struct Rejected {
  std::string path;
  json value;
  std::string key;
  std::string expected;
};
void check_rejected(const std::vector<Rejected>& cases) {
  for (const Rejected& c : cases) {
    INFO(c.path << " = " << c.value.dump());
    CHECK_CONFIG_ERROR(parse(with(minimal(), c.path, c.value)), c.key, c.expected);
  }
}
}  // namespace

TEST_CASE("config.malformed_json_reported_file_line", "[config]") {
  // malformed JSON is reported as file:line:column
  SECTION("trailing comma on line 3: the error is at the '}' that follows it, column 28") {
    const std::string text =
        "{\n"
        "  \"schedule\": {\"kind\": \"1f1b\", \"ranks\": 4, \"microbatches\": 8},\n"
        "  \"costs\": {\"forward\": 1.0,},\n"
        "}\n";
    const auto e = error_of([&] { config::parse_json_text(text, "file.json"); });
    CHECK(e.source() == "file.json:3:28");
    CHECK(e.key().empty());
    CHECK_THAT(e.what(), StartsWith("file.json:3:28: malformed JSON: "));

    const TempFile file("trailing_comma.json", text);
    const auto from_file = error_of([&] { config::load_config(file.path()); });
    CHECK_THAT(from_file.what(), StartsWith(file.path() + ":3:28: malformed JSON"));
  }
  SECTION("unterminated string on line 2") {
    const auto e = error_of([] { config::parse_json_text("{\n  \"name\": \"abc\n}", "f.json"); });
    CHECK_THAT(e.what(), StartsWith("f.json:2:") && Contains("malformed JSON"));
  }
  SECTION("missing value on line 1") {
    const auto e = error_of([] { config::parse_json_text(R"({"a": })", "f.json"); });
    CHECK_THAT(e.what(), StartsWith("f.json:1:7: malformed JSON"));
  }
  SECTION("empty text is an error at 1:1") {
    const auto e = error_of([] { config::parse_json_text("", "empty.json"); });
    CHECK_THAT(e.what(), StartsWith("empty.json:1:1: malformed JSON"));
  }
  SECTION("a number too large for a double is malformed JSON with its position, not a crash") {
    const auto e =
        error_of([] { config::parse_json_text("{\n  \"ranks\": 1e999\n}", "big.json"); });
    CHECK_THAT(e.what(), StartsWith("big.json:2:12: malformed JSON: number overflow") &&
                             Contains("malformed JSON") && Contains("1e999"));
  }
  SECTION("text after the value") {
    const auto e = error_of([] { config::parse_json_text("{}\n{}", "two.json"); });
    CHECK_THAT(e.what(), StartsWith("two.json:2:1: malformed JSON"));
  }
}

TEST_CASE("config.missing_file_names_path_says", "[config]") {
  // a missing file names the path and says it cannot be opened
  const std::string path = "/nonexistent-ppsim-dir/config.json";
  const auto e = error_of([&] { config::load_config(path); });
  CHECK(e.source() == path);
  CHECK_THAT(e.what(), StartsWith(path + ": ") && Contains("cannot open"));
}

TEST_CASE("config.top_level_must_object", "[config]") {
  // the top level must be an object
  CHECK_CONFIG_ERROR(parse(json::array({1, 2})), "(top level)", "expected an object, got array");
  CHECK_CONFIG_ERROR(parse(json(3)), "(top level)", "expected an object, got number");
  const TempFile file("array.json", "[1, 2]\n");
  const auto e = error_of([&] { config::load_config(file.path()); });
  CHECK_THAT(e.what(), StartsWith(file.path() + ": key '(top level)': expected an object"));
}

TEST_CASE("config.unknown_key_rejected_level_listing", "[config]") {
  // an unknown key is rejected at every level, listing the known ones
  check_rejected({
      {"/schedul", 1, "schedul", "unknown key (did you mean 'schedule'?); known keys here:"},
      {"/schedule/rank", 4, "schedule.rank", "known keys here:"},
      {"/schedule/rank", 4, "schedule.rank", "ranks"},
      {"/costs/fwd", 1.0, "costs.fwd", "known keys here:"},
      {"/costs/fwd", 1.0, "costs.fwd", "forward"},
      {"/costs/per_stage/1/fwd", 1.0, "costs.per_stage.1.fwd",
       "unknown key; known keys here: backward, backward_input, backward_weight, forward"},
      {"/comm/styl", "async", "comm.styl", "style"},
      {"/memory/activations", 1, "memory.activations", "activation_bytes"},
  });
}

TEST_CASE("config.misspelled_key_named_with_nearest", "[config]") {
  // A misspelled required key is the unknown key it is, not a missing one; any unknown key gets
  // the nearest known one.
  json j = minimal();
  j["schedule"].erase("microbatches");
  j["schedule"]["microbatchs"] = 8;
  CHECK_CONFIG_ERROR(parse(j), "schedule.microbatchs",
                     "unknown key; did you mean 'microbatches'? ('schedule.microbatches' is "
                     "required: expected an integer >= 1 (M >= 1))");
  CHECK_CONFIG_ERROR(parse(json{{"schedul", minimal()["schedule"]}}), "schedul",
                     "did you mean 'schedule'?");
  CHECK_CONFIG_ERROR(parse(with(minimal(), "/costs/froward", 1)), "costs.froward",
                     "(did you mean 'forward'?)");
  CHECK(config::nearest("serach", {"run", "search", "merge"}) == "search");
  CHECK(config::nearest("RUN", {"run"}) == "run");
  CHECK(config::nearest("xyzzy", {"run", "search"}).empty());
  CHECK(config::edit_distance("microbatchs", "microbatches") == 1);
}

TEST_CASE("config.schedule_kind_ranks_microbatches_required", "[config]") {
  // schedule, kind, ranks and microbatches are required
  CHECK_CONFIG_ERROR(parse(json::object()), "schedule", "is required: expected an object");
  CHECK_CONFIG_ERROR(parse(json{{"schedule", {{"ranks", 4}, {"microbatches", 8}}}}),
                     "schedule.kind", "is required: expected a string");
  CHECK_CONFIG_ERROR(parse(json{{"schedule", {{"kind", "1f1b"}, {"microbatches", 8}}}}),
                     "schedule.ranks", "is required: expected an integer >= 1");
  CHECK_CONFIG_ERROR(parse(json{{"schedule", {{"kind", "1f1b"}, {"ranks", 4}}}}),
                     "schedule.microbatches", "is required: expected an integer >= 1");
  // null counts as absent.
  CHECK_CONFIG_ERROR(parse(with(minimal(), "/schedule/ranks", nullptr)), "schedule.ranks",
                     "is required");
}

TEST_CASE("config.unknown_schedule_kind_lists_known", "[config]") {
  // an unknown schedule kind lists the known ones
  const auto e = error_of([] { parse(with(minimal(), "/schedule/kind", "2f2b")); });
  CHECK(e.key() == "schedule.kind");
  CHECK_THAT(e.what(), StartsWith("cfg.json: key 'schedule.kind': unknown schedule \"2f2b\"") &&
                           Contains("gpipe") && Contains("1f1b") && Contains("interleaved-1f1b") &&
                           Contains("custom"));
  // Names are matched case-insensitively, aliases included.
  CHECK(parse(with(minimal(), "/schedule/kind", "GPipe")).kind == "GPipe");
  CHECK_NOTHROW(build(with(minimal(), "/schedule/kind", "PipeDream-flush")));
}

TEST_CASE("config.values_wrong_type_name_key", "[config]") {
  // values of the wrong type name the key and the expected type
  check_rejected({
      {"/schedule/ranks", "4", "schedule.ranks", "expected an integer >= 1, got string \"4\""},
      {"/schedule/ranks", 4.5, "schedule.ranks", "expected an integer"},
      {"/schedule/microbatches", 8.0, "schedule.microbatches",
       "expected an integer >= 1, got number"},
      // 1f1b declares chunks with range [1, 1]: the only value it takes is what it expects.
      {"/schedule/chunks", true, "schedule.chunks",
       "expected 1 (1f1b takes only 1), got boolean true"},
      {"/schedule/kind", 1, "schedule.kind", "expected a string"},
      {"/schedule", json::array(), "schedule", "expected an object"},
      {"/costs/forward", "1.0", "costs.forward", "expected a number, got string"},
      {"/costs/per_stage", json::array(), "costs.per_stage", "expected an object"},
      {"/costs/per_stage/0", 1.0, "costs.per_stage.0", "expected an object"},
      {"/comm/latency", "fast", "comm.latency", "expected a number"},
      {"/comm/style", 3, "comm.style", "expected a string"},
      {"/comm/style", "telepathy", "comm.style",
       "expected one of async, async-send, batched, blocking, megatron, torch, got \"telepathy\""},
      {"/comm/matching", "lifo", "comm.matching", "expected one of tag, fifo"},
      {"/comm/boundary_bytes", 1.5, "comm.boundary_bytes", "expected a whole number of bytes >= 0"},
      {"/memory/deallocate_outputs", 1, "memory.deallocate_outputs",
       "expected true or false, got number 1"},
      {"/memory/static_bytes", "1GB", "memory.static_bytes", "expected a whole number of bytes"},
      {"/time_unit", "minutes", "time_unit", "expected one of s, ms, us, ns"},
      {"/name", 7, "name", "expected a string"},
      {"/comm", "async", "comm", "expected an object"},
      {"/memory", 0, "memory", "expected an object"},
  });
}

TEST_CASE("config.negative_costs_latency_bandwidth_sizes", "[config]") {
  // negative costs, latency, bandwidth and sizes are rejected
  check_rejected({
      {"/costs/forward", -1.0, "costs.forward", "expected a number >= 0"},
      {"/costs/backward", -2, "costs.backward", "expected a number >= 0"},
      {"/costs/backward_input", -0.5, "costs.backward_input", ">= 0"},
      {"/costs/backward_weight", -0.5, "costs.backward_weight", ">= 0"},
      {"/costs/per_stage/2/forward", -1, "costs.per_stage.2.forward", "expected a number >= 0"},
      {"/comm/latency", -0.05, "comm.latency", "expected a number >= 0"},
      {"/comm/bandwidth", -1e9, "comm.bandwidth", "expected a number >= 0"},
      {"/comm/boundary_bytes", -1, "comm.boundary_bytes",
       "expected a whole number of bytes >= 0, got number -1"},
      {"/comm/eager_limit", -1, "comm.eager_limit", "bytes >= 0"},
      {"/memory/activation_bytes", -1, "memory.activation_bytes", "bytes >= 0"},
      {"/memory/static_bytes", -4096, "memory.static_bytes", "bytes >= 0"},
      {"/schedule/ranks", 0, "schedule.ranks", "expected an integer >= 1, got number 0"},
      {"/schedule/microbatches", -8, "schedule.microbatches", "expected an integer >= 1"},
  });
}

TEST_CASE("config.parameters_generator_rejects_become_errors", "[config]") {
  // parameters a generator rejects become errors on schedule.* when built
  // Each parses (the types are right); the generator refuses the combination.
  SECTION("gpipe and 1f1b take one chunk") {
    // chunks is declared with range [1, 1], so reading the config already refuses it.
    CHECK_CONFIG_ERROR(build(schedule("gpipe", 4, 8, 2)), "schedule.chunks",
                       "expected 1 (gpipe takes only 1), got number 2");
    CHECK_CONFIG_ERROR(build(schedule("1f1b", 4, 8, 2)), "schedule.chunks",
                       "expected 1 (1f1b takes only 1), got number 2");
  }
  SECTION("interleaved-1f1b needs chunks >= 2") {
    CHECK_CONFIG_ERROR(build(schedule("interleaved-1f1b", 4, 8, 1)), "schedule.chunks",
                       "needs chunks >= 2");
  }
  SECTION("interleaved-1f1b runs with 2 ranks (Megatron Core does; see test_megatron.cpp)") {
    CHECK(build(schedule("interleaved-1f1b", 2, 8, 2)).program->ranks() == 2);
  }
  SECTION("interleaved-1f1b: ranks <= microbatch_group_size <= microbatches") {
    CHECK_CONFIG_ERROR(build(schedule("interleaved-1f1b", 4, 8, 2, 3)),
                       "schedule.microbatch_group_size",
                       "must lie in [ranks, microbatches] = [4, 8], got 3");
    CHECK_CONFIG_ERROR(build(schedule("interleaved-1f1b", 4, 8, 2, 16)),
                       "schedule.microbatch_group_size", "got 16");
    // The default group is P, which needs M >= P.
    CHECK_CONFIG_ERROR(build(schedule("interleaved-1f1b", 4, 3, 2)),
                       "schedule.microbatch_group_size", "[4, 3]");
  }
  SECTION("interleaved-1f1b: M % group must be 0 or >= P") {
    CHECK_CONFIG_ERROR(build(schedule("interleaved-1f1b", 4, 10, 2, 4)), "schedule.microbatches",
                       "10 % 4 = 2: it must be 0 or >= ranks (4)");
    CHECK_CONFIG_ERROR(build(schedule("interleaved-1f1b", 4, 9, 2)), "schedule.microbatches",
                       "9 % 4 = 1");
    CHECK_NOTHROW(build(schedule("interleaved-1f1b", 4, 12, 2, 4)));
    CHECK_NOTHROW(build(schedule("interleaved-1f1b", 4, 14, 2, 5)));  // 14 % 5 = 4 >= P
  }
  SECTION("a program too large to simulate: 2 P V M compute ops > 4e8") {
    CHECK_CONFIG_ERROR(build(schedule("1f1b", 100000, 100000)), "schedule.microbatches",
                       "too large");
    CHECK_CONFIG_ERROR(build(schedule("interleaved-1f1b", 20000, 20000, 2)),
                       "schedule.microbatches", "too large");
  }
}

TEST_CASE("config.both_halves_none_b_i", "[config]") {
  // backward costs: both halves or none, and B = I + W
  CHECK_CONFIG_ERROR(build(with(minimal(), "/costs/backward_input", 1.0)), "costs.backward_weight",
                     "give both backward_input and backward_weight, or only backward");
  CHECK_CONFIG_ERROR(build(with(minimal(), "/costs/backward_weight", 1.0)), "costs.backward_input",
                     "give both backward_input and backward_weight");
  const json mismatch = json::parse(R"({"schedule": {"kind": "1f1b", "ranks": 4, "microbatches": 8},
      "costs": {"backward": 3.0, "backward_input": 1.0, "backward_weight": 1.0}})");
  CHECK_CONFIG_ERROR(build(mismatch), "costs.backward",
                     "must equal backward_input + backward_weight = 2, got 3");
  CHECK_CONFIG_ERROR(build(with(with(minimal(), "/costs/per_stage/1/backward", 5.0),
                                "/costs/per_stage/1/backward_input", 2.0)),
                     "costs.per_stage.1.backward_weight", "give both");
  CHECK_CONFIG_ERROR(
      build(with(mismatch, "/costs/per_stage/2",
                 {{"backward", 4.0}, {"backward_input", 1.0}, {"backward_weight", 2.0}})),
      "costs.backward", "got 3");
  json stage_mismatch =
      with(minimal(), "/costs/per_stage/3",
           {{"backward", 4.0}, {"backward_input", 1.0}, {"backward_weight", 2.0}});
  CHECK_CONFIG_ERROR(build(stage_mismatch), "costs.per_stage.3.backward",
                     "must equal backward_input + backward_weight = 3, got 4");
}

TEST_CASE("config.costs_per_stage_keys_stage", "[config]") {
  // costs.per_stage keys are stage numbers inside the schedule
  check_rejected({
      {"/costs/per_stage/first",
       {{"forward", 1.0}},
       "costs.per_stage.first",
       "expected a stage number as key"},
      {"/costs/per_stage/-1", {{"forward", 1.0}}, "costs.per_stage.-1", "expected a stage number"},
      {"/costs/per_stage/1.5",
       {{"forward", 1.0}},
       "costs.per_stage.1.5",
       "expected a stage number"},
      {"/costs/per_stage/99999999999",
       {{"forward", 1.0}},
       "costs.per_stage.99999999999",
       "expected a stage number"},
  });
  // 1f1b with P = 4 has stages 0..3.
  CHECK_CONFIG_ERROR(build(with(minimal(), "/costs/per_stage/4", {{"forward", 1.0}})),
                     "costs.per_stage.4", "stage out of range: the schedule has stages 0..3");
  // interleaved with P = 4, V = 2 has stages 0..7.
  CHECK_NOTHROW(
      build(with(schedule("interleaved-1f1b", 4, 8, 2), "/costs/per_stage/7", {{"forward", 2.0}})));
  CHECK_CONFIG_ERROR(
      build(with(schedule("interleaved-1f1b", 4, 8, 2), "/costs/per_stage/8", {{"forward", 2.0}})),
      "costs.per_stage.8", "stages 0..7");
}

TEST_CASE("config.weight_stash_bytes_part_activation", "[config]") {
  // memory: weight_stash_bytes is part of activation_bytes
  const json j = json::parse(R"({"schedule": {"kind": "1f1b", "ranks": 4, "microbatches": 8},
      "memory": {"activation_bytes": 100, "weight_stash_bytes": 101}})");
  CHECK_CONFIG_ERROR(parse(j), "memory.weight_stash_bytes",
                     "must not exceed activation_bytes (100), got 101");
  CHECK_CONFIG_ERROR(parse(with(minimal(), "/memory/weight_stash_bytes", 1)),
                     "memory.weight_stash_bytes", "must not exceed activation_bytes (0)");
  CHECK(parse(with(j, "/memory/weight_stash_bytes", 100)).memory.weight_stash_bytes == 100);
}

TEST_CASE("config.comm_prefetch_integer_0", "[config]") {
  // comm.prefetch is an integer >= 0 or "all"
  for (const json& bad : {json(-1), json(1.5), json("some"), json(true), json::array()}) {
    INFO("prefetch = " << bad.dump());
    CHECK_CONFIG_ERROR(parse(with(minimal(), "/comm/prefetch", bad)), "comm.prefetch",
                       "expected an integer >= 0 or \"all\"");
  }
  CHECK(parse(with(minimal(), "/comm/prefetch", "all")).lowering.params.get("prefetch") ==
        -1);  // "all" is stored as -1
  CHECK(parse(with(minimal(), "/comm/prefetch", 0)).lowering.params.get("prefetch") == 0);
  CHECK(parse(with(minimal(), "/comm/prefetch", 3)).lowering.params.get("prefetch") == 3);
  CHECK_NOTHROW(build(with(minimal(), "/comm/prefetch", "all")));
}

TEST_CASE("config.overrides_set_key_value_value", "[config]") {
  // overrides (--set KEY=VALUE): the value is parsed as JSON, else taken as a string
  json j = minimal();
  config::apply_override(j, "comm.style=blocking");
  CHECK(j["comm"]["style"] == "blocking");
  config::apply_override(j, "schedule.microbatches=16");
  CHECK(j["schedule"]["microbatches"].is_number_integer());
  CHECK(j["schedule"]["microbatches"] == 16);
  config::apply_override(j, "memory.deallocate_outputs=true");
  CHECK(j["memory"]["deallocate_outputs"] == true);
  config::apply_override(j, "name=\"16\"");
  CHECK(j["name"] == "16");
  config::apply_override(j, "costs.per_stage.2.forward=1.5");
  CHECK(j["costs"]["per_stage"]["2"]["forward"] == 1.5);

  const config::Config c = parse(j);
  CHECK(c.lowering.style == "blocking");
  CHECK(config::prepare(c).program->microbatches() == 16);
  CHECK(c.memory.deallocate_outputs);
  CHECK(c.name == "16");
  CHECK(c.raw == j);

  SECTION("malformed assignments") {
    const auto no_eq = error_of([&] { config::apply_override(j, "comm.style"); });
    CHECK(no_eq.source() == "--set comm.style");
    CHECK_THAT(no_eq.what(), StartsWith("--set comm.style: ") && Contains("expected KEY=VALUE"));
    const auto no_key = error_of([&] { config::apply_override(j, "=blocking"); });
    CHECK_THAT(no_key.what(), Contains("expected KEY=VALUE"));
    const auto empty_part = error_of([&] { config::apply_override(j, "comm..style=async"); });
    CHECK(empty_part.key() == "comm..style");
    CHECK_THAT(empty_part.what(), Contains("empty key component"));
    const auto into_number = error_of([&] { config::apply_override(j, "schedule.ranks.x=1"); });
    CHECK(into_number.key() == "schedule.ranks.x");
    CHECK_THAT(into_number.what(),
               StartsWith("--set schedule.ranks.x=1: key 'schedule.ranks.x': "));
  }
  SECTION("a value that overflows a double is kept as text, not a crash") {
    CHECK_NOTHROW(config::apply_override(j, "comm.latency=1e999"));
    CHECK_CONFIG_ERROR(parse(j), "comm.latency", "expected a number");
  }
  SECTION(
      "load_config applies overrides before checking; an error about a --set value names the flag "
      "and key") {
    const TempFile file("override.json", minimal().dump(2));
    const config::Config ok =
        config::load_config(file.path(), {"comm.style=batched", "schedule.ranks=2"});
    CHECK(ok.lowering.style == "batched");
    CHECK(config::prepare(ok).program->ranks() == 2);
    const auto e = error_of([&] { config::load_config(file.path(), {"comm.style=telepathy"}); });
    // The bad value came from --set: the flag is blamed.
    CHECK_THAT(e.what(),
               StartsWith("--set comm.style=telepathy: key 'comm.style': expected one of"));
  }
}

TEST_CASE("config.schedule_ops_op_string_per", "[config]") {
  // custom schedules: schedule.ops, one op string per rank
  // P = 2, M = 1, blocking transfers: F on rank 0, F + B on rank 1, B back on rank 0.
  json j = json::parse(R"({"schedule": {"kind": "custom",
      "ops": ["0F0,0SEND_F0,0RECV_B0,0B0", "1RECV_F0,1F0,1B0,1SEND_B0"]},
      "costs": {"forward": 1.0, "backward": 2.0}})");
  SECTION("it builds and runs") {
    const config::Config c = parse(j);
    CHECK(c.kind == "custom");
    REQUIRE(c.raw["schedule"]["ops"].size() == 2);
    const config::Prepared run = config::prepare(c);
    CHECK(run.program->ranks() == 2);
    CHECK(run.program->stages() == 2);
    CHECK(run.program->microbatches() == 1);
    CHECK(run.program->ops(1).size() == 4);
    const record::RunRecord a = sim::analyze(c);
    CHECK(a.ok());
    REQUIRE(a.metrics);
    CHECK(a.metrics->makespan == Approx(6.0));  // F F B B on the critical path
  }
  SECTION("a bad op names schedule.ops[rank] and its column") {
    j["schedule"]["ops"][1] = "1RECV_F0,1X0,1B0,1SEND_B0";
    CHECK_CONFIG_ERROR(config::prepare(parse(j)), "schedule.ops[1]", "column 10: bad op '1X0'");
    j["schedule"]["ops"][1] = "1RECV_F0,,1B0";
    CHECK_CONFIG_ERROR(config::prepare(parse(j)), "schedule.ops[1]",
                       "column 10: empty op between commas");
    j["schedule"]["ops"][0] = "0F0,0SEND_Fx";
    CHECK_CONFIG_ERROR(config::prepare(parse(j)), "schedule.ops[0]", "column 5: bad op '0SEND_Fx'");
  }
  SECTION("ops missing or of the wrong type") {
    j["schedule"].erase("ops");
    CHECK_CONFIG_ERROR(parse(j), "schedule.ops", "needs ops: an array with one op string per rank");
    j["schedule"]["ops"] = 5;
    CHECK_CONFIG_ERROR(parse(j), "schedule.ops", "needs ops");
    j["schedule"]["ops"] = {"0F0", 7};
    CHECK_CONFIG_ERROR(parse(j), "schedule.ops[1]", "expected a string of ops, got number 7");
  }
}

TEST_CASE("config.async_tag_matching_prefetch_1", "[config]") {
  // defaults as documented: async, tag matching, prefetch 1, ms, one chunk
  const config::Config c = config::parse_config(minimal(), "dir/my-run.json");
  CHECK(c.source == "dir/my-run.json");
  CHECK(c.name == "my-run");
  CHECK(c.time_unit == "ms");
  CHECK(c.kind == "1f1b");
  // Schedule parameters are the generator's; the built program shows the values in force.
  const config::Prepared run = config::prepare(c);
  CHECK(run.program->ranks() == 4);
  CHECK(run.program->microbatches() == 8);
  CHECK(run.program->chunks() == 1);
  // microbatch_group_size is interleaved-1f1b's alone now; its default 0 stands for P.
  const auto* group = schedules::find_param(
      schedules::Registry::instance().find("interleaved-1f1b")->params, "microbatch_group_size");
  REQUIRE(group);
  CHECK(group->default_value == 0);
  CHECK(c.lowering.style == "async");
  CHECK(c.lowering.params.get("prefetch") == 1);
  CHECK(c.network.matching == model::Matching::tag);
  CHECK(c.network.latency == 0.0);
  CHECK(c.network.bandwidth == 0.0);
  CHECK(c.network.boundary_bytes == 0);
  CHECK(c.network.eager_limit == 0);
  CHECK(c.memory.activation_bytes == 0);
  CHECK(c.memory.weight_stash_bytes == 0);
  CHECK(c.memory.static_bytes == 0);
  CHECK_FALSE(c.memory.deallocate_outputs);
  CHECK_FALSE(c.raw["schedule"].contains("ops"));
  CHECK(c.stage_costs.empty());
  CHECK(config::microseconds_per_unit(c.time_unit) == 1000.0);

  // No costs: F = 1, I = W = 1, B = 2 on every stage.
  REQUIRE(run.model.costs.stages.size() == 4);
  for (const auto& s : run.model.costs.stages) {
    CHECK(s.forward == 1.0);
    CHECK(s.backward_input == 1.0);
    CHECK(s.backward_weight == 1.0);
    CHECK(s.backward == 2.0);
    CHECK(s.split);
  }
  CHECK(config::microseconds_per_unit("s") == 1e6);
  CHECK(config::microseconds_per_unit("us") == 1.0);
  CHECK(config::microseconds_per_unit("ns") == 1e-3);
}

TEST_CASE("config.build_resolves_per_stage_cost", "[config]") {
  // build resolves per-stage cost overrides over the global costs
  const json j = json::parse(R"({"schedule": {"kind": "1f1b", "ranks": 4, "microbatches": 8},
      "costs": {"forward": 1.0, "backward_input": 1.0, "backward_weight": 0.5,
                "per_stage": {"1": {"forward": 3.0},
                              "2": {"backward_input": 2.0},
                              "3": {"backward": 4.0}}},
      "comm": {"latency": 0.25, "bandwidth": 1e9, "boundary_bytes": 1024, "matching": "fifo"},
      "memory": {"activation_bytes": 4096, "weight_stash_bytes": 1024, "static_bytes": 8}})");
  const config::Prepared run = build(j);
  const auto& st = run.model.costs.stages;
  REQUIRE(st.size() == 4);
  // Stage 0: global costs, B = I + W.
  CHECK(st[0].forward == 1.0);
  CHECK(st[0].backward_input == 1.0);
  CHECK(st[0].backward_weight == 0.5);
  CHECK(st[0].backward == 1.5);
  CHECK(st[0].split);
  // Stage 1: forward overridden, the rest inherited.
  CHECK(st[1].forward == 3.0);
  CHECK(st[1].backward == 1.5);
  // Stage 2: I overridden, W inherited, B = I + W.
  CHECK(st[2].forward == 1.0);
  CHECK(st[2].backward_input == 2.0);
  CHECK(st[2].backward_weight == 0.5);
  CHECK(st[2].backward == 2.5);
  // Stage 3: a full B only; the inherited split does not apply to it.
  CHECK(st[3].forward == 1.0);
  CHECK(st[3].backward == 4.0);
  CHECK_FALSE(st[3].split);

  CHECK(run.model.network.latency == 0.25);
  CHECK(run.model.network.bandwidth == 1e9);
  CHECK(run.model.network.boundary_bytes == 1024);
  CHECK(run.model.network.matching == model::Matching::fifo);
  CHECK(run.model.memory.activation_bytes == 4096);
  CHECK(run.model.memory.weight_stash_bytes == 1024);
  CHECK(run.model.memory.static_bytes == 8);

  SECTION("a stage that splits B under a global full B gets B = I + W") {
    const json k = json::parse(R"({"schedule": {"kind": "1f1b", "ranks": 2, "microbatches": 2},
        "costs": {"forward": 1.0, "backward": 2.0,
                  "per_stage": {"1": {"backward_input": 1.5, "backward_weight": 1.5}}}})");
    const auto stages = build(k).model.costs.stages;
    REQUIRE(stages.size() == 2);
    CHECK(stages[0].backward == 2.0);
    CHECK_FALSE(stages[0].split);
    CHECK(stages[1].backward == 3.0);
    CHECK(stages[1].split);
  }
  SECTION("the shipped configs load and build") {
    for (const char* name : {"1f1b", "gpipe", "interleaved-1f1b", "1f1b-async-send", "1f1b-batched",
                             "1f1b-blocking-deadlock"}) {
      INFO(name);
      const std::string path = std::string(PPSIM_SOURCE_DIR) + "/configs/" + name + ".json";
      CHECK_NOTHROW(config::prepare(config::load_config(path)));
    }
  }
}

TEST_CASE("config.parameters_come_registries_schedule_comm", "[config][registry]") {
  // Parameters come from the registries: one the schedule or comm style does not take is an error
  // that says who takes it
  auto j = minimal();
  j["schedule"]["microbatch_group_size"] = 4;
  CHECK_CONFIG_ERROR(parse(j), "schedule.microbatch_group_size",
                     "not a parameter of schedule '1f1b' (used by: interleaved-1f1b)");
  j = minimal();
  j["comm"] = {{"style", "blocking"}, {"prefetch", 2}};
  CHECK_CONFIG_ERROR(parse(j), "comm.prefetch",
                     "not a parameter of comm style 'blocking' (used by: async)");
  j = minimal();
  j["schedule"] = {{"kind", "custom"}, {"ops", {"0F0,0B0"}}, {"ranks", 1}};
  CHECK_CONFIG_ERROR(parse(j), "schedule.ranks", "a custom schedule takes ops");
  // Every style the registry holds is accepted by comm.style, and its declared defaults apply.
  for (const auto& style : schedules::LoweringRegistry::instance().all()) {
    j = minimal();
    j["comm"] = {{"style", style.name}};
    const auto c = parse(j);
    CHECK(c.lowering.style == style.name);
    for (const auto& spec : style.params)
      CHECK(c.lowering.params.get(spec.name) == spec.default_value);
  }
}

TEST_CASE("config.i_w_op_stage_only", "[config]") {
  // An I or W op on a stage with only a full backward cost is refused by prepare, naming the key
  // and the op
  json j = json::parse(R"({"schedule": {"kind": "custom", "ops": ["0F0,1F0,1I0,0B0,1W0"]},
                           "costs": {"forward": 1, "backward": 2}})");
  const auto e = error_of([&] { config::prepare(config::parse_config(j, kSource)); });
  CHECK(e.source() == kSource);
  CHECK(e.key() == "costs.backward");
  CHECK_THAT(e.what(), Contains("rank 0 runs 1I0") && Contains("stage 1"));

  SECTION("a stage's own backward is the key named") {
    j["costs"] = json::parse(R"({"backward_input": 1, "backward_weight": 1,
                                 "per_stage": {"1": {"backward": 2}}})");
    const auto e1 = error_of([&] { config::prepare(config::parse_config(j, kSource)); });
    CHECK(e1.key() == "costs.per_stage.1.backward");
  }
  SECTION("a value from --set is blamed on the flag") {
    const auto e2 =
        error_of([&] { config::prepare(config::parse_config(j, kSource, {"costs.backward=3"})); });
    CHECK(e2.source() == "--set costs.backward=3");
    CHECK(e2.key() == "costs.backward");
  }
  SECTION("with split costs it runs") {
    j["costs"] = json::parse(R"({"forward": 1, "backward_input": 1, "backward_weight": 1})");
    const auto a = sim::analyze(config::parse_config(j, kSource));
    REQUIRE(a.metrics);
    CHECK(a.metrics->makespan == 6.0);  // 1 + 1 + 1 + 2 + 1, one rank
  }
}
