// The importer's bounds on hostile input (docs/PROFILES.md): --map patterns matched by RE2 (no
// backtracking: no signal, time linear in the name), trace readers that hold at most one event and
// refuse what expands past their limits as it arrives, launch matching at O(log n) a range, and
// traces of different runs or with a rank missing refused naming the file.
#include <fmt/format.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "action_patterns.hpp"
#include "ppsim/profile/kineto.hpp"
#include "transfers.hpp"

using namespace ppsim;
using nlohmann::json;

namespace profile_limits {

std::filesystem::path scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "ppsim-profile-limits";
  std::filesystem::create_directories(dir);
  return dir / name;
}

void write_gz(const std::filesystem::path& path, const std::vector<std::string>& parts) {
  gzFile gz = gzopen(path.string().c_str(), "wb9");
  REQUIRE(gz);
  for (const auto& p : parts)
    REQUIRE(gzwrite(gz, p.data(), static_cast<unsigned>(p.size())) == static_cast<int>(p.size()));
  REQUIRE(gzclose(gz) == Z_OK);
}

std::vector<profile::ActionPattern> map_patterns(const std::string& map_text) {
  const auto path = scratch("map.json");
  std::ofstream(path) << map_text;
  return profile::read_map(path.string());
}

// One rank's trace of F0 and B0 on its own stage, with distributedInfo as given (-1: left out).
profile::RankTrace rank_trace(int rank, int world, const std::string& file, double off = 0) {
  json info = json::object();
  if (rank >= 0) info["rank"] = rank;
  if (world >= 0) info["world_size"] = world;
  const int s = rank >= 0 ? rank : 0;
  json doc = {
      {"traceEvents",
       {{{"ph", "X"}, {"name", fmt::format("PP:{}F0", s)}, {"ts", off + 10 * s}, {"dur", 5}},
        {{"ph", "X"},
         {"name", fmt::format("PP:{}B0", s)},
         {"ts", off + 100 - 10 * s},
         {"dur", 5}}}}};
  if (!info.empty()) doc["distributedInfo"] = info;
  return profile::parse_trace(doc.dump(), file, profile::default_patterns());
}

// The span of the launches in [ts, ts + dur] on `tid`, by looking at every launch (the
// definition Launched answers in O(log n)).
std::optional<std::pair<double, double>> brute_span(const profile::RankTrace& t, double ts,
                                                    double dur, std::int64_t tid) {
  std::optional<std::pair<double, double>> out;
  for (const auto& l : t.launches) {
    if (l.ts < ts || l.ts > ts + dur || (tid >= 0 && l.tid >= 0 && l.tid != tid)) continue;
    for (const auto& d : t.device) {
      if (d.correlation != l.correlation) continue;
      const std::pair<double, double> s{d.ts, d.ts + d.dur};
      out = out ? std::pair{std::min(out->first, s.first), std::max(out->second, s.second)} : s;
    }
  }
  return out;
}

}  // namespace profile_limits

using namespace profile_limits;

// Map patterns match in linear time, never with a signal
TEST_CASE("profile_limits.map_patterns_linear_time", "[profile]") {
  // A pattern a backtracking engine takes 2^n steps on: RE2 answers a 200-letter name at once.
  auto p =
      map_patterns(R"J({"actions": [{"pattern": "(a+)+b(\\d)", "kind": "F", "microbatch": 2}]})J");
  REQUIRE(p.size() == 1);
  std::vector<std::string_view> groups;
  CHECK_FALSE(profile::detail::matches(p[0], std::string(200, 'a')));
  REQUIRE(profile::detail::match_groups(p[0], "aaaab7", groups));
  CHECK(groups[2] == "7");
  // A 50 KB name against `(.*)`: a recursive engine overflows its stack; here it is never an
  // action (over kMaxActionNameBytes), while a 4000-byte one still is.
  p = map_patterns(
      R"J({"actions": [{"pattern": "fwd-(\\d+)-(.*)", "kind": "F", "microbatch": 1}]})J");
  const std::string huge = "fwd-1-" + std::string(50'000, 'x');
  const std::string long_ok = "fwd-1-" + std::string(4000, 'x');
  CHECK_FALSE(profile::detail::matches(p[0], huge));
  CHECK(profile::detail::matches(p[0], long_ok));
  const json doc = {{"traceEvents",
                     {{{"ph", "X"}, {"name", huge}, {"ts", 1}, {"dur", 1}},
                      {{"ph", "X"}, {"name", long_ok}, {"ts", 2}, {"dur", 1}}}}};
  const auto t = profile::parse_trace(doc.dump(), "t.json", p);
  REQUIRE(t.ranges.size() == 1);
  CHECK(t.ranges[0].name == long_ok);
  // 20,000 nested parentheses, a backreference RE2 does not have, too many patterns: exit 2
  // material naming the key.
  const std::string nested = std::string(20'000, '(') + "a" + std::string(20'000, ')');
  REQUIRE_THROWS_WITH(
      map_patterns(
          json{{"actions", {{{"pattern", nested}, {"kind", "F"}, {"microbatch", 1}}}}}.dump()),
      Catch::Contains("map.json") && Catch::Contains("actions[0].pattern") &&
          Catch::Contains("at most 1000"));
  REQUIRE_THROWS_WITH(
      map_patterns(R"J({"actions": [{"pattern": "(a)\\1", "kind": "F", "microbatch": 1}]})J"),
      Catch::Contains("actions[0].pattern") && Catch::Contains("RE2"));
  json many = {{"actions", json::array()}};
  for (std::size_t i = 0; i <= profile::kMaxPatterns; ++i)
    many["actions"].push_back({{"pattern", "x(\\d)"}, {"kind", "F"}, {"microbatch", 1}});
  REQUIRE_THROWS_WITH(map_patterns(many.dump()), Catch::Contains("key 'actions'"));
  // Deep nesting within the length bound: compiled or refused, never a crash.
  const std::string deep = std::string(499, '(') + "a" + std::string(499, ')');
  try {
    map_patterns(json{{"actions", {{{"pattern", deep}, {"kind", "F"}, {"microbatch", 1}}}}}.dump());
  } catch (const profile::ProfileError& e) {
    CHECK_THAT(e.what(), Catch::Contains("actions[0]"));
  }
}

// Trace readers hold one event at a time and refuse what expands too far
TEST_CASE("profile_limits.readers_bounded_memory", "[profile]") {
  const auto patterns = profile::default_patterns();
  profile::ReadStats stats;
  // 200,000 "" in traceEvents (the DOM would hold them all): refused at the first.
  std::string empties = R"({"traceEvents": [)";
  for (int i = 0; i < 200'000; ++i) empties += i ? ",\"\"" : "\"\"";
  empties += "]}";
  REQUIRE_THROWS_WITH(profile::parse_trace(empties, "e.json", patterns, {}, &stats),
                      Catch::Contains("e.json: traceEvents[0]: expected an event object"));
  CHECK(stats.bytes_read < 64);
  // Elsewhere in the file they are skipped unbuilt: nothing held but the one event.
  std::string other =
      R"({"other": [)" + empties.substr(17, empties.size() - 19) + R"(], "traceEvents": [
      {"ph": "X", "name": "PP:0F0", "ts": 1, "dur": 2, "args": {"junk": [1, 2, 3, 4, 5]}}]})";
  const auto ok = profile::parse_trace(other, "o.json", patterns, {}, &stats);
  CHECK(ok.ranges.size() == 1);
  CHECK(stats.peak_values <= 5);
  CHECK(stats.bytes_read == other.size());
  // One event of too many values, or with a string over the bound.
  json ranks = json::array();
  for (int i = 0; i < 5000; ++i) ranks.push_back(i);
  const json big = {{"traceEvents",
                     {{{"ph", "X"},
                       {"name", "record_param_comms"},
                       {"args", {{"Process Group Ranks", ranks}}}}}}};
  profile::ReadLimits small;
  small.max_event_values = 1000;
  REQUIRE_THROWS_WITH(profile::parse_trace(big.dump(), "b.json", patterns, small, &stats),
                      Catch::Contains("b.json: traceEvents[0]: an event of over 1000 values"));
  CHECK(stats.peak_values <= 1000);
  small.max_string = 100;
  REQUIRE_THROWS_WITH(
      profile::parse_trace(json{{"traceEvents", {{{"name", std::string(200, 'k')}}}}}.dump(),
                           "s.json", patterns, small),
      Catch::Contains("s.json: traceEvents[0]: a string of 200 bytes"));

  // A gzip of 4 MiB of whitespace: refused once 1 MiB of it is read (max_gap), not at the end.
  const auto ws = scratch("ws.json.gz");
  write_gz(ws, {R"({"traceEvents": [)", std::string(4 << 20, ' '), "]}"});
  profile::ReadLimits gap;
  gap.max_gap = 1 << 20;
  REQUIRE_THROWS_WITH(profile::read_trace(ws.string(), patterns, gap, &stats),
                      Catch::Contains("ws.json.gz") && Catch::Contains("whitespace"));
  CHECK(stats.bytes_read <= (1 << 20) + (1 << 16) + 64);
  // Whitespace spread between events passes that rule; the compression ratio refuses it as soon
  // as ratio_grace bytes are read.
  const auto spread = scratch("spread.json.gz");
  std::vector<std::string> parts = {R"({"traceEvents": [{})"};
  for (int i = 0; i < 16; ++i) parts.insert(parts.end(), {",", std::string(1 << 19, ' '), "{}"});
  parts.push_back("]}");
  write_gz(spread, parts);
  profile::ReadLimits ratio = gap;
  ratio.ratio_grace = 1 << 20;
  ratio.max_ratio = 100;
  REQUIRE_THROWS_WITH(
      profile::read_trace(spread.string(), patterns, ratio, &stats),
      Catch::Contains("spread.json.gz") && Catch::Contains("times its compressed size"));
  CHECK(stats.bytes_read <= (1 << 20) + (1 << 16));
  CHECK(profile::read_trace(spread.string(), patterns, gap).events == 17);  // else it is read
  // The uncompressed cap, checked before the bytes are taken.
  profile::ReadLimits cap;
  cap.max_bytes = 1 << 20;
  REQUIRE_THROWS_WITH(profile::read_trace(spread.string(), patterns, cap, &stats),
                      Catch::Contains("over 1048576 bytes uncompressed"));
  CHECK(stats.bytes_read <= cap.max_bytes);
  // A gzip cut short by its CRC trailer, and a directory.
  const auto whole = scratch("whole.json.gz");
  write_gz(whole, {R"({"traceEvents": [{"ph": "X", "name": "PP:0F0", "ts": 1, "dur": 2}]})"});
  CHECK(profile::read_trace(whole.string(), patterns).ranges.size() == 1);
  std::filesystem::resize_file(whole, std::filesystem::file_size(whole) - 8);
  REQUIRE_THROWS_WITH(profile::read_trace(whole.string(), patterns),
                      Catch::Contains("whole.json.gz") && Catch::Contains("truncated gzip"));
  REQUIRE_THROWS_WITH(profile::read_trace(scratch("").string(), patterns),
                      Catch::Contains("is a directory"));
  std::filesystem::remove_all(scratch(""));
}

// Launch matching takes O(log n) a range
TEST_CASE("profile_limits.launch_matching_log_n", "[profile]") {
  // Every range overlaps every launch (the quadratic case): the work per range stays logarithmic.
  profile::RankTrace t;
  constexpr int kLaunches = 20'000, kRanges = 2'000;
  for (int i = 0; i < kLaunches; ++i) {
    t.launches.push_back({static_cast<double>(i), i, i % 3 == 0 ? -1 : 1 + i % 2});
    t.device.push_back({1000.0 + i, 0.5, i});
  }
  const profile::detail::Launched launched(t);
  double last_end = 0;  // thread 1's launches and those that say no thread
  for (const auto& l : t.launches)
    if (l.tid != 2) last_end = 1000.0 + static_cast<double>(l.correlation) + 0.5;
  for (int q = 0; q < kRanges; ++q) {
    const auto s = launched.span(q % 7, kLaunches, 1);
    REQUIRE(s);
    int first = q % 7;  // the first launch from there that is thread 1's or says none
    while (t.launches[static_cast<std::size_t>(first)].tid == 2) ++first;
    CHECK(s->first == 1000.0 + first);
    CHECK(s->second == last_end);
  }
  const auto log_n = static_cast<std::size_t>(std::ceil(std::log2(kLaunches)));
  CHECK(launched.visits() <= std::size_t{kRanges} * 2 * (2 * log_n + 2));

  // The same answers as looking at every launch: threads, launches that say none, correlation ids
  // with no activity or several.
  std::mt19937 rng(52);
  for (int round = 0; round < 20; ++round) {
    profile::RankTrace r;
    std::uniform_int_distribution<int> tid(-1, 2), ts(0, 200), dur(0, 40);
    for (int i = 0; i < 150; ++i) r.launches.push_back({double(ts(rng)), i, tid(rng)});
    for (int i = 0; i < 200; ++i) r.device.push_back({double(ts(rng)), double(dur(rng)), i % 170});
    const profile::detail::Launched l(r);
    for (int q = 0; q < 100; ++q) {
      const double a = ts(rng), d = dur(rng);
      const int k = tid(rng) == 2 ? 3 : tid(rng);
      CAPTURE(round, a, d, k);
      REQUIRE(l.span(a, d, k) == brute_span(r, a, d, k));
    }
  }
}

// Traces of different runs, or with a rank missing, are refused
TEST_CASE("profile_limits.mixed_runs_and_missing_ranks_refused", "[profile]") {
  // One run of 2: imported.
  CHECK(profile::import_traces({rank_trace(1, 2, "r1.json"), rank_trace(0, 2, "r0.json")}, {})
            .measured.program->ranks() == 2);
  // Three traces of a run of 4: the missing rank named.
  REQUIRE_THROWS_WITH(
      profile::import_traces(
          {rank_trace(0, 4, "r0.json"), rank_trace(1, 4, "r1.json"), rank_trace(2, 4, "r2.json")},
          {}),
      Catch::Contains("world_size is 4") && Catch::Contains("rank 3 has no trace"));
  // A directory written at P = 4 and then P = 2: world sizes differ, the file named.
  REQUIRE_THROWS_WITH(
      profile::import_traces({rank_trace(0, 2, "new0.json"), rank_trace(1, 2, "new1.json"),
                              rank_trace(2, 4, "old2.json"), rank_trace(3, 4, "old3.json")},
                             {}),
      Catch::Contains("old2.json: distributedInfo.world_size 4") &&
          Catch::Contains("new0.json has 2"));
  // Ranks that are not 0 to P-1, a rank twice (both files named), ranks given by some only.
  REQUIRE_THROWS_WITH(
      profile::import_traces(
          {rank_trace(0, -1, "a.json"), rank_trace(1, -1, "b.json"), rank_trace(3, -1, "d.json")},
          {}),
      Catch::Contains("d.json: distributedInfo.rank 3") && Catch::Contains("ranks 0 to 2"));
  REQUIRE_THROWS_WITH(
      profile::import_traces({rank_trace(0, -1, "a.json"), rank_trace(0, -1, "b.json")}, {}),
      Catch::Contains("b.json: distributedInfo.rank 0 is given by two traces (also a.json)"));
  REQUIRE_THROWS_WITH(
      profile::import_traces({rank_trace(0, -1, "a.json"), rank_trace(-1, -1, "x.json")}, {}),
      Catch::Contains("x.json: no distributedInfo.rank"));
  REQUIRE_THROWS_WITH(profile::parse_trace(R"({"traceEvents": [], "distributedInfo":
                                               {"rank": 0, "world_size": 0}})",
                                           "w.json", profile::default_patterns()),
                      Catch::Contains("w.json: key 'distributedInfo.world_size'"));
}
