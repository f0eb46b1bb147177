// Streamed traces (viz/trace_stream.hpp): the Perfetto protobuf form decodes, with a protobuf
// reader written here from the wire format, to the same tracks and events as the JSON form; the
// gzip form inflates to exactly the JSON bytes; counters carry only changes; a trace streamed
// during the run equals the one written from the recorded run, for the bundled configs too.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "gunzip.hpp"
#include "helpers.hpp"
#include "paths.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/record/observer.hpp"
#include "ppsim/sim/analysis.hpp"
#include "ppsim/viz/chrome_trace.hpp"
#include "ppsim/viz/trace_stream.hpp"

namespace {

using namespace ppsim;
using nlohmann::json;

// ---- a minimal protobuf reader ----------------------------------------------------------------

struct Field {
  int number = 0;
  int wire = 0;
  std::uint64_t value = 0;  // varint or fixed64
  std::string_view bytes;   // length-delimited
};

// The fields of one message, in order; fails the test on malformed input.
std::vector<Field> fields(std::string_view m) {
  std::vector<Field> out;
  std::size_t i = 0;
  auto varint = [&] {
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      REQUIRE(i < m.size());
      REQUIRE(shift < 64);
      const auto b = static_cast<unsigned char>(m[i++]);
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
  };
  while (i < m.size()) {
    const std::uint64_t key = varint();
    Field f;
    f.number = static_cast<int>(key >> 3);
    f.wire = static_cast<int>(key & 7);
    REQUIRE(f.number > 0);
    switch (f.wire) {
      case 0:
        f.value = varint();
        break;
      case 1:
        REQUIRE(i + 8 <= m.size());
        for (int k = 0; k < 8; ++k)
          f.value |= static_cast<std::uint64_t>(static_cast<unsigned char>(m[i + k])) << (8 * k);
        i += 8;
        break;
      case 2: {
        const std::uint64_t n = varint();
        REQUIRE(n <= m.size() - i);
        f.bytes = m.substr(i, n);
        i += n;
        break;
      }
      default:
        FAIL("unexpected wire type " << f.wire);
    }
    out.push_back(f);
  }
  return out;
}

// ---- a Perfetto trace, read back into the JSON form's terms ----------------------------------

struct Track {
  std::string name;
  std::uint64_t parent = 0;
  bool is_process = false, is_counter = false;
  int pid = 0;
};

// One decoded event as a JSON object shaped like the JSON form's (times in ns).
struct Decoded {
  std::map<std::uint64_t, Track> tracks;
  std::vector<json> slices, instants, counters;
  std::multiset<std::pair<std::string, std::string>> flows;  // (send track, receive track)
  std::size_t packets = 0;
};

std::string strip_lane(const std::string& name) {
  // Overflow tracks are "NAME (k)".
  const auto p = name.rfind(" (");
  return p != std::string::npos && name.back() == ')' ? name.substr(0, p) : name;
}

Decoded decode(const std::string& file) {
  Decoded d;
  std::map<std::uint64_t, std::string> categories, annotation_names;
  struct Open {
    json event;
    std::uint64_t begin;
  };
  std::map<std::uint64_t, std::vector<Open>> open;  // per track: BEGINs not yet ended
  std::map<std::uint64_t, std::string> flow_src, flow_dst;
  for (const auto& top : fields(file)) {
    REQUIRE(top.number == 1);  // Trace.packet
    ++d.packets;
    std::uint64_t ts = 0;
    std::string_view event, descriptor, interned;
    for (const auto& f : fields(top.bytes)) {
      if (f.number == 8) ts = f.value;
      if (f.number == 10) CHECK(f.value == 1);
      if (f.number == 11) event = f.bytes;
      if (f.number == 60) descriptor = f.bytes;
      if (f.number == 12) interned = f.bytes;
    }
    for (const auto& f : fields(interned)) {
      std::uint64_t iid = 0;
      std::string name;
      for (const auto& g : fields(f.bytes)) {
        if (g.number == 1) iid = g.value;
        if (g.number == 2) name = g.bytes;
      }
      (f.number == 1 ? categories : annotation_names)[iid] = name;
    }
    if (!descriptor.empty()) {
      Track t;
      std::uint64_t uuid = 0;
      for (const auto& f : fields(descriptor)) {
        if (f.number == 1) uuid = f.value;
        if (f.number == 2) t.name = f.bytes;
        if (f.number == 5) t.parent = f.value;
        if (f.number == 8) t.is_counter = true;
        if (f.number == 3) {
          t.is_process = true;
          for (const auto& g : fields(f.bytes)) {
            if (g.number == 1) t.pid = static_cast<int>(g.value);
            if (g.number == 6) t.name = g.bytes;
          }
        }
      }
      REQUIRE(uuid != 0);
      REQUIRE(d.tracks.count(uuid) == 0);
      d.tracks[uuid] = t;
    }
    if (event.empty()) continue;
    std::uint64_t type = 0, track = 0;
    json e = json::object(), args = json::object();
    std::vector<std::uint64_t> out_flows, in_flows;
    std::int64_t counter = 0;
    for (const auto& f : fields(event)) {
      if (f.number == 9) type = f.value;
      if (f.number == 11) track = f.value;
      if (f.number == 3) e["cat"] = categories.at(f.value);
      if (f.number == 23) e["name"] = std::string(f.bytes);
      if (f.number == 30) counter = static_cast<std::int64_t>(f.value);
      if (f.number == 47) out_flows.push_back(f.value);
      if (f.number == 48) in_flows.push_back(f.value);
      if (f.number == 4) {
        std::string key;
        json value;
        for (const auto& g : fields(f.bytes)) {
          if (g.number == 1) key = annotation_names.at(g.value);
          if (g.number == 2) value = g.value != 0;
          if (g.number == 4) value = static_cast<std::int64_t>(g.value);
          if (g.number == 6) value = std::string(g.bytes);
          if (g.number == 9) value = json::parse(g.bytes);
        }
        args[key] = value;
      }
    }
    REQUIRE(d.tracks.count(track) == 1);  // described before its first event
    const Track& t = d.tracks.at(track);
    const Track& process = t.is_process ? t : d.tracks.at(t.parent);
    e["process"] = process.name;
    e["pid"] = process.pid - 1;
    if (!t.is_process) e["thread"] = strip_lane(t.name);
    if (!args.empty()) e["args"] = args;
    if (type == 1) {
      e["ts"] = ts;
      for (auto id : out_flows) flow_src[id] = strip_lane(t.name);
      for (auto id : in_flows) flow_dst[id] = strip_lane(t.name);
      open[track].push_back({e, ts});
    } else if (type == 2) {
      REQUIRE_FALSE(open[track].empty());
      Open o = open[track].back();
      open[track].pop_back();
      REQUIRE(ts >= o.begin);
      o.event["dur"] = ts - o.begin;
      d.slices.push_back(o.event);
    } else if (type == 3) {
      e["ts"] = ts;
      d.instants.push_back(e);
    } else {
      REQUIRE(type == 4);
      REQUIRE(t.is_counter);
      e["name"] = t.name;
      e["ts"] = ts;
      e["value"] = counter;
      e.erase("thread");
      d.counters.push_back(e);
    }
  }
  for (const auto& [track, stack] : open) CHECK(stack.empty());
  CHECK(flow_src.size() == flow_dst.size());
  for (const auto& [id, src] : flow_src) d.flows.insert({src, flow_dst.at(id)});
  return d;
}

// The JSON form's events in the decoder's terms: process and thread by name, times in ns.
Decoded from_json(const json& doc) {
  Decoded d;
  std::map<int, std::string> processes;
  std::map<std::pair<int, int>, std::string> threads;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") != "M") continue;
    if (e.at("name") == "process_name") processes[e.at("pid")] = e.at("args").at("name");
    if (e.at("name") == "thread_name")
      threads[{e.at("pid"), e.at("tid")}] = e.at("args").at("name");
  }
  auto ns = [](const json& us) {
    return static_cast<std::uint64_t>(std::nearbyint(us.get<double>() * 1000.0));
  };
  std::map<std::uint64_t, std::string> flow_src, flow_dst;
  for (const auto& e : doc.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "M") continue;
    const int pid = e.at("pid");
    json o = {{"process", processes.at(pid)}, {"pid", pid}};
    if (ph == "s" || ph == "f") {
      (ph == "s" ? flow_src : flow_dst)[e.at("id")] = threads.at({pid, e.at("tid")});
      continue;
    }
    o["ts"] = ns(e.at("ts"));
    if (ph == "C") {
      o["name"] = e.at("name");
      o["value"] = e.at("args").begin().value();
      d.counters.push_back(o);
      continue;
    }
    o["name"] = e.at("name");
    o["cat"] = e.at("cat");
    if (!e.at("args").empty()) o["args"] = e.at("args");
    if (ph == "X") {
      o["thread"] = threads.at({pid, e.at("tid")});
      // The protobuf form has the end's time, rounded; its duration is end - start.
      o["dur"] = ns(json(e.at("ts").get<double>() + e.at("dur").get<double>())) -
                 o["ts"].get<std::uint64_t>();
      d.slices.push_back(o);
    } else {
      REQUIRE(ph == "i");
      if (e.at("s") == "t") o["thread"] = threads.at({pid, e.at("tid")});
      d.instants.push_back(o);
    }
  }
  for (const auto& [id, src] : flow_src) d.flows.insert({src, flow_dst.at(id)});
  return d;
}

std::multiset<std::string> as_set(const std::vector<json>& v) {
  std::multiset<std::string> out;
  for (const auto& e : v) out.insert(e.dump());
  return out;
}

void check_same(const Decoded& pb, const Decoded& js) {
  CHECK(as_set(pb.slices) == as_set(js.slices));
  CHECK(as_set(pb.instants) == as_set(js.instants));
  CHECK(as_set(pb.counters) == as_set(js.counters));
  CHECK(pb.flows == js.flows);
}

std::string written(const record::RunRecord& rec, const viz::TraceFormat& format) {
  std::ostringstream out;
  viz::write_chrome_trace(out, rec, {1000.0, ""}, format);
  return out.str();
}

// The run streamed into `format` while it ran (as `ppsim run --trace` alone does), and the same
// run recorded.
struct Streamed {
  record::RunRecord rec;  // with the recorded trace
  std::string text;
};
Streamed streamed(const config::Config& config, const viz::TraceFormat& format) {
  const config::Prepared prepared = config::prepare(config);
  std::ostringstream out;
  viz::TraceStream stream(out, format);
  stream.begin_run(*prepared.program,
                   {config::microseconds_per_unit(config.time_unit), config.name});
  Streamed s{sim::analyze(prepared, {.trace = true, .observer = &stream}), {}};
  stream.finish(s.rec);
  s.text = out.str();
  return s;
}

config::Config bench_like(const std::string& kind, int P, int M, int V, const std::string& style) {
  json j = {
      {"name", "stream test"},
      {"schedule", {{"kind", kind}, {"ranks", P}, {"microbatches", M}, {"chunks", V}}},
      {"costs", {{"forward", 1.0}, {"backward", 2.0}, {"per_stage", {{"1", {{"forward", 1.5}}}}}}},
      {"comm", {{"style", style}, {"latency", 0.01}, {"boundary_bytes", 1 << 20}}},
      {"memory", {{"activation_bytes", 256 << 20}}}};
  return config::parse_config(j, "stream-test.json");
}

}  // namespace

TEST_CASE("trace_stream.trace_format_file_name", "[trace]") {
  // trace format from the file name
  CHECK(viz::trace_format_for("a.json").name == "json");
  CHECK(viz::trace_format_for("/dev/stdout").name == "json");
  CHECK(viz::trace_format_for("a.json.gz").name == "json.gz");
  CHECK(viz::trace_format_for("a.pftrace").name == "pftrace");
  CHECK(viz::trace_format_for("a.perfetto-trace").name == "pftrace");
  CHECK(viz::trace_format_for("a.JSON.GZ").name == "json");  // suffixes match case
}

TEST_CASE("trace_stream.trace_formats_registered", "[trace]") {
  // the registry: each format by name and alias, unknown names listed, the longest suffix wins
  auto& registry = viz::TraceFormatRegistry::instance();
  CHECK(registry.names() == std::vector<std::string>{"json", "json.gz", "pftrace"});
  CHECK(viz::trace_format("Perfetto").name == "pftrace");
  CHECK(viz::trace_format("gzip").name == "json.gz");
  CHECK_THROWS_WITH(viz::trace_format("xml"),
                    "unknown trace format 'xml' (known: json, json.gz, pftrace)");
  CHECK(viz::trace_formats_help() ==
        "FILE.json (Chrome JSON), FILE.json.gz (gzipped), FILE.pftrace (Perfetto protobuf)");
  for (const auto& f : registry.all()) {
    INFO(f.name);
    CHECK(f.sink != nullptr);
    CHECK(f.encoder != nullptr);
    for (const auto& suffix : f.suffixes) CHECK(&viz::trace_format_for("run" + suffix) == &f);
  }
  // Formats added to a registry are picked by their suffixes, the longest that matches first.
  viz::TraceFormatRegistry local = registry;
  const auto& js = viz::trace_format("json");
  local.add({"zz", {}, {".zz"}, "", js.sink, js.encoder});
  local.add({"json.zz", {}, {".json.zz"}, "", js.sink, js.encoder});
  CHECK(viz::trace_format_for("a.json.zz", local).name == "json.zz");
  CHECK(viz::trace_format_for("a.zz", local).name == "zz");
  CHECK(viz::trace_format_for("a.json.gz", local).name == "json.gz");
  CHECK(viz::trace_format_for("a.txt", local).name == "json");
  CHECK(viz::trace_format_for("a.json.zz").name == "json");  // not in the process's registry
}

TEST_CASE("trace_stream.perfetto_trace_decodes_json_trace", "[trace]") {
  // the Perfetto trace decodes to the JSON trace's tracks and events
  const auto [kind, P, M, V, style] = GENERATE(
      table<std::string, int, int, int, std::string>({{"1f1b", 4, 8, 1, "async"},
                                                      {"interleaved-1f1b", 4, 8, 2, "async"},
                                                      {"gpipe", 3, 6, 1, "async-send"},
                                                      {"gpipe", 3, 5, 1, "batched"}}));
  INFO(kind << " " << style);
  const record::RunRecord rec = sim::analyze(bench_like(kind, P, M, V, style), {.trace = true});
  REQUIRE(rec.ok());
  const Decoded js = from_json(json::parse(written(rec, viz::trace_format("json"))));
  const Decoded pb = decode(written(rec, viz::trace_format("pftrace")));
  check_same(pb, js);
  // Not vacuous: every compute op is a slice, every transfer an arrow.
  std::size_t compute = 0;
  for (const auto& s : rec.trace->spans) compute += s.kind == record::SpanKind::compute;
  std::size_t pb_compute = 0;
  for (const auto& s : pb.slices) pb_compute += s.at("cat") == "compute";
  CHECK(pb_compute == compute);
  CHECK(pb.flows.size() == rec.trace->transfers.size());
  CHECK(pb.instants.size() >= 1);  // the run's metadata
  // One process per rank, pid + 1 (0 is Perfetto's idle process).
  std::set<int> pids;
  for (const auto& [uuid, t] : pb.tracks)
    if (t.is_process) pids.insert(t.pid);
  CHECK(pids.size() == static_cast<std::size_t>(P));
  CHECK(*pids.begin() == 1);
}

TEST_CASE("trace_stream.deadlocked_run_s_perfetto_trace", "[trace]") {
  // a deadlocked run's Perfetto trace has the JSON trace's blocked-for-good instants
  const config::Config config =
      config::load_config(std::string(PPSIM_SOURCE_DIR) + "/configs/1f1b-blocking-deadlock.json");
  const record::RunRecord rec = sim::analyze(config, {.trace = true});
  REQUIRE(rec.deadlock);
  const Decoded pb = decode(written(rec, viz::trace_format("pftrace")));
  check_same(pb, from_json(json::parse(written(rec, viz::trace_format("json")))));
  std::size_t stuck = 0;
  for (const auto& e : pb.instants) stuck += e.at("cat") == "deadlock";
  CHECK(stuck == 4);
}

TEST_CASE("trace_stream.slices_overlap_track_go_extra", "[trace]") {
  // slices that overlap on one track go to extra tracks, each properly nested
  const schedules::Program p = test::lowered("1f1b", 2, 2);
  std::ostringstream out;
  {
    viz::TraceStream s(out, viz::trace_format("pftrace"));
    s.begin_run(p, {1000.0, "overlap"});
    s.on_begin(2, false);
    s.on_compute(0, 0, 0.0, 2.0);
    s.on_compute(0, 1, 1.0, 3.0);  // overlaps the first: a second track
    s.on_compute(0, 2, 2.0, 4.0);  // fits after the first on the first track
    s.on_compute(0, 3, 2.5, 2.5);  // inside both busy tracks: a third
    s.end_run(nullptr);
    s.close("");
  }
  const Decoded d = decode(out.str());
  std::map<std::string, int> per_track;
  for (const auto& [uuid, t] : d.tracks) per_track[t.name] += 0;
  CHECK(per_track.count("compute") == 1);
  CHECK(per_track.count("compute (2)") == 1);
  CHECK(per_track.count("compute (3)") == 1);
  CHECK(per_track.count("compute (4)") == 0);
  REQUIRE(d.slices.size() == 4);  // every BEGIN met its END on its own track (decode checks)
}

TEST_CASE("trace_stream.gzip_trace_inflates_exactly_json", "[trace]") {
  // the gzip trace inflates to exactly the JSON trace
  const std::string path = GENERATE(as<std::string>{}, "1f1b.json", "interleaved-1f1b.json",
                                    "1f1b-blocking-deadlock.json");
  INFO(path);
  const record::RunRecord rec = sim::analyze(
      config::load_config(std::string(PPSIM_SOURCE_DIR) + "/configs/" + path), {.trace = true});
  const std::string plain = written(rec, viz::trace_format("json"));
  const std::string gz = written(rec, viz::trace_format("json.gz"));
  CHECK(gz.size() < plain.size() / 4);
  CHECK(test::gunzip(gz) == plain);
  CHECK(written(rec, viz::trace_format("json.gz")) == gz);  // deterministic bytes
}

TEST_CASE("trace_stream.counters_written_only_when_their", "[trace]") {
  // counters are written only when their value changes
  const config::Config config = bench_like("1f1b", 4, 8, 1, "async");
  const record::RunRecord rec = sim::analyze(config, {.trace = true});
  const json doc = json::parse(written(rec, viz::trace_format("json")));
  // Expected: per rank and counter, the recorded samples without those that repeat the last.
  std::map<std::pair<int, std::string>, std::vector<std::pair<double, std::int64_t>>> want, got;
  for (const auto& c : rec.trace->counters) {
    auto& m = want[{c.rank, "memory"}];
    if (m.empty() || m.back().second != c.memory_bytes)
      m.push_back({c.time * 1000.0, c.memory_bytes});
    auto& f = want[{c.rank, "inflight"}];
    if (f.empty() || f.back().second != c.inflight) f.push_back({c.time * 1000.0, c.inflight});
  }
  std::size_t repeats_in_record = 0;
  for (std::size_t i = 1; i < rec.trace->counters.size(); ++i)
    repeats_in_record += rec.trace->counters[i].rank == rec.trace->counters[i - 1].rank &&
                         rec.trace->counters[i].inflight == rec.trace->counters[i - 1].inflight;
  CHECK(repeats_in_record > 0);  // the record has samples a change-only writer drops
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") != "C") continue;
    got[{e.at("pid"), e.at("name")}].push_back(
        {e.at("ts").get<double>(), e.at("args").begin().value().get<std::int64_t>()});
  }
  REQUIRE(got.size() == want.size());
  for (const auto& [key, series] : want) {
    INFO("rank " << key.first << " " << key.second);
    const auto& g = got.at(key);
    REQUIRE(g.size() == series.size());
    for (std::size_t i = 0; i < g.size(); ++i) {
      CHECK(g[i].first == Approx(series[i].first));
      CHECK(g[i].second == series[i].second);
      if (i > 0) CHECK(g[i].second != g[i - 1].second);
    }
  }
}

// [threads]: with two cores or more the file's bytes go through the background writer thread.
TEST_CASE("trace_stream.trace_streamed_during_run_equals", "[trace][threads]") {
  // a trace streamed during the run equals the one written from the recorded run
  for (const auto& path : test::bundled_configs()) {
    INFO(path);
    const config::Config config = config::load_config(path);
    for (const auto* format : {&viz::trace_format("json"), &viz::trace_format("pftrace")}) {
      const Streamed s = streamed(config, *format);
      if (format->name == "json") {
        const Decoded a = from_json(json::parse(s.text));
        const Decoded b = from_json(json::parse(written(s.rec, *format)));
        check_same(a, b);
        CHECK(json::parse(s.text).at("otherData") ==
              json::parse(written(s.rec, *format)).at("otherData"));
      } else {
        check_same(decode(s.text), decode(written(s.rec, *format)));
      }
    }
  }
}

TEST_CASE("trace_stream.ppsim_run_trace_streams_format", "[trace][cli]") {
  // ppsim run --trace streams each format, the file matches the in-process writer
  const auto dir =
      std::filesystem::temp_directory_path() / ("ppsim-trace-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string cfg = std::string(PPSIM_SOURCE_DIR) + "/configs/interleaved-1f1b.json";
  const record::RunRecord rec = sim::analyze(config::load_config(cfg), {.trace = true});
  auto slurp = [](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  for (const std::string ext : {"json", "json.gz", "pftrace"}) {
    const auto file = dir / ("t." + ext);
    const std::string cmd =
        fmt::format("'{}' run '{}' --trace '{}' > /dev/null", PPSIM_BINARY, cfg, file.string());
    REQUIRE(std::system(cmd.c_str()) == 0);
    const std::string got = slurp(file);
    const std::string want = written(rec, viz::trace_format_for(file.string()));
    if (ext == "pftrace")
      check_same(decode(got), decode(want));
    else {
      const std::string text = ext == "json" ? got : test::gunzip(got);
      check_same(from_json(json::parse(text)),
                 from_json(json::parse(ext == "json" ? want : test::gunzip(want))));
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("trace_stream.rank_s_transfer_tracks_kept", "[trace]") {
  // a rank's transfer tracks are kept per peer, not per rank of the run
  // Track ids grow with the peer's rank number. Both writers once kept a table by track id on
  // every rank: 5 GiB for the JSON form and 23 GiB for the Perfetto form at 200,000 ranks, and
  // 22 GB of Perfetto tracks already at the 20,000 here.
  const int P = 20000;
  const config::Config config = bench_like("1f1b", P, 1, 1, "blocking");
  const config::Prepared prepared = config::prepare(config);
  for (const auto* format : {&viz::trace_format("pftrace"), &viz::trace_format("json")}) {
    std::ostringstream out;
    viz::TraceStream stream(out, *format);
    stream.begin_run(*prepared.program, {1000.0, config.name});
    const record::RunRecord rec = sim::analyze(prepared, {.observer = &stream});
    stream.finish(rec);
    const std::string text = out.str();
    // Every directed link between neighbours carries a message: one "send to" track on the
    // sender and one "recv from" track on the receiver, each named once.
    std::map<std::string, int> named;
    if (format->name == "pftrace") {
      for (const auto& packet : fields(text))  // only the track descriptors: decode() is slow
        for (const auto& f : fields(packet.bytes))
          if (f.number == 60)
            for (const auto& g : fields(f.bytes))
              if (g.number == 2) ++named[std::string(g.bytes.substr(0, 9))];
    } else {
      const json doc = json::parse(text);
      for (const auto& e : doc.at("traceEvents"))
        if (e.at("ph") == "M" && e.at("name") == "thread_name")
          ++named[e.at("args").at("name").get<std::string>().substr(0, 9)];
    }
    INFO((format->name == "json" ? "json" : "perfetto"));
    CHECK(named["send to r"] == 2 * (P - 1));
    CHECK(named["recv from"] == 2 * (P - 1));
    CHECK(named["compute"] == P);
    CHECK(named["comm ops"] == P);
  }
}
