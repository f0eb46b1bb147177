// Input limits and ambiguity (issue 6): bounded config reads, JSON nesting depth and duplicate keys
// found while parsing, --set blamed for its values, canonical per_stage keys, parameters the
// chosen schedule or comm style does not use, idle and empty ranks in op lists, index ranges, and
// echoed input cut short.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "config_test.hpp"
#include "error_of.hpp"
#include "paths.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/config/sweep.hpp"
#include "ppsim/record/run_record.hpp"
#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/generator.hpp"
#include "ppsim/schedules/program.hpp"
#include "ppsim/schedules/validation.hpp"
#include "ppsim/sim/analysis.hpp"

namespace {

using namespace ppsim::test::config_test;
using test::parse_error_of;

// A file (or directory) under a fresh temporary directory, removed with it at the end.
class TempDir {
 public:
  TempDir()
      : dir_(std::filesystem::temp_directory_path() /
             ("ppsim_test_limits_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string write(const std::string& name, const std::string& text) const {
    const auto path = dir_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  bool empty() const { return std::filesystem::is_empty(dir_); }

 private:
  std::filesystem::path dir_;
};

// No byte of `s` is a control character or outside ASCII, except those of "…".
bool printable(const std::string& s) {
  std::string rest = s;
  for (std::size_t p; (p = rest.find("…")) != std::string::npos;) rest.erase(p, 3);
  for (unsigned char c : rest)
    if (c < 0x20 || c >= 0x7f) return false;
  return true;
}

std::string nested_arrays(std::size_t depth, bool closed = true) {
  return std::string(depth, '[') + (closed ? std::string(depth, ']') : "");
}

}  // namespace

TEST_CASE("input_limits.config_file_read_up_16", "[limits][config]") {
  // limits: a config file is read up to 16 MiB and no further
  SECTION("/dev/zero fails on its size, having read only the limit") {
    const auto e = error_of([] { config::load_config("/dev/zero"); });
    CHECK(e.source() == "/dev/zero");
    CHECK_THAT(e.what(), StartsWith("/dev/zero: ") && Contains("larger than 16 MiB"));
  }
  SECTION("a file one byte over the limit, and one at the limit") {
    TempDir dir;
    std::string text = minimal().dump();
    text.resize(config::kMaxConfigBytes, ' ');
    CHECK_NOTHROW(config::load_config(dir.write("at.json", text)));
    const std::string over = dir.write("over.json", text + " ");
    const auto e = error_of([&] { config::load_config(over); });
    CHECK_THAT(e.what(), StartsWith(over + ": larger than 16 MiB"));
  }
  SECTION("files of a few KiB and of more than one 64 KiB read are read whole") {
    // The config at the end, after padding: a read that stopped early would not parse.
    TempDir dir;
    for (const std::size_t pad :
         {std::size_t{0}, std::size_t{5000}, std::size_t{70000}, std::size_t{200000}}) {
      INFO(pad);
      const std::string file =
          dir.write("padded.json", std::string(pad, ' ') + minimal().dump() + "\n");
      CHECK_NOTHROW(config::load_config(file));
    }
  }
  SECTION("a directory is named as one") {
    TempDir dir;
    const auto e = error_of([&] { config::load_config(dir.path("")); });
    CHECK_THAT(e.what(), Contains(": is a directory"));
    CHECK_THAT(e.what(), !Contains("unexpected end of input"));
  }
  SECTION("a file that cannot be opened gives the reason") {
    const auto e = error_of([] { config::load_config("/nonexistent-ppsim-dir/c.json"); });
    CHECK(std::string(e.what()) ==
          "/nonexistent-ppsim-dir/c.json: cannot open file: No such file or directory");
    TempDir dir;
    const std::string file = dir.write("plain.json", "{}");
    const auto not_dir = error_of([&] { config::load_config(file + "/x.json"); });
    CHECK_THAT(not_dir.what(), Contains("cannot open file: Not a directory"));
    if (::geteuid() != 0) {  // root reads anything
      ::chmod(file.c_str(), 0);
      const auto denied = error_of([&] { config::load_config(file); });
      CHECK_THAT(denied.what(), Contains("cannot open file: Permission denied"));
    }
  }
}

TEST_CASE("input_limits.json_nesting_deeper_64_levels", "[limits][config]") {
  // limits: JSON nesting deeper than 64 levels is refused while parsing, with its position
  SECTION("64 levels parse, 65 do not; the error points at the 65th bracket") {
    CHECK_NOTHROW(config::parse_json_text(nested_arrays(64), "ok.json"));
    const auto e = error_of([] { config::parse_json_text(nested_arrays(65), "deep.json"); });
    CHECK(e.source() == "deep.json:1:65");
    CHECK_THAT(e.what(), StartsWith("deep.json:1:65: nested deeper than 64 levels"));
  }
  SECTION("100k levels as a whole file: arrays, objects, unclosed, no crash") {
    TempDir dir;
    const std::string arrays = dir.write("arrays.json", nested_arrays(100'000));
    CHECK_THAT(error_of([&] { config::load_config(arrays); }).what(),
               StartsWith(arrays + ":1:65: nested deeper than 64 levels"));
    std::string objects;
    for (int i = 0; i < 100'000; ++i) objects += "{\"a\":\n";
    const std::string obj = dir.write("objects.json", objects);
    CHECK_THAT(error_of([&] { config::load_config(obj); }).what(),
               StartsWith(obj + ":65:1: nested deeper than 64 levels"));
    const std::string open = dir.write("open.json", nested_arrays(100'000, false));
    CHECK_THAT(error_of([&] { config::load_config(open); }).what(),
               Contains("nested deeper than 64"));
  }
  SECTION("100k levels as a value in a config") {
    const std::string text = "{\"name\": " + nested_arrays(100'000) + "}";
    const auto e = error_of([&] { config::parse_json_text(text, "v.json"); });
    CHECK_THAT(e.what(), StartsWith("v.json:1:73: nested deeper than 64 levels"));
  }
  SECTION("100k levels through --set: the value and the key path, blamed on --set") {
    json j = minimal();
    const std::string deep = "name=" + nested_arrays(100'000);
    const auto e = error_of([&] { config::apply_override(j, deep); });
    CHECK_THAT(e.source(), StartsWith("--set name=[[[[") && Contains("…"));
    CHECK(e.source().size() < 400);
    CHECK(e.key() == "name");
    CHECK_THAT(e.what(), Contains("nested deeper than 63 levels") && Contains("column 64"));
    CHECK(j == minimal());  // untouched

    std::string path = "a";
    for (int i = 0; i < 100'000; ++i) path += ".a";
    const auto p = error_of([&] { config::apply_override(j, path + "=1"); });
    CHECK_THAT(p.what(), StartsWith("--set a.a.a") && Contains("at most 63 components"));
    CHECK(std::string(p.what()).size() < 600);
    // Through load_config too.
    TempDir dir;
    const std::string file = dir.write("c.json", minimal().dump());
    CHECK_THAT(error_of([&] { config::load_config(file, {deep}); }).what(),
               StartsWith("--set name=[[[") && Contains("nested deeper"));
  }
}

TEST_CASE("input_limits.key_given_twice_object_error", "[limits][config]") {
  // limits: a key given twice in one object is an error with its position and key path
  SECTION("top level") {
    const auto e =
        error_of([] { config::parse_json_text(R"({"name": "a", "name": "b"})", "d.json"); });
    CHECK(e.source() == "d.json:1:15");
    CHECK(e.key() == "name");
    CHECK_THAT(e.what(), StartsWith("d.json:1:15: key 'name': duplicate key"));
  }
  SECTION("nested, on another line") {
    const std::string text =
        "{\"schedule\": {\"kind\": \"1f1b\", \"ranks\": 4,\n"
        "   \"microbatches\": 8, \"ranks\": 2}}";
    const auto e = error_of([&] { config::parse_json_text(text, "d.json"); });
    CHECK(e.source() == "d.json:2:23");
    CHECK(e.key() == "schedule.ranks");
    TempDir dir;
    const std::string file = dir.write("dup.json", text);
    CHECK_THAT(error_of([&] { config::load_config(file); }).what(),
               StartsWith(file + ":2:23: key 'schedule.ranks': duplicate key"));
  }
  SECTION("inside an array, and a key with escaped quotes") {
    const auto e =
        error_of([] { config::parse_json_text(R"({"a": [1, {"x": 1, "x": 2}]})", "d.json"); });
    CHECK(e.key() == "a[1].x");
    CHECK(e.source() == "d.json:1:20");
    const auto q = error_of([] { config::parse_json_text(R"({"a\"b": 1, "a\"b": 2})", "d.json"); });
    CHECK(q.source() == "d.json:1:13");
    // Equal after unescaping: "\u0061" is "a".
    const auto u = error_of([] { config::parse_json_text(R"({"a": 1, "\u0061": 2})", "d.json"); });
    CHECK(u.key() == "a");
  }
  SECTION("in a --set value, blamed on --set") {
    json j = minimal();
    const auto e = error_of(
        [&] { config::apply_override(j, R"(comm={"style": "async", "style": "blocking"})"); });
    CHECK_THAT(e.source(), StartsWith("--set comm={"));
    CHECK(e.key() == "comm.style");
    CHECK_THAT(e.what(), Contains("duplicate key") && Contains("column 20"));
  }
  SECTION("the same key in different objects is fine") {
    CHECK_NOTHROW(
        config::parse_json_text(R"({"a": {"x": 1}, "b": {"x": 1}, "x": [{"x": 1}]})", "ok.json"));
  }
}

TEST_CASE("input_limits.values_set_blamed_flag_others", "[limits][config]") {
  // limits: values from --set are blamed on the flag, the others on the file
  TempDir dir;
  const std::string file = dir.write("c.json", minimal().dump());
  const auto e = error_of([&] { config::load_config(file, {"schedule.ranks=-1"}); });
  CHECK(e.source() == "--set schedule.ranks=-1");
  CHECK(e.key() == "schedule.ranks");
  CHECK_THAT(e.what(), StartsWith("--set schedule.ranks=-1: key 'schedule.ranks': expected"));
  // A whole section set at once: a key inside it is the flag's.
  const auto section =
      error_of([&] { config::load_config(file, {R"(comm={"style": "telepathy"})"}); });
  CHECK_THAT(section.what(), StartsWith("--set comm={\"style\": \"telepathy\"}: key 'comm.style'"));
  // The last --set of a key is the one blamed.
  const auto last = error_of([&] {
    config::load_config(file, {"comm.style=blocking", "comm.style=telepathy"});
  });
  CHECK(last.source() == "--set comm.style=telepathy");
  // An error about a key no --set touched names the file.
  const std::string bad = dir.write("bad.json", R"({"schedule": {"kind": "1f1b", "ranks": 0,
      "microbatches": 8}})");
  const auto file_err = error_of([&] { config::load_config(bad, {"comm.style=blocking"}); });
  CHECK(file_err.source() == bad);
  CHECK(file_err.key() == "schedule.ranks");
  // A value --set takes as text and a type that cannot use it: no exception but ConfigError.
  const auto junk = error_of([&] { config::load_config(file, {"schedule=\xff\xfe"}); });
  CHECK(junk.source() == "--set schedule=\\xff\\xfe");
  CHECK_THAT(junk.what(), Contains("the value '\\xff\\xfe' is not valid UTF-8"));
  CHECK(printable(junk.what()));
  // A string that reports and traces could not print as JSON is refused where it enters.
  const auto name = error_of([&] { config::load_config(file, {"name=ok\xff"}); });
  CHECK(name.key() == "name");
  CHECK_THAT(name.what(), Contains("not valid UTF-8"));
  CHECK(config::load_config(file, {"name=caf\xc3\xa9"}).name == "caf\xc3\xa9");
}

TEST_CASE("input_limits.echoed_tokens_cut_escaped", "[limits][config]") {
  // limits: echoed tokens are cut with … and escaped
  SECTION("a 5 MB bad token in a config") {
    // A string token read whole, then refused at its last character.
    const std::string text = "{\"name\": \"" + std::string(5'000'000, 'x') + "\x01\"}";
    const auto e = error_of([&] { config::parse_json_text(text, "big.json"); });
    CHECK_THAT(e.what(), StartsWith("big.json:1:5000011: malformed JSON") && Contains("xxx…"));
    CHECK(std::string(e.what()).size() < 400);
  }
  SECTION("a 5 MB number") {
    const std::string text = "{\"name\": 1" + std::string(5'000'000, '0') + "}";
    const auto e = error_of([&] { config::parse_json_text(text, "num.json"); });
    CHECK_THAT(e.what(), StartsWith("num.json:1:10: malformed JSON: number overflow"));
    CHECK(std::string(e.what()).size() < 400);
  }
  SECTION("binary junk") {
    std::string junk = "{\"name\": \"";
    for (int i = 0; i < 100'000; ++i) junk += static_cast<char>(0x80 + i % 128);
    junk += "\"}";
    const auto e = error_of([&] { config::parse_json_text(junk, "bin.json"); });
    CHECK_THAT(e.what(), StartsWith("bin.json:1:") && Contains("\\x"));
    CHECK(printable(e.what()));
    CHECK(std::string(e.what()).size() < 400);
    const auto nul = error_of([] { config::parse_json_text(std::string("\0\1\2", 3), "z.json"); });
    CHECK(printable(nul.what()));
  }
  SECTION("a 5 MB unknown key and a 5 MB bad string value") {
    json j = minimal();
    j[std::string(5'000'000, 'k')] = 1;
    const auto key = error_of([&] { config::parse_config(j, "k.json"); });
    CHECK_THAT(key.what(), StartsWith("k.json: key 'kkkk") && Contains("…"));
    CHECK(std::string(key.what()).size() < 600);
    j = minimal();
    j["time_unit"] = std::string(5'000'000, 'u');
    const auto value = error_of([&] { config::parse_config(j, "v.json"); });
    CHECK_THAT(value.what(), Contains("got \"uuuu") && Contains("…"));
    CHECK(std::string(value.what()).size() < 400);
    j = minimal();
    j["schedule"]["kind"] = std::string(5'000'000, 'q');
    const auto kind = error_of([&] { config::parse_config(j, "q.json"); });
    CHECK_THAT(kind.what(), Contains("unknown schedule \"qqqq") && Contains("…"));
    CHECK(std::string(kind.what()).size() < 600);
    j = minimal();
    j["name"] = json::array();
    for (int i = 0; i < 1'000'000; ++i) j["name"].push_back(i);
    const auto arr = error_of([&] { config::parse_config(j, "a.json"); });
    CHECK_THAT(arr.what(), Contains("got array [... 1000000 elements]"));
  }
}

TEST_CASE("input_limits.costs_per_stage_keys_canonical", "[limits][config]") {
  // limits: costs.per_stage keys are canonical stage numbers
  for (const std::string bad :
       {"01", "+1", " 1", "1 ", "1.0", "-1", "1e0", "0x1", "", "one", "9999999999"}) {
    INFO("key '" << bad << "'");
    json j = minimal();
    j["costs"]["per_stage"][bad] = {{"forward", 2.0}};
    const auto e = error_of([&] { config::parse_config(j, "ps.json"); });
    CHECK(e.key() == "costs.per_stage." + bad);
    CHECK_THAT(e.what(), Contains("expected a stage number as key") &&
                             Contains("without sign, leading zeros"));
  }
  for (const std::string good : {"0", "1", "3", "10"}) {
    json j = minimal();
    j["costs"]["per_stage"][good] = {{"forward", 2.0}};
    CHECK(config::parse_config(j, "ps.json").stage_costs.count(std::stoi(good)) == 1);
  }
  // "01" and "1" cannot both be read as stage 1.
  json j = minimal();
  j["costs"]["per_stage"]["1"] = {{"forward", 2.0}};
  j["costs"]["per_stage"]["01"] = {{"forward", 3.0}};
  CHECK(error_of([&] { config::parse_config(j, "ps.json"); }).key() == "costs.per_stage.01");
}

TEST_CASE("input_limits.parameter_another_schedule_comm_style", "[limits][config][registry]") {
  // limits: a parameter of another schedule or comm style is an error naming who uses it
  const auto& generators = schedules::Registry::instance().all();
  const auto& styles = schedules::LoweringRegistry::instance().all();
  int checked = 0;
  // Every generator parameter, given to every generator that does not declare it, and to custom.
  for (const auto& owner : generators) {
    for (const auto& spec : owner.params) {
      std::vector<std::string> users;
      for (const auto& g : generators)
        if (schedules::find_param(g.params, spec.name)) users.push_back(g.name);
      std::string used_by;
      for (const auto& u : users) used_by += (used_by.empty() ? "" : ", ") + u;
      for (const auto& g : generators) {
        if (schedules::find_param(g.params, spec.name)) continue;
        INFO(g.name << " given " << spec.name);
        json j = minimal();
        j["schedule"]["kind"] = g.name;
        j["schedule"][spec.name] = spec.min;
        const auto e = error_of([&] { config::parse_config(j, "p.json"); });
        CHECK(e.key() == "schedule." + spec.name);
        CHECK(e.message() ==
              "not a parameter of schedule '" + g.name + "' (used by: " + used_by + ")");
        ++checked;
      }
      json j = {{"schedule", {{"kind", "custom"}, {"ops", {"0F0,0B0"}}}}};
      j["schedule"][spec.name] = spec.min;
      const auto e = error_of([&] { config::parse_config(j, "p.json"); });
      CHECK(e.key() == "schedule." + spec.name);
      CHECK_THAT(e.message(),
                 StartsWith("not a parameter of schedule 'custom' (used by: " + used_by + ")"));
    }
  }
  // Every comm style parameter, given with every style that does not declare it, and to custom.
  for (const auto& owner : styles) {
    for (const auto& spec : owner.params) {
      std::string used_by;
      for (const auto& st : styles)
        if (schedules::find_param(st.params, spec.name))
          used_by += (used_by.empty() ? "" : ", ") + st.name;
      for (const auto& st : styles) {
        if (schedules::find_param(st.params, spec.name)) continue;
        INFO(st.name << " given " << spec.name);
        json j = minimal();
        j["comm"] = {{"style", st.name}, {spec.name, spec.min}};
        const auto e = error_of([&] { config::parse_config(j, "p.json"); });
        CHECK(e.key() == "comm." + spec.name);
        CHECK(e.message() ==
              "not a parameter of comm style '" + st.name + "' (used by: " + used_by + ")");
        ++checked;
      }
      // Op lists that write their communication out take no style parameter.
      json j = {{"schedule",
                 {{"kind", "custom"},
                  {"ops", {"0F0,0SEND_F0,0RECV_B0,0B0", "1RECV_F0,1F0,1B0,1SEND_B0"}}}},
                {"comm", {{spec.name, spec.min}}}};
      const auto e = error_of([&] { config::parse_config(j, "p.json"); });
      CHECK(e.key() == "comm." + spec.name);
      CHECK_THAT(e.message(), StartsWith("not used by schedule 'custom'"));
    }
  }
  CHECK(checked >= 2);  // at least microbatch_group_size with 1f1b and prefetch with blocking
  // A custom schedule that writes its comm ops out: comm.style is not used either.
  json j = {
      {"schedule",
       {{"kind", "custom"}, {"ops", {"0F0,0SEND_F0,0RECV_B0,0B0", "1RECV_F0,1F0,1B0,1SEND_B0"}}}},
      {"comm", {{"style", "blocking"}, {"latency", 1.0}}}};
  const auto e = error_of([&] { config::parse_config(j, "p.json"); });
  CHECK(e.key() == "comm.style");
  CHECK_THAT(e.message(), StartsWith("not used by schedule 'custom'"));
  // Compute ops only: lowered, so the style and its parameters are read.
  j["schedule"]["ops"] = {"0F0,0B0"};
  CHECK(config::parse_config(j, "p.json").comm_style() == "blocking");
  j["comm"].erase("style");
  CHECK_NOTHROW(config::parse_config(j, "p.json"));
}

TEST_CASE("input_limits.sweep_drops_parameters_swept_schedule", "[limits][sweep]") {
  // limits: a sweep drops the parameters the swept schedule does not take
  json j = minimal();
  j["schedule"] = {{"kind", "interleaved-1f1b"},
                   {"ranks", 4},
                   {"microbatches", 8},
                   {"chunks", 2},
                   {"microbatch_group_size", 4}};
  j["comm"] = {{"style", "async"}, {"prefetch", 2}};
  const config::Config base = config::parse_config(j, "s.json");
  config::SweepAxes axes;
  axes.kinds = {"gpipe", "1f1b", "interleaved-1f1b"};
  axes.chunks = {2};
  std::vector<config::Config> runs;
  REQUIRE_NOTHROW(runs = config::sweep(base, axes));
  REQUIRE(runs.size() == 3);
  CHECK_FALSE(runs[0].raw["schedule"].contains("microbatch_group_size"));
  CHECK_FALSE(runs[1].raw["schedule"].contains("chunks"));
  CHECK(runs[2].raw["schedule"]["microbatch_group_size"] == 4);
  for (const auto& r : runs) CHECK_NOTHROW(config::prepare(r));
}

TEST_CASE("input_limits.idle_writes_rank_ops_empty", "[limits][program_text][config]") {
  // op lists: IDLE writes a rank with no ops, an empty rank is an error
  // Rank 1 idles between the two stages' ranks.
  const json j = {{"schedule",
                   {{"kind", "custom"},
                    {"ops", {"0F0,0SEND_F0,0RECV_B0,0B0", "IDLE", "1RECV_F0,1F0,1B0,1SEND_B0"}}}}};
  const config::Prepared run = config::prepare(config::parse_config(j, "idle.json"));
  REQUIRE(run.program->ranks() == 3);
  CHECK(run.program->ops(1).empty());
  CHECK(run.program->rank_of(1) == 2);
  const record::RunRecord rec = sim::analyze(config::parse_config(j, "idle.json"));
  CHECK(rec.ok());
  // The text form writes IDLE back, and reads it again.
  const std::string text = run.program->to_text();
  CHECK(text == "0F0,0SEND_F0,0RECV_B0,0B0\nIDLE\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  const schedules::Program again = schedules::Program::parse(text);
  CHECK(again.ranks() == 3);
  CHECK(again.to_text() == text);
  // Spaces around IDLE are fine; IDLE among ops is not.
  CHECK(schedules::Program::parse("0F0,0B0\n  IDLE \r\n").ranks() == 2);
  const auto mixed = parse_error_of("0F0,IDLE,0B0");
  CHECK(mixed.column() == 5);
  CHECK_THAT(mixed.what(), Contains("IDLE marks a rank with no ops"));

  SECTION("an empty element of ops names the rank and says how to write an idle one") {
    for (const std::string empty : {"", "   ", "\t"}) {
      json bad = j;
      bad["schedule"]["ops"][1] = empty;
      const auto e = error_of([&] { config::parse_config(bad, "e.json"); });
      CHECK(e.key() == "schedule.ops[1]");
      CHECK_THAT(e.message(), StartsWith("rank 1 has no ops: write \"IDLE\""));
    }
    json nl = j;
    nl["schedule"]["ops"][1] = "1RECV_F0\n1F0";
    CHECK_THAT(error_of([&] { config::parse_config(nl, "e.json"); }).message(),
               Contains("holds no newline"));
    nl["schedule"]["ops"][1] = "# a comment";
    CHECK_THAT(error_of([&] { config::parse_config(nl, "e.json"); }).message(),
               Contains("comments belong to the one-string form"));
  }
  SECTION("the one-string form: a blank line is an error, the final newline is not") {
    json s = {{"schedule",
               {{"kind", "custom"},
                {"ops", "0F0,0SEND_F0,0RECV_B0,0B0\n\n1RECV_F0,1F0,1B0,1SEND_B0\n"}}}};
    const auto e = error_of([&] { config::prepare(config::parse_config(s, "s.json")); });
    CHECK(e.key() == "schedule.ops");
    CHECK_THAT(e.message(), StartsWith("line 2 (rank 1), column 1: line 2 is empty: write IDLE"));
    s["schedule"]["ops"] = "# two ranks\n0F0,0SEND_F0,0RECV_B0,0B0\nIDLE\n1RECV_F0,1F0,1X0\n";
    const auto bad_op = error_of([&] { config::prepare(config::parse_config(s, "s.json")); });
    CHECK_THAT(bad_op.message(), StartsWith("line 4 (rank 2), column 14: bad op '1X0'"));
    CHECK(schedules::Program::parse("0F0,0B0\n").ranks() == 1);
    CHECK(parse_error_of("0F0,0B0\n\n").line() == 2);
    CHECK(parse_error_of("\n0F0,0B0").line() == 1);
    CHECK_THAT(parse_error_of("0F0\n,\n").what(), Contains("empty op between commas"));
    CHECK_THAT(parse_error_of("0F0\n ,").what(), Contains("empty op"));
  }
}

TEST_CASE("input_limits.send_last_stage_reaches_validation", "[limits][program_text][validation]") {
  // op lists: a send from the last stage reaches validation as bad_comm
  const schedules::Program p = schedules::Program::parse("0F0,0SEND_F0,0B0\n");
  CHECK(p.stages() == 1);
  const auto diags = schedules::validate(p);
  REQUIRE_FALSE(diags.empty());
  CHECK(diags[0].kind == "bad_comm");
  CHECK(diags[0].rank == 0);
  CHECK(diags[0].position == 1);
  CHECK(schedules::has_fatal(diags));
  // Same through a config: prepare succeeds and the record carries the diagnostic.
  const json j = {{"schedule",
                   {{"kind", "custom"},
                    {"ops", {"0F0,0SEND_F0,0RECV_B0,0B0", "1RECV_F0,1F0,1SEND_F0,1B0,1SEND_B0"}}}}};
  const config::Config c = config::parse_config(j, "last.json");
  CHECK_NOTHROW(config::prepare(c));
  const record::RunRecord rec = sim::analyze(c);
  CHECK_FALSE(rec.ok());
  bool bad_comm = false;
  for (const auto& d : rec.diagnostics) bad_comm |= d.kind == "bad_comm" && d.rank == 1;
  CHECK(bad_comm);
}

TEST_CASE("input_limits.ids_beyond_limits_huge_tokens", "[limits][program_text]") {
  // op lists: ids beyond the limits and huge tokens are refused briefly
  const auto mb = parse_error_of("0F0,0F1000000000");
  CHECK(mb.column() == 5);
  CHECK_THAT(mb.what(),
             Contains("microbatch 1000000000 is out of range: ids are below 1000000000"));
  CHECK_NOTHROW(schedules::Program::parse("0F999999999"));
  CHECK_THAT(parse_error_of("99999999999F0").what(), Contains("stage 99999999999 is out of range"));
  CHECK_THAT(parse_error_of("0SEND_F0#4294967296").what(), Contains("request id 4294967296"));
  CHECK_THAT(parse_error_of("0F0,WAIT(1;99999999999)").what(), Contains("request id"));
  // A large stage id that leaves lower stages unplaced is refused before anything is sized by it.
  const auto sparse = parse_error_of("0F0,0B0\n900000000F0,900000000B0");
  CHECK(sparse.line() == 0);
  CHECK_THAT(sparse.what(), Contains("stage 1 appears in no op") && Contains("up to 900000000"));
  // A 5 MB token is cut in the message.
  const std::string huge = "0F" + std::string(5'000'000, '7');
  const auto h = parse_error_of("0F0," + huge);
  CHECK(h.column() == 5);
  CHECK(std::string(h.what()).size() < 300);
  CHECK_THAT(h.what(), Contains("…"));
  const auto junk = parse_error_of("0F0,\xff\xfe" + std::string(1'000'000, 'B'));
  CHECK(std::string(junk.what()).size() < 300);
  CHECK(printable(junk.what()));
  // Through a config: the key names the rank, the message the column and the cut token.
  const json j = {{"schedule", {{"kind", "custom"}, {"ops", {"0F0,0B0", "1F0," + huge}}}}};
  const auto e = error_of([&] { config::prepare(config::parse_config(j, "h.json")); });
  CHECK(e.key() == "schedule.ops[1]");
  CHECK_THAT(e.message(), StartsWith("column 5: bad op '0F7777"));
  CHECK(std::string(e.what()).size() < 400);
}

TEST_CASE("input_limits.route_ids_bounded_entries_routes", "[limits][routes]") {
  // op lists: route ids are bounded by the entries the routes list
  json j = {{"schedule",
             {{"kind", "custom"},
              {"ops", {"0F0,0B0"}},
              {"routes", {{{"stages", {0}}, {"microbatches", {999'999'999}}}}}}}};
  const auto mb = error_of([&] { config::parse_config(j, "r.json"); });
  CHECK(mb.key() == "schedule.routes[0].microbatches");
  CHECK_THAT(mb.message(), Contains("microbatch 999999999 is out of range"));
  j["schedule"]["routes"] = {{{"stages", {999'999'999}}, {"microbatches", {0}}}};
  const auto st = error_of([&] { config::parse_config(j, "r.json"); });
  CHECK(st.key() == "schedule.routes[0].stages");
  CHECK_THAT(st.message(), Contains("stage 999999999 is out of range"));
}

TEST_CASE("input_limits.ppsim_check_reports_last_stage", "[limits][cli]") {
  // limits: ppsim check reports a last-stage send as bad_comm (exit 1) and bad input as exit 2
  // naming the flag
  TempDir dir;
  const std::string cfg =
      dir.write("last.json",
                R"({"schedule": {"kind": "custom", "ops": ["0F0,0SEND_F0,0RECV_B0,0B0",
          "1RECV_F0,1F0,1SEND_F0,1B0,1SEND_B0"]}})");
  auto run = [&](const std::string& args, std::string& out) {
    const std::string cmd = std::string(PPSIM_BINARY) + " " + args + " 2>&1";
    FILE* pipe = ::popen(cmd.c_str(), "r");
    REQUIRE(pipe);
    char buf[4096];
    out.clear();
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
    const int status = ::pclose(pipe);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  std::string out;
  CHECK(run("check " + cfg, out) == 1);
  CHECK_THAT(out, Contains("bad_comm"));
  const std::string ok = dir.write("ok.json", minimal().dump());
  CHECK(run("check " + ok + " --set schedule.ranks=-1", out) == 2);
  CHECK_THAT(out, Contains("--set schedule.ranks=-1: key 'schedule.ranks'"));
  CHECK(run("check /dev/zero", out) == 2);
  CHECK_THAT(out, Contains("/dev/zero: larger than 16 MiB"));
  // A directory is walked (docs/CLI.md); one with nothing to check is bad input.
  std::filesystem::create_directory(dir.path("empty"));
  CHECK(run("check " + dir.path("empty"), out) == 2);
  CHECK_THAT(out, Contains("no *.json or *.csv file in this directory or below it"));
}
