// Collectives measured by `ppsim real --calibrate` (nccl transport): their fit to the model's
// form, the fragment that carries them, and what that fragment sets in a config (docs/MODEL.md,
// "Collectives"; docs/EXECUTOR.md).
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "ppsim/config/prepare.hpp"
#include "ppsim/profile/calibration.hpp"
#include "ppsim/real/collective_fit.hpp"

using namespace ppsim;
using model::Collective;
using nlohmann::json;

namespace {

// Samples exactly on latency + factor(n) · bytes / bandwidth.
std::vector<real::CollectiveSample> exact(Collective c, int n, double latency, double bandwidth) {
  std::vector<real::CollectiveSample> out;
  for (double bytes : {1 << 20, 8 << 20, 64 << 20})
    out.push_back({c, n, bytes, latency + real::bus_factor(c, n) * bytes / bandwidth});
  return out;
}

json llama_config() {
  return {{"schedule", {{"kind", "1f1b"}, {"ranks", 4}, {"microbatches", 8}}},
          {"model",
           {{"layers", 8},
            {"hidden", 4096},
            {"heads", 32},
            {"vocab", 32000},
            {"sequence_length", 2048},
            {"tensor_parallel", 8},
            {"data_parallel", 2}}},
          {"hardware", {{"gpu", "h100-sxm"}}}};
}

}  // namespace

TEST_CASE("collective_calibration.bus_factors_are_nccl_tests", "[collective-calibration]") {
  // nccl-tests doc/PERFORMANCE.md: busbw = algbw x 2(n-1)/n (all-reduce), (n-1)/n (all-gather,
  // reduce-scatter, all-to-all), 1 (broadcast).
  CHECK(real::bus_factor(Collective::all_reduce, 8) == 2.0 * 7 / 8);
  CHECK(real::bus_factor(Collective::all_gather, 8) == 7.0 / 8);
  CHECK(real::bus_factor(Collective::reduce_scatter, 4) == 3.0 / 4);
  CHECK(real::bus_factor(Collective::all_to_all, 2) == 0.5);
  CHECK(real::bus_factor(Collective::broadcast, 8) == 1.0);
}

TEST_CASE("collective_calibration.fit_recovers_latency_and_bandwidth", "[collective-calibration]") {
  auto samples = exact(Collective::all_reduce, 8, 12e-6, 230e9);
  const auto more = exact(Collective::all_gather, 8, 7e-6, 180e9);
  samples.insert(samples.end(), more.begin(), more.end());
  const auto fits = real::fit_collectives(samples);
  REQUIRE(fits.size() == 2);
  const auto& ar = fits.at(Collective::all_reduce);
  CHECK(ar.ranks == 8);
  CHECK(ar.samples == 3);
  CHECK(ar.latency == Approx(12e-6).epsilon(1e-9));
  CHECK(ar.bus_bandwidth == Approx(230e9).epsilon(1e-9));
  CHECK(fits.at(Collective::all_gather).bus_bandwidth == Approx(180e9).epsilon(1e-9));
  // One size: nothing to fit a bandwidth to; the mean time is the latency.
  const auto one = real::fit_collectives({{Collective::broadcast, 4, 1 << 20, 3e-5}});
  CHECK(one.at(Collective::broadcast).bus_bandwidth == 0);
  CHECK(one.at(Collective::broadcast).latency == 3e-5);
  // One rank or no time: not a sample.
  CHECK(real::fit_collectives(
            {{Collective::all_reduce, 1, 1 << 20, 1e-5}, {Collective::all_reduce, 8, 1 << 20, 0}})
            .empty());
}

TEST_CASE("collective_calibration.fragment_sets_the_hardware_constants",
          "[collective-calibration]") {
  const json frag = {{"collectives", profile::collectives_fragment(
                                         exact(Collective::all_reduce, 8, 20e-6, 0.5 * 450e9))}};
  REQUIRE(frag["collectives"]["ranks"] == 8);
  const json cfg = llama_config();
  const auto target = [&] { return config::prepare(config::parse_config(cfg, "c.json")); };
  const auto sets = profile::calibration_overrides(frag, "cal.json", target);
  REQUIRE(sets.size() == 2);
  CHECK(sets[0].rfind("hardware.collectives.latency=", 0) == 0);
  // h100-sxm's NVLink is 450 GB/s one way: half of it measured is an efficiency of 0.5.
  CHECK(sets[1] == "hardware.collectives.bus_efficiency=0.5");
  // Applied, they slow the tensor-parallel collectives the F op holds.
  json slow = cfg;
  slow["hardware"]["collectives"] = {{"latency", 20e-6}, {"bus_efficiency", 0.5}};
  const auto base = target();
  const auto cal = config::prepare(config::parse_config(slow, "c.json"));
  CHECK(cal.derivation->stages[1].times.forward.tp > base.derivation->stages[1].times.forward.tp);
  // A config without hardware has no collectives to time: nothing set, nothing refused.
  json plain = {{"schedule", {{"kind", "1f1b"}, {"ranks", 2}, {"microbatches", 4}}}};
  const auto none = profile::calibration_overrides(
      frag, "cal.json", [&] { return config::prepare(config::parse_config(plain, "p.json")); });
  CHECK(none.empty());
}

TEST_CASE("collective_calibration.bad_fragments_name_the_key", "[collective-calibration]") {
  const json cfg = llama_config();
  const auto target = [&] { return config::prepare(config::parse_config(cfg, "c.json")); };
  auto error_of = [&](const json& frag) {
    try {
      profile::calibration_overrides(frag, "cal.json", target);
    } catch (const config::ConfigError& e) {
      return e.source() + ": " + e.key();
    }
    return std::string("accepted");
  };
  CHECK(error_of({{"collectives", {{"ranks", 8}}}}) == "cal.json: collectives.all_reduce");
  CHECK(error_of({{"collectives", {{"all_reduce", {{"latency", 1e-5}}}}}}) ==
        "cal.json: collectives.ranks");
  CHECK(error_of({{"collectives",
                   {{"ranks", 8}, {"all_reduce", {{"latency", -1}, {"bus_bandwidth", 1e11}}}}}}) ==
        "cal.json: collectives.all_reduce.latency");
  CHECK(
      error_of({{"collectives", {{"ranks", 8}, {"all_reduce", {{"latency", 1e-5}}}, {"x", 1}}}}) ==
      "cal.json: collectives.x");
}
