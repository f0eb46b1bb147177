// Each schedule's default point-to-point lowering (schedules::Generator::default_comm): used when a
// config sets no comm.style, the same as that lowering set explicitly, and within 2% of the best
// style ppsim offers for the schedule on every bundled config; and the compare table's footnote
// for a row whose lowering stalled it (viz::lowering_stall).
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "paths.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/config/error.hpp"
#include "ppsim/config/sweep.hpp"
#include "ppsim/schedules/generator.hpp"
#include "ppsim/sim/analysis.hpp"
#include "ppsim/viz/summary_table.hpp"

using namespace ppsim;
using nlohmann::json;

namespace {

// The bundled configs of generated schedules, with the comm style and prefetch taken out.
std::vector<config::Config> bundled_without_style() {
  std::vector<config::Config> out;
  for (const auto& path : test::bundled_configs()) {
    json j = json::parse(std::ifstream(path));
    if (!schedules::Registry::instance().find(j["schedule"]["kind"].get<std::string>())) continue;
    if (j.contains("comm")) {
      j["comm"].erase("style");
      j["comm"].erase("prefetch");
      j["comm"].erase("overlap_p2p_comm");  // megatron's, refused by the other styles
    }
    out.push_back(config::parse_config(j, path));
  }
  return out;
}

// The makespan of `point` with its comm section changed by `set`, if that lowering accepts the
// schedule and the run is ok.
template <typename Set>
std::optional<double> makespan_with(const config::Config& point, Set set) {
  json j = point.raw;
  set(j["comm"]);
  try {
    const record::RunRecord run = sim::analyze(config::parse_config(j, point.source));
    if (run.ok()) return run.metrics->makespan;
  } catch (const std::exception&) {  // a style that refuses this schedule
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("default_comm.fair_lowering_schedule_bundled_configs", "[default_comm]") {
  // schedules.default_comm: a fair lowering for every schedule on the bundled configs
  // The styles ppsim offers a schedule: async with receives 1 op ahead and all at the start,
  // PyTorch's lowering under NCCL's rules (under MPI's its sends are waited too late), Megatron's.
  const std::vector<std::pair<std::string, json>> styles = {
      {"async, prefetch 1", {{"style", "async"}, {"prefetch", 1}}},
      {"async, prefetch all", {{"style", "async"}, {"prefetch", "all"}}},
      {"torch", {{"style", "torch"}, {"semantics", "nccl"}}},
      {"megatron", {{"style", "megatron"}}}};
  int points = 0;
  for (const config::Config& base : bundled_without_style()) {
    config::SweepAxes axes;
    axes.kinds = schedules::Registry::instance().names();
    axes.microbatches = {8, 16};
    axes.chunks = {2};
    for (const config::Config& point : config::sweep(base, axes)) {
      INFO(point.source << ": " << point.kind << " M=" << point.raw["schedule"]["microbatches"]);
      REQUIRE(point.default_comm);
      std::optional<record::RunRecord> ran;
      try {
        ran = sim::analyze(point);
      } catch (const config::ConfigError& e) {
        // What the schedule cannot run (M too small, costs for F and B only where it splits B
        // into I and W) is refused naming that key, never the default comm.
        INFO(e.what());
        CHECK(e.key().rfind("comm.", 0) != 0);
        continue;
      }
      const record::RunRecord& run = *ran;
      REQUIRE(run.ok());
      const double made = run.metrics->makespan;
      // The default is the schedule's declared lowering, set explicitly it gives the same run.
      const auto* g = schedules::Registry::instance().find(point.kind);
      CHECK(run.info.comm_style == g->default_comm.style);
      CHECK(run.info.lowering == run.info.default_lowering);
      const std::optional<double> explicit_run = makespan_with(point, [&](json& comm) {
        comm["style"] = g->default_comm.style;
        for (const auto& [key, value] : point.lowering.params.values())
          comm[key] =
              key == "prefetch" && value == schedules::kPrefetchAll ? json("all") : json(value);
      });
      REQUIRE(explicit_run);
      CHECK(*explicit_run == made);
      double best = std::numeric_limits<double>::infinity();
      std::string best_style;
      for (const auto& style : styles)  // (clang 14 cannot capture a structured binding)
        if (const auto m = makespan_with(point, [&](json& comm) { comm.update(style.second); });
            m && *m < best) {
          best = *m;
          best_style = style.first;
        }
      INFO("default " << run.info.lowering << ": " << made << ", best " << best_style << ": "
                      << best);
      CHECK(made <= 1.02 * best);
      CHECK(viz::lowering_stall(run).empty());
      ++points;
    }
  }
  CHECK(points >= 100);  // 12 bundled configs x 10 schedules x 2 M, less what they cannot run
}

TEST_CASE("default_comm.config_s_own_comm_keys", "[default_comm][config]") {
  // config.default_comm: a config's own comm keys win over the schedule's default
  auto load = [](const json& comm) {
    json j = {{"schedule", {{"kind", "zbv"}, {"ranks", 4}, {"microbatches", 8}}}};
    if (!comm.is_null()) j["comm"] = comm;
    return config::parse_config(j, "default-comm.json");
  };
  // No comm section, or one without a style: zbv's default, async with prefetch 2.
  for (const json& comm : {json(), json{{"latency", 0.1}}}) {
    const config::Config c = load(comm);
    CHECK(c.default_comm);
    CHECK(c.lowering.style == "async");
    CHECK(c.lowering.params.get("prefetch") == 2);
  }
  // A prefetch of its own is kept.
  CHECK(load({{"prefetch", 1}}).lowering.params.get("prefetch") == 1);
  // A style set explicitly keeps that style's own defaults, as before.
  const config::Config set = load({{"style", "async"}});
  CHECK_FALSE(set.default_comm);
  CHECK(set.lowering.params.get("prefetch") == 1);
  // interleaved-zb posts receives 2P ahead, looped-bfs all at the start.
  json j = {{"schedule", {{"kind", "interleaved-zb"}, {"ranks", 6}, {"microbatches", 12}}}};
  CHECK(config::parse_config(j, "izb.json").lowering.params.get("prefetch") == 12);
  j["schedule"]["kind"] = "looped-bfs";
  CHECK(config::parse_config(j, "bfs.json").lowering.params.get("prefetch") ==
        schedules::kPrefetchAll);
  // Every schedule says what its default is.
  for (const auto& g : schedules::Registry::instance().all())
    CHECK(g.default_comm.text.rfind(g.default_comm.style, 0) == 0);
}

TEST_CASE("default_comm.footnote_row_lowering_stalled", "[default_comm][compare]") {
  // viz.lowering_stall: the footnote of a row the lowering stalled
  // README's comparison with comm.style set to async (receives posted 1 op ahead): interleaved-zb
  // stalls, its sends waiting for receivers that post late; the other schedules do not.
  const config::Config base = config::load_config(
      std::string(PPSIM_SOURCE_DIR) + "/configs/1f1b.json", {"comm.style=async"});
  config::SweepAxes axes;
  axes.kinds = {"1f1b", "zb-h1", "interleaved-zb", "zbv", "dualpipev"};
  axes.microbatches = {16};
  axes.chunks = {2};
  std::vector<record::RunRecord> runs;
  for (const config::Config& point : config::sweep(base, axes)) runs.push_back(sim::analyze(point));
  REQUIRE(runs.size() == 5);
  for (const auto& run : runs) {
    INFO(run.info.name);
    const std::string note = viz::lowering_stall(run);
    if (run.info.schedule == "interleaved-zb") {
      CHECK_THAT(note, Catch::StartsWith("stalled by the lowering: "));
      CHECK_THAT(note, Catch::Contains("try comm.style unset, the schedule's default "
                                       "(async, prefetch 8)"));
      REQUIRE(run.send_hold);
      CHECK(run.send_hold->time > viz::kStallShare * run.metrics->makespan);
    } else {
      CHECK(note.empty());
    }
  }
  const std::string table = viz::compare_table(runs);
  CHECK_THAT(table, Catch::Contains("ok [1]\n"));
  CHECK_THAT(table, Catch::Contains("\n[1] 1f1b-p4-m8/interleaved-zb/M16/V2: stalled by the "
                                    "lowering: "));
  CHECK_THAT(table, !Catch::Contains("[2]"));
  // Under the schedule's default the stall is gone and the run is faster.
  const config::Config fair =
      config::load_config(std::string(PPSIM_SOURCE_DIR) + "/configs/1f1b.json");
  axes.kinds = {"interleaved-zb"};
  const record::RunRecord fixed = sim::analyze(config::sweep(fair, axes).at(0));
  CHECK(viz::lowering_stall(fixed).empty());
  CHECK(fixed.metrics->makespan < 0.85 * runs[2].metrics->makespan);
}

TEST_CASE("default_comm.runs_size_schedule_accepts_without", "[default_comm]") {
  // schedules.default_comm: runs every size the schedule accepts, without a deadlock
  // interleaved-zb with receives posted 1 op ahead deadlocks once a round holds P + 2
  // microbatches, looped-bfs from M = 16 at P = 4 (docs/SCHEDULES.md); their defaults do not.
  int runs = 0;
  for (const auto& g : schedules::Registry::instance().all())
    for (int P = 1; P <= 6; ++P)
      for (int V = 1; V <= 3; ++V)
        for (int M = 1; M <= 3 * P + 2; ++M) {
          json j = {{"schedule", {{"kind", g.name}, {"ranks", P}, {"microbatches", M}}},
                    {"costs", {{"forward", 1}, {"backward_input", 1}, {"backward_weight", 1}}},
                    {"comm", {{"latency", 0.05}}}};
          if (schedules::find_param(g.params, "chunks")) j["schedule"]["chunks"] = V;
          std::optional<record::RunRecord> run;
          try {
            run = sim::analyze(config::parse_config(j, "sizes.json"));
          } catch (const config::ConfigError& e) {
            INFO(e.what());
            CHECK(e.key().rfind("schedule.", 0) == 0);  // a size the schedule refuses
            continue;
          }
          INFO(g.name << " P=" << P << " V=" << V << " M=" << M << ": " << run->verdict().text());
          CHECK(run->ok());
          ++runs;
        }
  CHECK(runs > 800);  // 878 with the ten schedules of today
}
