// The resource model (config/resources.hpp, docs/LIMITS.md): the memory a config needs is
// estimated from its parameters before anything is built, and a config above the limit is a
// ConfigError naming the key that makes it big.
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include "ppsim/base/human_bytes.hpp"

#include "error_of.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/config/resources.hpp"
#include "ppsim/schedules/generator.hpp"
#include "ppsim/schedules/lowering.hpp"
#include "ppsim/sim/analysis.hpp"

namespace {

using namespace ppsim;
using Catch::Matchers::Contains;
using nlohmann::json;

config::Config parse(const std::string& kind, int P, int M, int V = 1,
                     const std::string& style = "async") {
  json j = {{"schedule", {{"kind", kind}, {"ranks", P}, {"microbatches", M}}},
            {"comm", {{"style", style}}}};
  if (V > 1) j["schedule"]["chunks"] = V;
  return config::parse_config(j, "cfg.json");
}

using test::error_of;

double need(const config::Config& c, config::Workload w) {
  const config::OpEstimate e = config::estimate_ops(c);
  return config::kBaseBytes + e.ops * config::bytes_per_op(w) + e.ranks * config::kBytesPerRank;
}

}  // namespace

TEST_CASE("resources.op_estimate_linear_ranks_x", "[resources]") {
  // the op estimate is linear in ranks x chunks x microbatches
  const double one = config::estimate_ops(parse("1f1b", 4, 8)).ops;
  CHECK(one == 4 * 8 * config::kOpsPerStageMicrobatch);
  CHECK(config::estimate_ops(parse("1f1b", 4, 16)).ops == 2 * one);
  CHECK(config::estimate_ops(parse("1f1b", 8, 16)).ops == 4 * one);
  CHECK(config::estimate_ops(parse("interleaved-1f1b", 4, 8, 3)).ops == 3 * one);
  // Defaults count: gpipe and 1f1b have chunks fixed at 1.
  CHECK(config::estimate_ops(parse("gpipe", 4, 8)).ops == one);
}

TEST_CASE("resources.op_estimate_bounds_lowered_program", "[resources]") {
  // the op estimate bounds the lowered program of every schedule and style
  for (const std::string style : {"async", "async-send", "batched", "blocking"}) {
    for (const auto& [kind, V] : {std::pair{"1f1b", 1}, {"gpipe", 1}, {"interleaved-1f1b", 2}}) {
      const config::Config c = parse(kind, 4, 8, V, style);
      const config::Prepared p = config::prepare(c);
      INFO(kind << " " << style);
      CHECK(static_cast<double>(p.program->total_ops()) <= config::estimate_ops(c).ops);
      // ... and not by much: the estimate is for refusing, not for scaring.
      CHECK(static_cast<double>(p.program->total_ops()) >= 0.6 * config::estimate_ops(c).ops);
    }
  }
}

TEST_CASE("resources.memory_needed_documented_bytes_per", "[resources]") {
  // the memory needed is the documented bytes per op, per workload
  // docs/LIMITS.md states these figures; change both together.
  CHECK(config::bytes_per_op(config::Workload::program) == 64);
  CHECK(config::bytes_per_op(config::Workload::run) == 80);
  CHECK(config::bytes_per_op(config::Workload::trace) == 200);
  const config::Config c = parse("1f1b", 8, 20000);
  const double run = need(c, config::Workload::run);
  // Just above the need passes, just below is refused.
  const auto above = static_cast<std::uint64_t>(run) + 1;
  const auto below = static_cast<std::uint64_t>(run) - 1;
  CHECK_NOTHROW(config::check_resources(c, {above, config::Workload::run}));
  CHECK_THROWS_AS(config::check_resources(c, {below, config::Workload::run}), config::ConfigError);
  // A trace costs more than a run.
  CHECK_THROWS_AS(config::check_resources(c, {above, config::Workload::trace}),
                  config::ConfigError);
}

TEST_CASE("resources.config_above_max_memory_refused", "[resources]") {
  // a config above --max-memory is refused naming the key that makes it big
  const std::uint64_t limit = 64ull << 20;  // 64 MiB
  SECTION("microbatches") {
    const config::Config c = parse("1f1b", 4, 1'000'000);
    const config::ConfigError e = error_of([&] { config::prepare(c, {limit}); });
    CHECK(e.key() == "schedule.microbatches");
    CHECK(e.source() == "cfg.json");
    CHECK_THAT(e.what(), Contains("key 'schedule.microbatches': too large for memory: the run "
                                  "needs about 2.4 GiB") &&
                             Contains("schedule.ranks=4 x schedule.chunks=1 x "
                                      "schedule.microbatches=1000000 x 8 = 3.2e+07 ops") &&
                             Contains("above --max-memory 64.0 MiB") &&
                             Contains("lower schedule.microbatches or raise --max-memory"));
  }
  SECTION("ranks") {
    const config::Config c = parse("1f1b", 100'000, 4);
    const config::ConfigError e = error_of([&] { config::prepare(c, {limit}); });
    CHECK(e.key() == "schedule.ranks");
    CHECK_THAT(e.what(), Contains("lower schedule.ranks"));
  }
  SECTION("through sim::analyze, with a trace the stricter bound") {
    const config::Config c = parse("1f1b", 8, 20000);
    const auto between = static_cast<std::uint64_t>(need(c, config::Workload::run)) + 1;
    CHECK_NOTHROW(sim::analyze(c, {.max_memory = between}));
    const config::ConfigError e =
        error_of([&] { sim::analyze(c, {.trace = true, .max_memory = between}); });
    CHECK(e.key() == "schedule.microbatches");
    CHECK_THAT(e.what(), Contains("the run --trace needs about"));
  }
  SECTION("0 is no limit, but the 32-bit index bound stays") {
    CHECK_NOTHROW(config::check_resources(parse("1f1b", 1000, 100000), {0}));
    const config::ConfigError e =
        error_of([&] { config::prepare(parse("1f1b", 4, 100'000'000), {0}); });
    CHECK(e.key() == "schedule.microbatches");
    CHECK_THAT(e.what(), Contains("too large to index") && Contains("32-bit"));
  }
  SECTION("custom programs: estimated from the ops written") {
    const json j = {
        {"schedule", {{"kind", "custom"}, {"ops", {"0F0,0SEND_F0,0B0", "1RECV_F0,1B0"}}}}};
    const config::Config c = config::parse_config(j, "cfg.json");
    CHECK(config::estimate_ops(c).ops == 5);
    const config::ConfigError e = error_of([&] { config::prepare(c, {1024}); });
    CHECK(e.key() == "schedule.ops");
    CHECK_THAT(e.what(), Contains("5 ops written in schedule.ops"));
  }
  SECTION("custom programs of compute ops only: with what their lowering adds") {
    const json j = {{"schedule", {{"kind", "custom"}, {"ops", {"0F0,0B0,1F0", "0F1,1B0"}}}}};
    const config::Config c = config::parse_config(j, "cfg.json");
    CHECK(config::estimate_ops(c).ops == 25);
    const config::ConfigError e = error_of([&] { config::prepare(c, {1024}); });
    CHECK_THAT(e.what(), Contains("5 ops written in schedule.ops x 5 once lowered"));
  }
}

TEST_CASE("resources.default_limit_fraction_this_machine", "[resources]") {
  // the default limit is a fraction of this machine's memory
  const std::uint64_t d = config::default_max_memory();
  CHECK(d > 0);
  CHECK(d <= config::kDefaultMaxMemoryCap);
  CHECK(config::ResourceLimits{}.max_memory == d);
  CHECK(sim::AnalyzeOptions{}.max_memory == d);
}

TEST_CASE("resources.bytes_binary_suffixes", "[resources]") {
  // max-memory values: bytes with binary suffixes
  CHECK(config::parse_bytes("0") == 0);
  CHECK(config::parse_bytes("1000") == 1000);
  CHECK(config::parse_bytes("512M") == 512ull << 20);
  CHECK(config::parse_bytes("8G") == 8ull << 30);
  CHECK(config::parse_bytes("8g") == 8ull << 30);
  CHECK(config::parse_bytes("1.5GiB") == 3ull << 29);
  CHECK(config::parse_bytes("2KB") == 2048);
  CHECK(config::parse_bytes("1T") == 1ull << 40);
  CHECK_THROWS_AS(config::parse_bytes(""), std::invalid_argument);
  CHECK_THROWS_AS(config::parse_bytes("lots"), std::invalid_argument);
  // A positive limit below one byte rounded to 0, which means no limit at all: refused.
  CHECK_THROWS_AS(config::parse_bytes("0.5"), std::invalid_argument);
  CHECK_THROWS_AS(config::parse_bytes("0.0001K"), std::invalid_argument);
  CHECK(config::parse_bytes("0.0") == 0);
  CHECK_THROWS_AS(config::parse_bytes("12X"), std::invalid_argument);
  CHECK_THROWS_AS(config::parse_bytes("-1G"), std::invalid_argument);
  CHECK_THROWS_AS(config::parse_bytes("1e30"), std::invalid_argument);
  CHECK(base::human_bytes(11.7 * (1ull << 30), 1) == "11.7 GiB");
  CHECK(base::human_bytes(100, 1) == "100 B");
}

TEST_CASE("resources.op_estimate_bounds_registered_schedule", "[resources]") {
  // the op estimate bounds every registered schedule under every comm style
  // Each generator's own test parameters, plus many ranks and few microbatches (zbv plans
  // max(M, 2P-1) microbatches and drops the missing ones; dualpipe needs M >= 2P).
  for (const auto& g : schedules::Registry::instance().all()) {
    std::vector<schedules::ScheduleParams> cases = g.test_params;
    schedules::ScheduleParams wide = g.test_params.front();
    wide.set("ranks", 16);
    if (g.name == "dualpipe" || g.name == "dualpipev") wide.set("microbatches", 32);
    cases.push_back(wide);
    for (const auto& params : cases) {
      for (const auto& style : schedules::LoweringRegistry::instance().all()) {
        json j = {{"schedule", {{"kind", g.name}}}, {"comm", {{"style", style.name}}}};
        for (const auto& [k, v] : params.values()) j["schedule"][k] = v;
        std::optional<config::Prepared> p;
        try {
          p.emplace(config::prepare(config::parse_config(j, "cfg.json")));
        } catch (const std::exception&) {
          continue;  // a style that refuses this schedule (megatron, torch)
        }
        INFO(j.dump());
        // Within the allocator slack bytes_per_op carries (about 1/3): split backwards (I + W)
        // and a rank's last WAIT take the lowered programs up to ~20% above 8 ops per cell, but
        // no schedule grows faster than ranks x chunks x microbatches.
        CHECK(static_cast<double>(p->program->total_ops()) <=
              1.25 * config::estimate_ops(config::parse_config(j, "cfg.json")).ops);
      }
    }
  }
}

TEST_CASE("resources.more_run_once_their_estimates", "[resources]") {
  // parallel points: no more run at once than their estimates fit in --max-memory
  const std::vector<config::Config> points = {parse("1f1b", 4, 8), parse("1f1b", 64, 512)};
  const double big = need(points[1], config::Workload::run);
  auto jobs = [&](double limit, unsigned wanted) {
    return config::jobs_within_memory(
        points, {static_cast<std::uint64_t>(limit), config::Workload::run}, wanted);
  };
  CHECK(jobs(big * 3.5, 16) == 3);  // three of the largest fit, four would not
  CHECK(jobs(big * 3.5, 2) == 2);
  CHECK(jobs(big * 0.5, 16) == 1);  // above the limit alone: check_resources refuses it
  CHECK(jobs(0, 16) == 16);         // --max-memory 0: unlimited
  CHECK(jobs(big * 100, 0) == 1);
}
