// Calibration fragments (docs/PROFILES.md, profile/calibration.hpp): applied key by key, in their
// own time unit, carried to another layout only when every stage is measured, and every bad key
// or value blamed on the fragment's file and key.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "error_of.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/profile/calibration.hpp"
#include "ppsim/profile/kineto.hpp"
#include "ppsim/sim/analysis.hpp"

using namespace ppsim;
using nlohmann::json;

namespace fragments_test {

json config_of(const std::string& kind, const std::string& unit = "ms") {
  return {{"time_unit", unit},
          {"schedule", {{"kind", kind}, {"ranks", 4}, {"microbatches", 8}}},
          {"costs", {{"forward", 1.0}, {"backward_input", 1.0}, {"backward_weight", 1.0}}}};
}

std::vector<std::string> overrides(const json& frag, const json& cfg) {
  return profile::calibration_overrides(
      frag, "cal.json", [&] { return config::prepare(config::parse_config(cfg, "c.json")); });
}

double makespan(json cfg, const std::vector<std::string>& sets) {
  for (const auto& s : sets) config::apply_override(cfg, s);
  return sim::analyze(config::prepare(config::parse_config(cfg, "c.json", sets))).metrics->makespan;
}

// "cal.json: KEY" of the error the fragment gives, or "accepted".
std::string error_of(const json& frag, const json& cfg) {
  try {
    overrides(frag, cfg);
  } catch (const config::ConfigError& e) {
    return e.source() + ": " + e.key();
  }
  return "accepted";
}

const json kLayout = {{"stage_ranks", {0, 1, 2, 3}}};

}  // namespace fragments_test

using namespace fragments_test;

TEST_CASE("fragments.apply_key_by_key", "[calibration]") {
  // With or without the layout it was measured on, a fragment sets what it gives and no more:
  // stage 0's I and W stay the config's.
  const json cfg = config_of("1f1b");
  const json per = {{"per_stage", {{"0", {{"forward", 2}}}}}};
  CHECK(overrides({{"costs", per}, {"layout", kLayout}}, cfg) ==
        std::vector<std::string>{"costs.per_stage.0.forward=2.0"});
  CHECK(overrides({{"costs", per}}, cfg) ==
        std::vector<std::string>{"costs.per_stage.0.forward=2.0"});
  // Top-level keys keep the config's per-stage and other keys.
  CHECK(overrides({{"costs", {{"forward", 3}, {"launch_overhead", 0.5}}}}, cfg) ==
        std::vector<std::string>{"costs.forward=3.0", "costs.launch_overhead=0.5"});
}

TEST_CASE("fragments.unknown_keys_and_stage_keys_refused", "[calibration]") {
  const json cfg = config_of("1f1b");
  for (const json& layout : {json(nullptr), kLayout}) {
    auto with = [&](json costs) {
      json f = {{"costs", std::move(costs)}};
      if (!layout.is_null()) f["layout"] = layout;
      return f;
    };
    INFO("layout " << layout.dump());
    CHECK(error_of(with({{"per_stage", {{"0", {{"foo", 1}}}}}}), cfg) ==
          "cal.json: costs.per_stage.0.foo");
    for (const char* key : {"00", "+1", " 1", "1.0", "4", "x"})
      CHECK(error_of(with({{"per_stage", {{key, {{"forward", 1}}}}}}), cfg) ==
            "cal.json: costs.per_stage." + std::string(key));
    CHECK(error_of(with({{"fwd", 1}}), cfg) == "cal.json: costs.fwd");
  }
  CHECK(error_of({{"costs", {{"forward", 1}}}, {"cost", 1}}, cfg) == "cal.json: cost");
  CHECK(error_of({{"comm", {{"latency", 1}, {"bandwith", 1}}}}, cfg) == "cal.json: comm.bandwith");
}

TEST_CASE("fragments.unmeasured_stages_refused_across_layouts", "[calibration]") {
  // Stage 0 measured alone, carried to ZBV's V shape: ranks 1-3 would run no work.
  const json only0 = {{"costs", {{"per_stage", {{"0", {{"forward", 2}, {"backward", 2}}}}}}},
                      {"layout", kLayout}};
  CHECK(error_of(only0, config_of("zbv")) == "cal.json: costs.per_stage.1");
  // A kind some stages give and others not.
  json part = {{"layout", kLayout}, {"costs", {{"per_stage", json::object()}}}};
  for (const char* s : {"0", "1", "2", "3"}) part["costs"]["per_stage"][s] = {{"forward", 1}};
  part["costs"]["per_stage"]["2"]["backward"] = 2;
  CHECK(error_of(part, config_of("zbv")) == "cal.json: costs.per_stage.0");
  // Every stage's forward and nothing else: the forward is carried, the backward the config's.
  part["costs"]["per_stage"]["2"].erase("backward");
  const auto sets = overrides(part, config_of("zbv"));
  CHECK(sets.size() == 8);
  CHECK(sets[0] == "costs.per_stage.0.forward=0.5");
  // A rank that ran no stage.
  CHECK(error_of({{"costs", {{"forward", 1}}}, {"layout", {{"stage_ranks", {0, 0, 2, 3}}}}},
                 config_of("1f1b")) == "cal.json: layout.stage_ranks");
}

TEST_CASE("fragments.time_unit_converted", "[calibration]") {
  const json frag = {{"time_unit", "ms"},
                     {"costs", {{"forward", 2}, {"per_stage", {{"1", {{"backward", 4}}}}}}},
                     {"comm", {{"latency", 0.5}, {"bandwidth", 1000}}}};
  // Onto a config in us: times x 1000, bytes per time unit / 1000.
  CHECK(overrides(frag, config_of("1f1b", "us")) ==
        std::vector<std::string>{"costs.forward=2000.0", "costs.per_stage.1.backward_input=2000.0",
                                 "costs.per_stage.1.backward_weight=2000.0", "comm.latency=500.0",
                                 "comm.bandwidth=1.0"});
  // Its own unit, or none: as given.
  json plain = frag;
  plain.erase("time_unit");
  for (const json& f : {frag, plain})
    CHECK(overrides(f, config_of("1f1b"))[0] == "costs.forward=2.0");
  CHECK(overrides(plain, config_of("1f1b", "us"))[0] == "costs.forward=2.0");
  CHECK(error_of({{"time_unit", "min"}, {"costs", {{"forward", 1}}}}, config_of("1f1b")) ==
        "cal.json: time_unit");
  // The same run predicted in either unit.
  const json whole = {{"time_unit", "ms"},
                      {"costs", {{"forward", 2}, {"backward_input", 1}, {"backward_weight", 1.5}}},
                      {"comm", {{"latency", 0.5}}}};
  const double ms = makespan(config_of("1f1b"), overrides(whole, config_of("1f1b")));
  const double us = makespan(config_of("1f1b", "us"), overrides(whole, config_of("1f1b", "us")));
  CHECK(us == Approx(ms * 1000));
  // The writers say their unit.
  model::Model m;
  m.costs = model::CostModel::uniform(2, {});
  CHECK(profile::calibration_fragment(m)["time_unit"] == "ms");
  CHECK(profile::calibration_fragment(m, nullptr, "us")["time_unit"] == "us");
}

TEST_CASE("fragments.values_out_of_bounds_name_the_fragment", "[calibration]") {
  const json cfg = config_of("1f1b");
  for (const json& v : {json(1e300), json(-1), json("2"), json(nullptr)}) {
    INFO(v.dump());
    const json frag = {{"costs", {{"per_stage", {{"0", {{"forward", v}}}}}}}};
    if (v.is_null()) {  // null is absent: nothing set
      CHECK(error_of(frag, cfg) == "cal.json: costs");
      continue;
    }
    CHECK(error_of(frag, cfg) == "cal.json: costs.per_stage.0.forward");
    CHECK(error_of({{"calibrated", frag}}, cfg) ==
          "cal.json: calibrated.costs.per_stage.0.forward");
  }
  // In range in its unit, out of range in the config's.
  CHECK(error_of({{"time_unit", "s"}, {"costs", {{"forward", 1e9}}}}, config_of("1f1b", "ns")) ==
        "cal.json: costs.forward");
  CHECK(error_of({{"costs", {{"overlapped_fb", {{"fraction", 2}}}}}}, cfg) ==
        "cal.json: costs.overlapped_fb.fraction");
}
