// costs.overlapped_fb: the duration of an overlapped F&B pair (OVERLAP_F_B) is a time, or a
// fraction of its F + B, or (by default) F + B; per stage by the stage of the pair's forward.
#include <catch2/catch.hpp>

#include "error_of.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/config/sweep.hpp"
#include "ppsim/model/op_duration.hpp"
#include "ppsim/sim/analysis.hpp"

using namespace ppsim;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nlohmann::json;

namespace {

const std::string kOverlapSource = "ov.json";

// One rank holding stages 0 and 1, with two overlapped pairs: the first pairs F(0,1) with
// B(1,0), the second F(1,1) with B(0,0). F = 1, B = 2 per stage, communication free.
json two_pairs() {
  return json::parse(R"({
    "schedule": {"kind": "custom",
                 "ops": ["0F0,1F0,(0F1;1B0)OVERLAP_F_B,(1F1;0B0)OVERLAP_F_B,1B1,0B1"]},
    "costs": {"forward": 1, "backward_input": 1.5, "backward_weight": 0.5}
  })");
}

double makespan(const json& j) {
  const auto rec = sim::analyze(config::parse_config(j, kOverlapSource));
  REQUIRE(rec.ok());
  return rec.metrics->makespan;
}

config::ConfigError error_for(const json& j) {
  return test::error_of([&] { (void)config::prepare(config::parse_config(j, kOverlapSource)); });
}

}  // namespace

// Four plain ops (F, F, B, B: 1 + 1 + 2 + 2 = 6) and two pairs one after the other on one rank:
// the makespan is 6 + pair(stage 0) + pair(stage 1), so it shows which duration each pair got.
TEST_CASE("overlapped_fb.default_f_b_time_fraction", "[overlapped_fb]") {
  // overlapped_fb: default F + B, a time, a fraction, per stage by the forward's stage
  json j = two_pairs();
  CHECK(makespan(j) == Approx(6 + 3 + 3));  // today's behaviour: the sum of the parts

  j["costs"]["overlapped_fb"] = 2.25;
  CHECK(makespan(j) == Approx(6 + 2.25 + 2.25));

  j["costs"]["overlapped_fb"] = {{"fraction", 0.5}};
  CHECK(makespan(j) == Approx(6 + 1.5 + 1.5));

  // Stage 0's own value replaces the top-level one for the pair whose forward runs stage 0
  // (F(0,1) with B(1,0)); the other pair keeps the top-level fraction.
  j["costs"]["per_stage"]["0"]["overlapped_fb"] = 1;
  CHECK(makespan(j) == Approx(6 + 1 + 1.5));

  // A per-stage fraction replaces a top-level time.
  json k = two_pairs();
  k["costs"]["overlapped_fb"] = 2.5;
  k["costs"]["per_stage"]["1"]["overlapped_fb"] = {{"fraction", 0.25}};
  CHECK(makespan(k) == Approx(6 + 2.5 + 0.75));

  // A fraction scales the pair's own parts: per-stage F and B costs count.
  json s = two_pairs();
  s["costs"]["overlapped_fb"] = {{"fraction", 0.5}};
  s["costs"]["per_stage"]["1"]["forward"] = 3;  // pair 2 = F(1,1) + B(0,0) = 3 + 2
  // plain: F(0,0)=1, F(1,0)=3, B(1,1)=2, B(0,1)=2; pairs 0.5*(1+2) and 0.5*(3+2).
  CHECK(makespan(s) == Approx(8 + 1.5 + 2.5));
}

TEST_CASE("overlapped_fb.executor_simulator_read_same_duration", "[overlapped_fb]") {
  // overlapped_fb: the executor and the simulator read the same duration
  json j = two_pairs();
  j["costs"]["overlapped_fb"] = {{"fraction", 0.8}};
  const auto prepared = config::prepare(config::parse_config(j, kOverlapSource));
  const auto& p = *prepared.program;
  int pairs = 0;
  for (const auto& op : p.ops(0)) {
    if (op.kind != schedules::OpKind::OVERLAP_F_B) continue;
    ++pairs;
    CHECK(*model::op_duration(prepared.model.costs, p, 0, op) == Approx(0.8 * 3));
  }
  CHECK(pairs == 2);
}

TEST_CASE("overlapped_fb.anything_but_time_0_fraction", "[overlapped_fb][config]") {
  // overlapped_fb: anything but a time >= 0 or {"fraction": 0 < x <= 1} is refused
  auto check = [](const json& value, const std::string& key, const std::string& expected,
                  bool per_stage = false) {
    json j = two_pairs();
    if (per_stage)
      j["costs"]["per_stage"]["1"]["overlapped_fb"] = value;
    else
      j["costs"]["overlapped_fb"] = value;
    const auto e = error_for(j);
    INFO("value " << value.dump() << ": " << e.what());
    CHECK(e.source() == kOverlapSource);
    CHECK(e.key() == key);
    CHECK_THAT(e.what(),
               StartsWith(kOverlapSource + ": key '" + key + "': ") && Contains(expected));
  };
  const std::string either = "expected a time >= 0 or {\"fraction\": x} with 0 < x <= 1";
  check("80%", "costs.overlapped_fb", either);
  check(json::array({0.8}), "costs.overlapped_fb", either);
  check(true, "costs.overlapped_fb", either);
  check(json::object(), "costs.overlapped_fb", either);
  check(-1, "costs.overlapped_fb", "expected a number >= 0");
  check({{"fraction", 0}}, "costs.overlapped_fb.fraction", "expected a number with 0 < x <= 1");
  check({{"fraction", 1.5}}, "costs.overlapped_fb.fraction", "expected a number with 0 < x <= 1");
  check({{"fraction", -0.5}}, "costs.overlapped_fb.fraction", "expected a number with 0 < x <= 1");
  check({{"fraction", "80%"}}, "costs.overlapped_fb.fraction", "got string");
  check({{"fraction", 0.5}, {"percent", 50}}, "costs.overlapped_fb.percent", "unknown key");
  check({{"time", 2}}, "costs.overlapped_fb.time", "unknown key");
  check("50%", "costs.per_stage.1.overlapped_fb", either, true);
  check({{"fraction", 2}}, "costs.per_stage.1.overlapped_fb.fraction", "0 < x <= 1", true);
}

// The upper bound on a run's length (config/resources.cpp) counts a pair given a time as that
// time, so a pair longer than its parts cannot slip past it.
TEST_CASE("overlapped_fb.time_too_large_exact_times", "[overlapped_fb][config]") {
  // overlapped_fb: a time too large for exact times is refused, naming the key
  json j = two_pairs();
  j["costs"]["overlapped_fb"] = 1e300;
  const auto e = error_for(j);
  CHECK(e.key() == "costs.overlapped_fb");
  CHECK_THAT(e.what(), Contains("the run could last up to"));
}

// A sweep over chunks keeps the model fixed by scaling per-stage costs by V0/V; a pair's time is a
// per-stage cost like the others, a fraction is already relative to its parts.
TEST_CASE("overlapped_fb.chunk_sweep_scales_time_v0", "[overlapped_fb][sweep]") {
  // overlapped_fb: a chunk sweep scales a time by V0/V and keeps a fraction
  json j = json::parse(R"({"schedule": {"kind": "1f1b", "ranks": 4, "microbatches": 8},
                           "costs": {"overlapped_fb": 3}})");
  const auto time =
      config::sweep(config::parse_config(j, kOverlapSource), {{"interleaved-1f1b"}, {}, {2, 4}});
  REQUIRE(time.size() == 2);
  CHECK(*time[0].costs.overlapped_fb == Approx(3.0 / 2));
  CHECK(*time[1].costs.overlapped_fb == Approx(3.0 / 4));
  j["costs"]["overlapped_fb"] = {{"fraction", 0.75}};
  const auto fraction =
      config::sweep(config::parse_config(j, kOverlapSource), {{"interleaved-1f1b"}, {}, {2}});
  REQUIRE(fraction.size() == 1);
  CHECK_FALSE(fraction[0].costs.overlapped_fb);
  CHECK(*fraction[0].costs.overlapped_fb_fraction == Approx(0.75));
}
