// PyTorch profiler (Kineto) traces in (docs/PROFILES.md): synthetic traces of simulated runs with
// unequal stages, per-rank clock offsets of milliseconds, +-3% noise and two profiler steps give
// back each rank's order exactly, per-stage F/I/W within 2% of the truth and a replay within 3% of
// the measured makespan; bad traces end in a ProfileError that names the file and the event.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "ppsim/config/prepare.hpp"
#include "ppsim/profile/kineto.hpp"
#include "ppsim/sim/analysis.hpp"
#include "transfers.hpp"

using namespace ppsim;
using nlohmann::json;

namespace {

json uneven(const std::string& kind, int P, int M) {
  json per_stage = json::object();
  for (int s = 0; s < P; ++s)
    per_stage[std::to_string(s)] = {{"forward", 1.0 + 0.25 * s},
                                    {"backward_input", 1.2 + 0.1 * s},
                                    {"backward_weight", 0.7 + 0.05 * (s % 3)}};
  return {{"name", kind},
          {"schedule", {{"kind", kind}, {"ranks", P}, {"microbatches", M}}},
          {"costs", {{"per_stage", per_stage}}},
          {"comm", {{"latency", 0.02}, {"boundary_bytes", 1 << 20}}}};
}

// The run's traces as a profiler would leave them: each rank's clock shifted, each duration off
// by up to +-3%, the step repeated (profiler steps 4 and 5, the second with other noise).
std::vector<json> profiled(const record::RunRecord& run, const std::vector<double>& offset_ms,
                           unsigned seed) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("ppsim-profile-" + std::to_string(seed))).string();
  profile::write_traces(run, dir);
  std::mt19937 rng(seed), other(seed + 1);
  std::uniform_real_distribution<double> noise(-0.03, 0.03);
  std::vector<json> out;
  for (int r = 0; r < run.program->ranks(); ++r) {
    std::ifstream in(dir + "/rank" + std::to_string(r) + ".json");
    json doc = json::parse(in);
    json events = json::array();
    const double step_len = run.metrics->makespan * 1000 + 500;
    for (int step = 4; step <= 5; ++step) {
      const double shift = offset_ms[static_cast<std::size_t>(r)] * 1000 + (step - 4) * step_len;
      std::map<std::string, double> scale;  // the same noise on the CPU and the GPU side
      for (json e : doc["traceEvents"]) {
        e["ts"] = e["ts"].get<double>() + shift;
        if (e.contains("args") && e["args"].contains("correlation"))  // unique in a trace
          e["args"]["correlation"] = e["args"]["correlation"].get<int>() + step * 1'000'000;
        if (e["name"] == "ProfilerStep#0") {
          e["name"] = "ProfilerStep#" + std::to_string(step);
        } else {
          auto [it, fresh] = scale.emplace(e["name"].get<std::string>(), 0.0);
          // (The actions' noise from a generator of their own: the same draws whatever else
          // the trace holds.)
          if (fresh)
            it->second = 1 + noise(e["name"].get<std::string>().starts_with("PP:") ? rng : other);
          e["dur"] = e["dur"].get<double>() * it->second;
        }
        events.push_back(e);
      }
      // Something that is not an action, as real traces are full of.
      events.push_back({{"ph", "X"},
                        {"cat", "kernel"},
                        {"name", "ampere_sgemm_128x64_nn"},
                        {"ts", shift + 1.0},
                        {"dur", 3.0},
                        {"pid", 0},
                        {"tid", 7}});
    }
    doc["traceEvents"] = events;
    out.push_back(doc);
  }
  std::filesystem::remove_all(dir);
  return out;
}

profile::Imported import_docs(const std::vector<json>& docs, profile::ImportOptions o = {}) {
  std::vector<profile::RankTrace> traces;
  for (std::size_t i = 0; i < docs.size(); ++i)
    traces.push_back(profile::parse_trace(docs[i].dump(), "rank" + std::to_string(i) + ".json",
                                          profile::default_patterns()));
  return profile::import_traces(traces, o);
}

}  // namespace

TEST_CASE("imported traces give back order, costs and makespan", "[profile]") {
  for (const auto& [kind, P, M] :
       {std::tuple{"zb-h1", 4, 8}, std::tuple{"1f1b", 3, 6}, std::tuple{"zbv", 2, 6},
        std::tuple{"interleaved-zb", 2, 4}, std::tuple{"dualpipev", 2, 16}}) {
    CAPTURE(kind, P, M);
    const std::string k = kind;
    json cfg =
        uneven(kind, P * (k == "zbv" || k == "interleaved-zb" || k == "dualpipev" ? 2 : 1), M);
    cfg["schedule"]["ranks"] = P;
    if (std::string(kind) == "interleaved-zb") cfg["schedule"]["chunks"] = 2;
    if (std::string(kind) == "1f1b")
      for (auto& [s, c] : cfg["costs"]["per_stage"].items()) {
        c["backward"] = c["backward_input"].get<double>() + c["backward_weight"].get<double>();
        c.erase("backward_input");
        c.erase("backward_weight");
      }
    const config::Prepared prepared = config::prepare(config::parse_config(cfg, "truth.json"));
    const record::RunRecord truth = sim::analyze(prepared, {.trace = true});
    REQUIRE(truth.ok());
    std::vector<double> offsets;
    for (int r = 0; r < P; ++r)
      offsets.push_back(std::vector<double>{0, 7.5, -3.25, 12.0}[static_cast<std::size_t>(r % 4)]);
    const auto docs = profiled(truth, offsets, static_cast<unsigned>(P * 10 + M));
    const profile::Imported im = import_docs(docs);
    // The last step by default; each rank's compute order exactly.
    for (const auto& r : im.ranks) REQUIRE(r.step == 5);
    const auto& got = *im.measured.program;
    REQUIRE(got.ranks() == P);
    for (int r = 0; r < P; ++r) {
      std::vector<schedules::Op> want;
      for (const auto& op : prepared.program->ops(r))
        if (schedules::is_compute(op.kind)) want.push_back(op);
      REQUIRE(got.ops(r).size() == want.size());
      for (std::size_t i = 0; i < want.size(); ++i)  // (DualPipeV's OVERLAP_F_B pairs too)
        REQUIRE(got.op_text(r, got.ops(r)[i]) == prepared.program->op_text(r, want[i]));
    }
    // Per-stage costs within 2% of the truth: the mean of at least four actions, each off by up
    // to 3%. (DualPipeV runs most backwards of some stages inside overlapped pairs: a mean of
    // fewer actions is held to the noise's own 3%.)
    std::map<std::pair<schedules::OpKind, int>, int> plain;  // plain actions per kind and stage
    for (int r = 0; r < P; ++r)
      for (const auto& op : got.ops(r))
        if (!schedules::is_composite(op.kind)) ++plain[{op.kind, op.stage}];
    for (int s = 0; s < prepared.program->stages(); ++s) {
      const auto& t = prepared.model.costs.stages[static_cast<std::size_t>(s)];
      const auto& c = im.calibrated.costs.stages[static_cast<std::size_t>(s)];
      auto within = [&](schedules::OpKind of) { return plain[{of, s}] >= 4 ? 0.02 : 0.03; };
      CAPTURE(s);
      REQUIRE(c.forward == Approx(t.forward).epsilon(within(schedules::OpKind::F)));
      if (t.split) {
        REQUIRE(c.backward_input == Approx(t.backward_input).epsilon(within(schedules::OpKind::I)));
        REQUIRE(c.backward_weight ==
                Approx(t.backward_weight).epsilon(within(schedules::OpKind::W)));
      } else {
        REQUIRE(c.backward == Approx(t.backward).epsilon(within(schedules::OpKind::B)));
      }
    }
    // DualPipeV's overlapped pairs: one cost per stage of their forward, F + B by default.
    if (k == "dualpipev") {
      int pairs = 0;
      for (const auto& st : im.calibrated.costs.stages) pairs += st.overlapped_fb >= 0;
      REQUIRE(pairs > 0);
    }
    // The clocks aligned: offsets recovered to within the one-way delay, and the replay of the
    // imported order with the measured costs within 3% of the measured makespan.
    for (int r = 0; r < P; ++r)
      REQUIRE(im.ranks[static_cast<std::size_t>(r)].offset ==
              Approx(-(offsets[static_cast<std::size_t>(r)] - offsets[0])).margin(0.1));
    // The transfers: every send paired with its receive, timed without the wait for the peer;
    // one message size, so the link's time is all latency (the truth's 0.02).
    REQUIRE(im.transfers.pairs > 0);
    REQUIRE(im.transfers.unpaired == 0);
    REQUIRE(im.transfers.sizes.size() == 1);
    REQUIRE(im.latency == Approx(0.02).epsilon(0.04));
    REQUIRE(im.bandwidth == 0);
    const double measured = im.measured.metrics->makespan;
    REQUIRE(measured == Approx(truth.metrics->makespan).epsilon(0.05));
    json replay = profile::calibration_fragment(im.calibrated);
    json ops = json::array();
    for (int r = 0; r < P; ++r) {
      std::string line;
      for (const auto& op : got.ops(r)) line += (line.empty() ? "" : ",") + got.op_text(r, op);
      ops.push_back(line);
    }
    replay["schedule"] = {{"kind", "custom"}, {"ops", ops}};
    replay["comm"]["style"] = "async";
    replay["comm"]["prefetch"] = "all";
    const auto predicted = sim::analyze(config::parse_config(replay, "replay.json"));
    REQUIRE(predicted.ok());
    REQUIRE(predicted.metrics->makespan == Approx(measured).epsilon(0.03));
    // --step 4: the other step, the same order.
    profile::ImportOptions o;
    o.step = 4;
    const profile::Imported first = import_docs(docs, o);
    REQUIRE(first.ranks[0].step == 4);
    REQUIRE(first.measured.program->ops(0).size() == got.ops(0).size());
    o.step = 9;
    REQUIRE_THROWS_WITH(import_docs(docs, o),
                        Catch::Contains("no ProfilerStep#9") && Catch::Contains("ProfilerStep#4"));
  }
}

TEST_CASE("traces the importer cannot use say which file and event", "[profile]") {
  const auto patterns = profile::default_patterns();
  auto parse = [&](const std::string& text) {
    return profile::parse_trace(text, "t.json", patterns);
  };
  REQUIRE_THROWS_WITH(parse("{\"traceEvents\": [{\"ph\": \"X\""),
                      Catch::Contains("t.json") && Catch::Contains("malformed or truncated"));
  REQUIRE_THROWS_WITH(parse("[]"), Catch::Contains("traceEvents"));
  REQUIRE_THROWS_WITH(
      parse(
          R"({"traceEvents": [{"ph": "X", "name": "x"}, {"ph": "X", "name": "PP:0F0", "ts": "7", "dur": 1}]})"),
      Catch::Contains("traceEvents[1]") && Catch::Contains("'ts'"));
  REQUIRE_THROWS_WITH(
      parse(R"({"traceEvents": [{"ph": "X", "name": "PP:0F0", "ts": 1, "dur": -1}]})"),
      Catch::Contains("traceEvents[0]") && Catch::Contains("'dur'"));
  std::string deep = "{\"traceEvents\": [";
  for (int i = 0; i < 100; ++i) deep += "[";
  REQUIRE_THROWS_WITH(parse(deep), Catch::Contains("t.json"));
  // No pipeline actions: what the trace holds instead.
  const auto t = parse(R"({"traceEvents": [{"ph": "X", "name": "aten::mm", "ts": 1, "dur": 2},
                          {"ph": "X", "name": "ProfilerStep#3", "ts": 0, "dur": 9}]})");
  REQUIRE_THROWS_WITH(
      profile::import_traces({t}, {}),
      Catch::Contains("no pipeline actions in ProfilerStep#3") && Catch::Contains("aten::mm"));
  // A stage on two ranks, and an action twice in a step.
  const auto a = parse(R"({"traceEvents": [{"ph": "X", "name": "PP:0F0", "ts": 1, "dur": 2}]})");
  REQUIRE_THROWS_WITH(profile::import_traces({a, a}, {}),
                      Catch::Contains("stage 0 also runs on rank 0"));
  const auto twice = parse(R"({"traceEvents": [{"ph": "X", "name": "PP:0F0", "ts": 1, "dur": 2},
                              {"ph": "X", "name": "PP:0F0", "ts": 5, "dur": 2}]})");
  REQUIRE_THROWS_WITH(profile::import_traces({twice}, {}), Catch::Contains("appears twice"));
}

TEST_CASE("a map file names other frameworks' ranges", "[profile]") {
  const auto dir = std::filesystem::temp_directory_path() / "ppsim-profile-map";
  std::filesystem::create_directories(dir);
  const std::string map = (dir / "map.json").string();
  std::ofstream(map) << R"J({"actions": [
    {"pattern": "forward-step-(\\d+)", "kind": "F", "microbatch": 1},
    {"pattern": "backward-step-(\\d+)", "kind": "B", "microbatch": 1}]})J";
  auto patterns = profile::default_patterns();
  for (auto& p : profile::read_map(map)) patterns.push_back(std::move(p));
  auto rank = [&](int r, double off) {
    json e = json::array();
    for (int m = 0; m < 2; ++m) {
      e.push_back({{"ph", "X"},
                   {"name", "forward-step-" + std::to_string(m)},
                   {"ts", off + 10 * m + r * 2},
                   {"dur", 1}});
      e.push_back({{"ph", "X"},
                   {"name", "backward-step-" + std::to_string(m)},
                   {"ts", off + 30 + 10 * m - r * 3},
                   {"dur", 2}});
    }
    return profile::parse_trace(json{{"traceEvents", e}}.dump(), "r" + std::to_string(r), patterns);
  };
  const auto im = profile::import_traces({rank(0, 0), rank(1, 1000)}, {}, patterns);
  REQUIRE(im.measured.program->stages() == 2);  // the stage of a name without one: its rank's
  REQUIRE(im.calibrated.costs.stages[1].backward == Approx(2.0 / 1000));
  std::ofstream(map) << R"J({"actions": [{"pattern": "(", "kind": "F", "microbatch": 1}]})J";
  REQUIRE_THROWS_WITH(profile::read_map(map), Catch::Contains("actions[0].pattern"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("an action without a GPU annotation is timed by the kernels it launched", "[profile]") {
  // Two ranks, F then B; the GPU runs each action's kernels 40 us after their launch, and a
  // kernel launched from another thread inside the range does not count.
  auto rank = [](int r, double off) {
    json e = json::array();
    std::int64_t corr = 100 * (r + 1);
    auto action = [&](const std::string& name, double ts, double gpu_len) {
      e.push_back({{"ph", "X"},
                   {"cat", "user_annotation"},
                   {"name", name},
                   {"ts", ts},
                   {"dur", 10},
                   {"tid", 1}});
      for (int k = 0; k < 2; ++k) {
        ++corr;
        e.push_back({{"ph", "X"},
                     {"cat", "cuda_runtime"},
                     {"name", "cudaLaunchKernel"},
                     {"ts", ts + 1 + 4 * k},
                     {"dur", 2},
                     {"tid", 1},
                     {"args", {{"correlation", corr}}}});
        e.push_back({{"ph", "X"},
                     {"cat", "kernel"},
                     {"name", "sm90_gemm"},
                     {"ts", ts + 40 + k * gpu_len / 2},
                     {"dur", gpu_len / 2},
                     {"tid", 7},
                     {"args", {{"correlation", corr}}}});
      }
      ++corr;  // another thread's launch inside the range, its kernel much later
      e.push_back({{"ph", "X"},
                   {"cat", "cuda_runtime"},
                   {"name", "cudaLaunchKernel"},
                   {"ts", ts + 3},
                   {"dur", 1},
                   {"tid", 2},
                   {"args", {{"correlation", corr}}}});
      e.push_back({{"ph", "X"},
                   {"cat", "kernel"},
                   {"name", "other"},
                   {"ts", ts + 900},
                   {"dur", 5},
                   {"tid", 7},
                   {"args", {{"correlation", corr}}}});
    };
    action("PP:" + std::to_string(r) + "F0", off + 100 * r, 60);
    action("PP:" + std::to_string(r) + "B0", off + 1000 - 100 * r, 120);
    return profile::parse_trace(json{{"traceEvents", e}}.dump(), "r" + std::to_string(r),
                                profile::default_patterns());
  };
  const auto t0 = rank(0, 0);
  REQUIRE(t0.launches.size() == 6);
  REQUIRE(t0.device.size() == 6);
  const auto im =
      profile::import_traces({t0, rank(1, 5000)}, {.step = std::nullopt, .time_unit = "us"});
  for (const auto& r : im.ranks) {
    REQUIRE(r.device == 2);
    REQUIRE(r.launched == 2);
  }
  REQUIRE(im.calibrated.costs.stages[0].forward == Approx(60));
  REQUIRE(im.calibrated.costs.stages[1].backward == Approx(120));
}

TEST_CASE("sends and receives are paired across ranks and fit the link", "[profile]") {
  // record_param_comms as ProcessGroupNCCL writes it: the peer's group rank in "Rank", through
  // "Process Group Ranks" (here as text), or "Dst Rank" / "Src Rank"; bytes from the dtype.
  const auto t = profile::parse_trace(R"({"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 5, "dur": 3, "tid": 1,
       "args": {"Collective name": "send", "In msg nelems": 1024, "Out msg nelems": 1024,
                "dtype": "BFloat16", "Rank": 1, "Process Group Ranks": "[4, 6]"}},
      {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 9, "dur": 3,
       "args": {"Collective name": "recv", "Out msg nelems": 10, "dtype": "Float",
                "Src Rank": 2}},
      {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 9, "dur": 3,
       "args": {"Collective name": "allreduce", "In msg nelems": 10, "dtype": "Float"}},
      {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 9, "dur": 3,
       "args": {"Collective name": "send", "In msg nelems": 10, "dtype": "Quaternion",
                "Rank": 0}}]})",
                                      "c.json", profile::default_patterns());
  REQUIRE(t.comms.size() == 3);  // the allreduce is not point-to-point
  CHECK(t.comms[0].send);
  CHECK(t.comms[0].peer == 6);
  CHECK(t.comms[0].bytes == 2048);
  CHECK(t.comms[0].tid == 1);
  CHECK(!t.comms[1].send);
  CHECK(t.comms[1].peer == 2);
  CHECK(t.comms[1].bytes == 40);
  CHECK(t.comms[2].bytes == -1);  // a dtype of unknown size

  // Pairing: the k-th send from a to b with the k-th receive on b from a; a send with no
  // receive, and one to a rank outside the run, are left over.
  using profile::detail::TimedComm;
  std::vector<std::vector<TimedComm>> by_rank = {
      {{true, 1, 100, 0, 5, true},
       {true, 1, 300, 10, 15, true},
       {true, 1, 100, 20, 21, true},
       {true, 9, 100, 0, 1, true}},
      {{false, 0, 100, 2, 6, true}, {false, 0, 300, 11, 17, true}}};
  std::size_t unpaired = 0;
  const auto pairs = profile::detail::pair_transfers(by_rank, unpaired);
  REQUIRE(pairs.size() == 2);
  CHECK(unpaired == 2);
  CHECK(pairs[1].bytes == 300);
  CHECK(pairs[1].send_start == 10);
  CHECK(pairs[1].recv_end == 17);
  CHECK(pairs[1].device);

  // t = latency + bytes / bandwidth: two sizes give both; one size puts it all in the latency.
  const auto two = profile::detail::fit_link({{1000, 3.0}, {3000, 7.0}, {1000, 3.0}});
  CHECK(two.latency == Approx(1.0));
  CHECK(two.bandwidth == Approx(500.0));
  const auto one = profile::detail::fit_link({{1000, 3.0}, {1000, 4.0}, {1000, 3.5}});
  CHECK(one.latency == Approx(3.5));
  CHECK(one.bandwidth == 0);
  CHECK(profile::detail::fit_link({}).latency == 0);
}
