// Chrome trace writer (viz/chrome_trace.hpp) on a simulated run: one process per rank, one compute
// slice per compute op, transfers on both ends joined by a flow arrow, memory and in-flight
// counters whose maxima are the run's peaks.
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "helpers.hpp"
#include "paths.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/real/executor.hpp"
#include "ppsim/record/observer.hpp"
#include "ppsim/record/run_record.hpp"
#include "ppsim/schedules/op.hpp"
#include "ppsim/sim/analysis.hpp"
#include "ppsim/viz/chrome_trace.hpp"

namespace {

using namespace ppsim;
using nlohmann::json;

constexpr std::int64_t kActivation = 1 << 20;
constexpr std::int64_t kStatic = 1 << 30;
constexpr std::int64_t kBoundary = 4096;

// P ranks, M microbatches; stage 1 has a slower forward so durations are not all alike.
config::Config make_config(const std::string& kind, int P, int M, int V,
                           const std::string& time_unit) {
  json j = {{"name", "trace \"test\" \\ run"},
            {"time_unit", time_unit},
            {"schedule", {{"kind", kind}, {"ranks", P}, {"microbatches", M}, {"chunks", V}}},
            {"costs",
             {{"forward", 1.0},
              {"backward_input", 1.25},
              {"backward_weight", 0.75},
              {"per_stage", {{"1", {{"forward", 1.5}}}}}}},
            {"comm", {{"style", "async"}, {"latency", 0.05}, {"boundary_bytes", kBoundary}}},
            {"memory", {{"activation_bytes", kActivation}, {"static_bytes", kStatic}}}};
  return config::parse_config(j, "trace-test.json");
}

struct TracedRun {
  config::Prepared prepared;  // the program and the model (resolved costs) it ran
  record::RunRecord analysis;
  record::Trace trace;
  json doc;
};

TracedRun traced(const config::Config& config) {
  TracedRun t{config::prepare(config), record::RunRecord{}, record::Trace{}, json{}};
  t.trace.time_unit = config.time_unit;
  record::TraceRecorder recorder(t.trace);
  t.analysis = sim::analyze(t.prepared, {.trace = false, .observer = &recorder});
  std::ostringstream out;
  REQUIRE(t.analysis.program);
  viz::write_chrome_trace(out, t.trace, *t.analysis.program,
                          {config::microseconds_per_unit(config.time_unit), config.name});
  t.doc = json::parse(out.str());  // throws (fails the test) if the writer emits invalid JSON
  return t;
}

std::vector<json> events(const json& doc, const std::string& ph, const std::string& cat = "") {
  std::vector<json> out;
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == ph && (cat.empty() || e.value("cat", "") == cat)) out.push_back(e);
  return out;
}

std::size_t compute_ops(const schedules::Program& program) {
  std::size_t n = 0;
  for (int r = 0; r < program.ranks(); ++r)
    for (const auto& op : program.ops(r)) n += schedules::is_compute(op.kind) ? 1 : 0;
  return n;
}

double op_cost(const model::StageCost& c, schedules::OpKind kind) {
  switch (kind) {
    case schedules::OpKind::F:
      return c.forward;
    case schedules::OpKind::B:
      return c.backward;
    case schedules::OpKind::I:
      return c.backward_input;
    default:
      return c.backward_weight;
  }
}

// The checks shared by every schedule: metadata, compute slices, transfers and flows, counters.
void check_trace(const TracedRun& t, std::size_t expected_transfers, int chunks_per_rank) {
  REQUIRE(t.analysis.program);
  const schedules::Program& program = *t.analysis.program;
  const auto& costs = t.prepared.model.costs;
  const int P = program.ranks();
  REQUIRE(t.analysis.ok());
  REQUIRE(t.analysis.metrics);
  const record::RunMetrics& result = *t.analysis.metrics;
  const double us = config::microseconds_per_unit(t.analysis.info.time_unit);

  REQUIRE(t.doc.is_object());
  REQUIRE(t.doc.contains("traceEvents"));
  REQUIRE(t.doc["traceEvents"].is_array());
  CHECK(t.doc["otherData"]["ranks"] == P);
  CHECK(t.doc["otherData"]["title"] == t.analysis.info.name);

  // One process_name per rank, "rank r".
  std::map<int, std::string> process_names;
  int process_name_count = 0;
  for (const auto& e : events(t.doc, "M")) {
    if (e["name"] != "process_name") continue;
    ++process_name_count;
    process_names[e["pid"].get<int>()] = e["args"]["name"].get<std::string>();
  }
  CHECK(process_name_count == P);
  REQUIRE(static_cast<int>(process_names.size()) == P);
  for (int r = 0; r < P; ++r) CHECK(process_names[r] == "rank " + std::to_string(r));

  // Compute: one X slice on tid 0 per compute op, named by its action string, lasting its cost.
  const auto compute = events(t.doc, "X", "compute");
  CHECK(compute.size() == compute_ops(program));
  std::set<std::pair<int, int>> seen;  // (rank, position)
  for (const auto& e : compute) {
    const int rank = e["pid"].get<int>();
    const int pos = e["args"]["position"].get<int>();
    REQUIRE(rank >= 0);
    REQUIRE(rank < P);
    REQUIRE(pos >= 0);
    REQUIRE(static_cast<std::size_t>(pos) < program.ops(rank).size());
    CHECK(seen.insert({rank, pos}).second);
    const auto& op = program.ops(rank)[static_cast<std::size_t>(pos)];
    REQUIRE(schedules::is_compute(op.kind));
    CHECK(e["tid"] == 0);
    CHECK(e["name"] == program.op_text(rank, op));
    CHECK(e["args"]["stage"] == op.stage);
    CHECK(e["args"]["microbatch"] == op.microbatch);
    CHECK(e["args"]["chunk"] == program.place(op.stage).chunk);
    CHECK(e["args"]["chunk"].get<int>() < chunks_per_rank);
    const double cost = op_cost(costs.stages[static_cast<std::size_t>(op.stage)], op.kind);
    CHECK(e["dur"].get<double>() == Approx(cost * us).margin(1e-6));
    CHECK(e["ts"].get<double>() >= 0.0);
    CHECK(e["ts"].get<double>() + e["dur"].get<double>() <=
          Approx(result.makespan * us).margin(1e-6));
  }

  // Transfers: a slice on the sender ("to") and on the receiver ("from"), one flow s -> f each.
  CHECK(t.trace.transfers.size() == expected_transfers);
  const auto transfer = events(t.doc, "X", "transfer");
  std::size_t sends = 0, recvs = 0;
  for (const auto& e : transfer) {
    CHECK(e["args"]["bytes"] == kBoundary);
    if (e["args"].contains("to")) {
      ++sends;
      CHECK(e["args"]["to"] != e["pid"]);
    } else {
      REQUIRE(e["args"].contains("from"));
      ++recvs;
      CHECK(e["args"]["from"] != e["pid"]);
    }
  }
  CHECK(sends == expected_transfers);
  CHECK(recvs == expected_transfers);

  const auto starts = events(t.doc, "s"), finishes = events(t.doc, "f");
  CHECK(starts.size() == expected_transfers);
  CHECK(finishes.size() == expected_transfers);
  std::map<std::uint64_t, json> start_by_id, finish_by_id;
  for (const auto& e : starts) CHECK(start_by_id.emplace(e["id"].get<std::uint64_t>(), e).second);
  for (const auto& e : finishes)
    CHECK(finish_by_id.emplace(e["id"].get<std::uint64_t>(), e).second);
  REQUIRE(start_by_id.size() == finish_by_id.size());
  // Each flow starts inside a sender slice and ends inside the matching receiver slice.
  auto inside = [&](const json& flow, const char* direction) {
    for (const auto& e : transfer) {
      if (e["pid"] != flow["pid"] || e["tid"] != flow["tid"] || !e["args"].contains(direction))
        continue;
      const double ts = e["ts"].get<double>(), end = ts + e["dur"].get<double>();
      if (flow["ts"].get<double>() >= ts - 1e-6 && flow["ts"].get<double>() <= end + 1e-6)
        return true;
    }
    return false;
  };
  for (const auto& [id, s] : start_by_id) {
    INFO("flow id " << id);
    REQUIRE(finish_by_id.count(id) == 1);
    const json& f = finish_by_id[id];
    CHECK(s["pid"] != f["pid"]);
    CHECK(s["ts"].get<double>() == Approx(f["ts"].get<double>()));
    CHECK(inside(s, "to"));
    CHECK(inside(f, "from"));
  }

  // Counters: per rank, the maxima are the run's peaks (static bytes are not in the counter).
  std::map<int, std::int64_t> max_memory;
  std::map<int, int> max_inflight;
  for (const auto& e : events(t.doc, "C")) {
    const int rank = e["pid"].get<int>();
    if (e["name"] == "memory") {
      auto& m = max_memory[rank];
      m = std::max(m, e["args"]["bytes"].get<std::int64_t>());
    } else {
      REQUIRE(e["name"] == "inflight");
      auto& m = max_inflight[rank];
      m = std::max(m, e["args"]["microbatches"].get<int>());
    }
  }
  REQUIRE(static_cast<int>(result.per_rank.size()) == P);
  for (int r = 0; r < P; ++r) {
    INFO("rank " << r);
    const auto& m = result.per_rank[static_cast<std::size_t>(r)];
    CHECK(max_memory[r] >= kActivation);  // at least one stash was live
    CHECK(max_memory[r] == m.peak_memory_bytes - kStatic * chunks_per_rank);
    CHECK(max_inflight[r] == m.peak_inflight);
  }
}

void check_same_metrics(const record::RunRecord& ra, const record::RunRecord& rb) {
  REQUIRE(ra.metrics);
  REQUIRE(rb.metrics);
  const record::RunMetrics &a = *ra.metrics, &b = *rb.metrics;
  CHECK(a.makespan == b.makespan);
  CHECK(a.bubble_fraction == b.bubble_fraction);
  CHECK(a.bubble_vs_ideal == b.bubble_vs_ideal);
  CHECK(a.comm_bytes == b.comm_bytes);
  CHECK(a.ops_executed == b.ops_executed);
  CHECK(ra.deadlock.has_value() == rb.deadlock.has_value());
  REQUIRE(a.per_rank.size() == b.per_rank.size());
  for (std::size_t r = 0; r < a.per_rank.size(); ++r) {
    INFO("rank " << r);
    const auto &x = a.per_rank[r], &y = b.per_rank[r];
    CHECK(x.rank == y.rank);
    CHECK(x.start == y.start);
    CHECK(x.end == y.end);
    CHECK(x.busy == y.busy);
    CHECK(x.idle == y.idle);
    CHECK(x.comm_exposed == y.comm_exposed);
    CHECK(x.peak_inflight == y.peak_inflight);
    CHECK(x.peak_memory_bytes == y.peak_memory_bytes);
    CHECK(x.sent_bytes == y.sent_bytes);
    CHECK(x.recv_bytes == y.recv_bytes);
    CHECK(x.ops_done == y.ops_done);
  }
}

}  // namespace

TEST_CASE("chrome_trace.2_p_1_m_transfers", "[trace]") {
  // 1F1B trace: 2(P-1)M transfers, compute slices = compute ops, peaks = counters
  const int P = 4, M = 8;
  const std::string unit = GENERATE(as<std::string>{}, "ms", "us", "s", "ns");
  INFO("time_unit " << unit);
  const TracedRun t = traced(make_config("1f1b", P, M, 1, unit));
  check_trace(t, 2 * (P - 1) * M, 1);
  // 1F1B: peak in-flight on rank r = min(P - r, M); comm volume 2(P-1)M boundary bytes.
  for (int r = 0; r < P; ++r)
    CHECK(t.analysis.metrics->per_rank[r].peak_inflight == std::min(P - r, M));
  CHECK(t.analysis.metrics->comm_bytes == 2 * (P - 1) * M * kBoundary);
  CHECK(t.doc["otherData"]["time_unit"] == unit);
}

TEST_CASE("chrome_trace.chunk_args_2_pv_1", "[trace]") {
  // interleaved 1F1B trace: chunk args, 2(PV-1)M transfers, static bytes per chunk
  const int P = 4, M = 8, V = 2;
  const TracedRun t = traced(make_config("interleaved-1f1b", P, M, V, "ms"));
  std::set<int> chunks;
  for (const auto& e : events(t.doc, "X", "compute")) chunks.insert(e["args"]["chunk"].get<int>());
  CHECK(chunks == std::set<int>{0, 1});
  // Stages s and s+1 always sit on different ranks with loop placement and P > 1.
  check_trace(t, 2 * (P * V - 1) * M, V);
}

TEST_CASE("chrome_trace.peak_flight_m_rank", "[trace]") {
  // GPipe trace: peak in-flight M on every rank
  const int P = 3, M = 5;
  const TracedRun t = traced(make_config("gpipe", P, M, 1, "ms"));
  check_trace(t, 2 * (P - 1) * M, 1);
  for (const auto& m : t.analysis.metrics->per_rank) CHECK(m.peak_inflight == M);
}

TEST_CASE("chrome_trace.metrics_only_run_gives_same", "[trace]") {
  // a metrics-only run gives the same numbers as a traced run
  const auto [kind, V] =
      GENERATE(table<std::string, int>({{"1f1b", 1}, {"gpipe", 1}, {"interleaved-1f1b", 2}}));
  INFO(kind);
  const config::Config config = make_config(kind, 4, 8, V, "ms");
  const record::RunRecord plain = sim::analyze(config);
  const TracedRun t = traced(config);
  REQUIRE(plain.metrics);
  REQUIRE(t.analysis.metrics);
  CHECK(plain.ok());
  check_same_metrics(plain, t.analysis);
  CHECK_FALSE(t.trace.spans.empty());
}

TEST_CASE("chrome_trace.trace_stays_valid_json_deadlocked", "[trace]") {
  // the trace stays valid JSON for a deadlocked run
  // All-blocking 1F1B deadlocks (every rank sends before it receives in the steady state).
  config::Config config =
      config::load_config(std::string(PPSIM_SOURCE_DIR) + "/configs/1f1b-blocking-deadlock.json");
  record::Trace trace;
  record::TraceRecorder recorder(trace);
  const record::RunRecord a = sim::analyze(config, {.trace = false, .observer = &recorder});
  REQUIRE(a.metrics);
  CHECK(a.deadlock);
  std::ostringstream out;
  REQUIRE(a.program);
  viz::write_chrome_trace(out, trace, *a.program,
                          {config::microseconds_per_unit(config.time_unit), config.name});
  json doc;
  REQUIRE_NOTHROW(doc = json::parse(out.str()));
  CHECK(doc["traceEvents"].is_array());
  // Compute slices only for the ops that ran.
  std::size_t compute = 0;
  for (const auto& s : trace.spans) compute += s.kind == record::SpanKind::compute ? 1 : 0;
  CHECK(events(doc, "X", "compute").size() == compute);
}

TEST_CASE("chrome_trace.trace_run_record_carries_config", "[trace]") {
  // a trace from a run record carries the config and metrics as metadata
  const config::Config config = make_config("1f1b", 4, 8, 1, "ms");
  record::RunRecord a = sim::analyze(config, {.trace = true});
  REQUIRE(a.trace);
  for (const std::string origin : {"simulated", "measured"}) {
    a.trace->origin = origin;
    std::ostringstream out;
    viz::write_chrome_trace(out, a, {1000.0, ""});
    const json doc = json::parse(out.str());
    const json& other = doc.at("otherData");
    CHECK(other.at("title") == config.name);  // the config's name when no title is given
    CHECK(other.at("config").at("name") == config.name);
    CHECK(other.at("config").at("schedule") == "1f1b");
    CHECK(other.at("config").at("comm_style") == "async");
    CHECK(other.at("config").at("origin") == origin);
    CHECK(other.at("config").at("ranks") == 4);
    CHECK(other.at("metrics").at("makespan").get<double>() == Approx(a.metrics->makespan));
    CHECK(other.at("metrics").at("bubble_fraction").get<double>() ==
          Approx(a.metrics->bubble_fraction));
    CHECK(other.at("metrics").at("peak_memory_bytes") == a.metrics->peak_memory_bytes);
    CHECK(other.at("verdict") == "ok");
    // The same, as the args of one global instant at 0 that Perfetto shows.
    const auto runs = events(doc, "i", "run");
    REQUIRE(runs.size() == 1);
    CHECK(runs[0].at("s") == "g");
    CHECK(runs[0].at("ts") == 0);
    CHECK(runs[0].at("args").at("metrics") == other.at("metrics"));
    CHECK(events(doc, "i", "deadlock").empty());
    // The slices are those of the Trace + Program writer.
    std::ostringstream plain;
    viz::write_chrome_trace(plain, *a.trace, *a.program, {1000.0, config.name});
    CHECK(events(json::parse(plain.str()), "X") == events(doc, "X"));
  }
}

TEST_CASE("chrome_trace.deadlocked_run_s_trace_marks", "[trace]") {
  // a deadlocked run's trace marks where each rank blocked for good
  const config::Config config =
      config::load_config(std::string(PPSIM_SOURCE_DIR) + "/configs/1f1b-blocking-deadlock.json");
  const record::RunRecord a = sim::analyze(config, {.trace = true});
  REQUIRE(a.deadlock);
  std::ostringstream out;
  viz::write_chrome_trace(out, a, {1000.0, ""});
  const json doc = json::parse(out.str());
  CHECK(doc.at("otherData").at("verdict").get<std::string>().starts_with("DEADLOCK"));
  CHECK(doc.at("otherData").at("deadlock") == a.deadlock->describe());
  std::set<std::pair<int, int>> in_cycle;
  for (const auto& c : a.deadlock->cycles)
    for (const auto& b : c) in_cycle.insert({b.rank, b.position});
  std::size_t unfinished = 0;
  for (const auto& r : a.trace->ranks) unfinished += r.finished ? 0 : 1;
  const auto stuck = events(doc, "i", "deadlock");
  CHECK(stuck.size() == unfinished);
  CHECK(unfinished == 4);
  for (const auto& e : stuck) {
    const int rank = e.at("pid");
    const auto& rt = a.trace->ranks[static_cast<std::size_t>(rank)];
    CHECK_FALSE(rt.finished);
    CHECK(e.at("args").at("position") == rt.stuck_pos);
    CHECK(e.at("args").at("in_cycle") == (in_cycle.count({rank, rt.stuck_pos}) > 0));
    // At the start of the blocked op when it was recorded, else when the rank blocked for good.
    double start = rt.end;
    for (const auto& s : a.trace->spans)
      if (s.rank == rank && s.pos == rt.stuck_pos) start = s.start;
    CHECK(e.at("ts").get<double>() == Approx(start * 1000.0));
    CHECK(e.at("args").at("peer").get<int>() >= 0);
  }
}

TEST_CASE("chrome_trace.simulated_measured_run_go_into", "[chrome_trace][real]") {
  // A simulated and a measured run go into one Chrome trace as two process groups
  const auto p =
      std::make_shared<const schedules::Program>(test::lowered("1f1b", 4, 8, 1, "async"));
  config::Prepared prep;
  prep.config.name = "two groups";
  prep.program = p;
  prep.model = test::uniform(4, 1, 2);
  const record::RunRecord predicted = sim::analyze(prep, {.trace = true});
  real::Settings s;
  s.time_scale = 0;
  const real::Execution measured = real::execute(prep, {s});
  const std::vector<viz::LabelledRun> runs = {{&predicted, "simulated"},
                                              {&measured.record, "measured"}};
  std::ostringstream out;
  viz::write_chrome_trace(out, runs, {});
  const auto j = nlohmann::json::parse(out.str());
  std::set<int> sim_pids, real_pids;
  std::size_t sim_compute = 0, real_compute = 0;
  std::map<int, std::string> names;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name")
      names[e["pid"].get<int>()] = e["args"]["name"].get<std::string>();
    if (e["ph"] == "X" && e["cat"] == "compute")
      (e["pid"].get<int>() < 4 ? sim_compute : real_compute) += 1;
  }
  REQUIRE(names.size() == 8);
  for (int r = 0; r < 4; ++r) {
    CHECK(names[r] == fmt::format("simulated rank {}", r));
    CHECK(names[4 + r] == fmt::format("measured rank {}", r));
  }
  // Every compute op of the program, once in each group.
  std::size_t compute_ops = 0;
  for (int r = 0; r < 4; ++r)
    for (const auto& op : p->ops(r)) compute_ops += schedules::is_compute(op.kind);
  CHECK(sim_compute == compute_ops);
  CHECK(real_compute == compute_ops);
  REQUIRE(j["otherData"]["runs"].size() == 2);
  CHECK(j["otherData"]["runs"][0]["config"]["origin"] == "simulated");
  CHECK(j["otherData"]["runs"][1]["config"]["origin"] == "measured");
}
