// Sweeps keep the model fixed while the schedule, M and V vary.
#include <catch2/catch.hpp>

#include "ppsim/config/prepare.hpp"
#include "ppsim/config/sweep.hpp"
#include "ppsim/schedules/generator.hpp"
#include "ppsim/sim/analysis.hpp"

using namespace ppsim;

namespace {
config::Config base_config() {
  return config::parse_config(nlohmann::json::parse(R"({
    "name": "base",
    "schedule": {"kind": "1f1b", "ranks": 4, "microbatches": 8},
    "costs": {"forward": 2.0, "backward_input": 2.0, "backward_weight": 2.0},
    "memory": {"activation_bytes": 1000, "static_bytes": 600}
  })"),
                              "base.json");
}
}  // namespace

TEST_CASE("sweep.config_per_schedule_m_v", "[sweep]") {
  // Sweep: one config per (schedule, M, V), chunks only for schedules that take them
  const auto configs =
      config::sweep(base_config(), {{"gpipe", "1f1b", "interleaved-1f1b"}, {8, 16}, {2, 3}});
  REQUIRE(configs.size() == 2 + 2 + 2 * 2);
  CHECK(configs[0].name == "base/gpipe/M8");
  CHECK(config::prepare(configs[0]).program->chunks() == 1);
  CHECK(configs.back().name == "base/interleaved-1f1b/M16/V3");
  CHECK(config::prepare(configs.back()).program->chunks() == 3);
}

TEST_CASE("sweep.each_schedule_at_its_own_default_chunks", "[sweep]") {
  // A config that names no chunks runs each swept schedule at that schedule's declared default
  // (`ppsim list`), so interleaved schedules are not run at 1F1B's one chunk; chunks the config
  // gives hold for every schedule that takes them.
  const auto configs = config::sweep(
      base_config(), {{"1f1b", "interleaved-1f1b", "looped-bfs", "interleaved-zb"}, {}, {}});
  REQUIRE(configs.size() == 4);
  for (std::size_t i = 1; i < configs.size(); ++i) {
    const auto* g = schedules::Registry::instance().find(configs[i].kind);
    REQUIRE(g);
    const auto* chunks = schedules::find_param(g->params, "chunks");
    REQUIRE(chunks);
    INFO(configs[i].kind);
    CHECK(config::prepare(configs[i]).program->chunks() == static_cast<int>(chunks->default_value));
    CHECK(config::prepare(configs[i]).program->chunks() >= 2);
  }
  nlohmann::json three = base_config().raw;
  three["schedule"]["kind"] = "interleaved-1f1b";
  three["schedule"]["chunks"] = 3;
  const auto given =
      config::sweep(config::parse_config(three, "three.json"), {{"looped-bfs", "zbv"}, {}, {}});
  CHECK(config::prepare(given[0]).program->chunks() == 3);
  CHECK(config::prepare(given[1]).program->chunks() == 2);  // zbv takes exactly 2
}

TEST_CASE("sweep.sweep_over_chunks_keeps_per", "[sweep]") {
  // Sweep over chunks keeps per-rank work and memory: costs and bytes scale by V0/V, so
  // interleaved bubble_vs_ideal = (P-1)/(V*M) against the same ideal as 1F1B
  const auto configs = config::sweep(base_config(), {{"1f1b", "interleaved-1f1b"}, {8}, {2, 4}});
  REQUIRE(configs.size() == 3);
  const auto one = sim::analyze(configs[0]);
  for (std::size_t i = 1; i < configs.size(); ++i) {
    const config::Prepared prepared = config::prepare(configs[i]);
    const auto a = sim::analyze(prepared);
    REQUIRE(a.ok());
    REQUIRE(a.metrics);
    REQUIRE(one.metrics);
    const int V = prepared.program->chunks();
    for (int r = 0; r < 4; ++r)
      CHECK(a.metrics->per_rank[r].busy == Approx(one.metrics->per_rank[r].busy));
    CHECK(a.metrics->bubble_vs_ideal == Approx(3.0 / (V * 8)));
    CHECK(prepared.model.memory.activation_bytes == 1000 / V);
    // static bytes are per chunk: V chunks of 600/V each
    CHECK(a.metrics->per_rank[0].peak_memory_bytes >= 600);
  }
  REQUIRE(one.metrics);
  CHECK(one.metrics->bubble_vs_ideal == Approx(3.0 / 8));
}

TEST_CASE("sweep.sweep_refuses_what_cannot_remap", "[sweep]") {
  // Sweep refuses what it cannot remap
  auto j = base_config().raw;
  j["costs"]["per_stage"] = {{"1", {{"forward", 3.0}}}};
  const auto with_overrides = config::parse_config(j, "base.json");
  CHECK_THROWS_AS(config::sweep(with_overrides, {{"interleaved-1f1b"}, {8}, {2}}),
                  config::ConfigError);
  CHECK_NOTHROW(config::sweep(with_overrides, {{"gpipe"}, {8, 16}, {}}));
}
