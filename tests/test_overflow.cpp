// Numbers whose times or byte sums would overflow are refused by prepare() naming the key
// (config::check_numbers, docs/LIMITS.md); the largest accepted ones give exact, finite figures.
#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>
#include <string>

#include "ppsim/config/prepare.hpp"
#include "ppsim/config/resources.hpp"
#include "ppsim/sim/analysis.hpp"
#include "ppsim/viz/chrome_trace.hpp"
#include "ppsim/viz/json_report.hpp"

namespace {

using namespace ppsim;
using Catch::Matchers::Contains;
using nlohmann::json;

// 1F1B on 4 ranks, 8 microbatches, async comm: 48 transfers, 8 F per rank.
json base_config() {
  return json::parse(R"({"schedule": {"kind": "1f1b", "ranks": 4, "microbatches": 8},
                         "comm": {"style": "async"}})");
}
json with(json j, const std::string& section, const std::string& key, json value) {
  j[section][key] = std::move(value);
  return j;
}

config::ConfigError config_error_of(const json& j) {
  try {
    config::prepare(config::parse_config(j, "cfg.json"));
  } catch (const config::ConfigError& e) {
    return e;
  }
  FAIL("expected a config::ConfigError, none was thrown");
  throw std::logic_error("unreachable");
}

#define CHECK_REFUSED(j, key_, expected_)                                                       \
  do {                                                                                          \
    const config::ConfigError e_ = config_error_of(j);                                          \
    INFO("what(): " << e_.what());                                                              \
    CHECK(e_.source() == "cfg.json");                                                           \
    CHECK(e_.key() == std::string(key_));                                                       \
    CHECK_THAT(e_.what(),                                                                       \
               Contains("cfg.json: key '" + std::string(key_) + "': ") && Contains(expected_)); \
  } while (false)

// Every number in a JSON value is finite (before it is dumped: nlohmann writes them as null).
bool all_finite(const json& j) {
  if (j.is_number_float()) return std::isfinite(j.get<double>());
  if (j.is_structured())
    for (const auto& v : j)
      if (!all_finite(v)) return false;
  return true;
}

record::RunRecord run(const json& j, bool trace = false) {
  return sim::analyze(config::parse_config(j, "cfg.json"), {.trace = trace});
}

}  // namespace

TEST_CASE("overflow.byte_counts_would_overflow_refused", "[overflow]") {
  // byte counts that would overflow are refused naming the key
  // The issue's examples: a negative comm_bytes, a peak of 0.
  CHECK_REFUSED(with(base_config(), "comm", "boundary_bytes", 1e18), "comm.boundary_bytes", "2^53");
  CHECK_REFUSED(with(base_config(), "memory", "static_bytes", 9e18), "memory.static_bytes", "2^53");
  CHECK_REFUSED(with(base_config(), "memory", "activation_bytes", 1e16), "memory.activation_bytes",
                "2^53");
  CHECK_REFUSED(with(base_config(), "comm", "eager_limit", 1e16), "comm.eager_limit", "2^53");
  // Each value fits, the sums do not: 2^53 bytes x 600 stashes; x 1200 transfers.
  json big = with(base_config(), "schedule", "microbatches", 600);
  CHECK_REFUSED(with(big, "memory", "activation_bytes", 1LL << 53), "memory.activation_bytes",
                "rank 0's memory could reach");
  CHECK_REFUSED(with(with(big, "comm", "style", "blocking"), "comm", "boundary_bytes", 1LL << 53),
                "comm.boundary_bytes", "above the 2^62 bytes");
}

TEST_CASE("overflow.program_checked_several_threads_names", "[overflow][threads]") {
  // a program checked on several threads names the first rank over a bound
  // 1F1B P=8 M=16384 blocking, about 650,000 ops: counted in two blocks of ranks where two
  // threads run. The middle ranks post 4 comm ops per microbatch, the end ones 2: with 1.5 x 2^46
  // bytes per buffer only ranks 1-6 could pass 2^62 bytes, and rank 1, the first in rank order,
  // is named whichever block finishes first.
  json j = with(with(base_config(), "schedule", "ranks", 8), "schedule", "microbatches", 16384);
  j = with(with(j, "comm", "style", "blocking"), "comm", "boundary_bytes", 3LL << 45);
  j = with(j, "memory", "activation_bytes", 0);
  for (int rep = 0; rep < 5; ++rep)
    CHECK_REFUSED(j, "comm.boundary_bytes", "rank 1's memory could reach");
  // The same program with buffers that fit: the forward counts of both blocks, merged, give the
  // run's bound on time, 131,072 forwards x 1e10 (half of them would stay under 1e15).
  json slow = with(with(j, "comm", "boundary_bytes", 1), "costs", "forward", 1e10);
  CHECK_REFUSED(slow, "costs.forward", "the run could last up to 1.311e+15");
}

TEST_CASE("overflow.byte_counts_bounds_give_exact", "[overflow]") {
  // byte counts at the bounds give exact figures
  const std::int64_t max = 1LL << 53;
  json j = with(base_config(), "comm", "boundary_bytes", max);
  j = with(j, "memory", "static_bytes", max);
  j = with(j, "memory", "activation_bytes", max);
  const record::RunRecord r = run(j);
  REQUIRE(r.ok());
  REQUIRE(r.metrics);
  CHECK(r.metrics->comm_bytes == 48 * max);  // 2 x 3 boundaries x 8 microbatches
  // Rank 0 holds its weights, 4 stashes (1F1B warm-up on 4 ranks) and comm buffers at its peak.
  CHECK(r.metrics->peak_memory_bytes > 4 * max);
  CHECK(r.metrics->peak_memory_bytes % max == 0);
  CHECK(r.metrics->per_rank[0].sent_bytes == 8 * max);
  CHECK(all_finite(viz::to_json(r)));
}

TEST_CASE("overflow.costs_latencies_would_make_infinite", "[overflow]") {
  // costs and latencies that would make infinite times are refused naming the key
  json costs = base_config();
  costs["costs"] = {{"forward", 1e308}};
  CHECK_REFUSED(costs, "costs.forward", "the run could last up to inf ms");
  costs["costs"] = {{"backward_input", 1e14}, {"backward_weight", 1.0}};
  CHECK_REFUSED(costs, "costs.backward_input", "above the bound of 1e+15 time units");
  costs["costs"] = {{"per_stage", {{"2", {{"forward", 1e300}}}}}};
  CHECK_REFUSED(costs, "costs.per_stage.2.forward", "lower costs.per_stage.2.forward");
  CHECK_REFUSED(with(base_config(), "comm", "latency", 1e308), "comm.latency",
                "the run could last");
  json slow = with(base_config(), "comm", "boundary_bytes", 1000);
  CHECK_REFUSED(with(slow, "comm", "bandwidth", 1e-300), "comm.bandwidth", "above the bound");
  // A 1-rank custom program: one F.
  const json custom = json::parse(
      R"({"schedule": {"kind": "custom", "ops": ["0F0,0B0"]}, "costs": {"forward": 1e308}})");
  CHECK_REFUSED(custom, "costs.forward", "above the bound");
}

TEST_CASE("overflow.times_just_below_bound_run", "[overflow]") {
  // times just below the bound run to finite figures and a valid trace
  // 96 compute ops of 1e13 and 48 transfers of 1e11: 9.648e14 < 1e15.
  json j = base_config();
  j["costs"] = {{"forward", 1e13}, {"backward_input", 1e13}, {"backward_weight", 1e13}};
  j = with(j, "comm", "latency", 1e11);
  const record::RunRecord r = run(j, true);
  REQUIRE(r.ok());
  REQUIRE(r.metrics);
  CHECK(!r.deadlock);
  CHECK(std::isfinite(r.metrics->makespan));
  CHECK(r.metrics->makespan > 11 * 1e13);  // the 1F1B critical path: 3M + ... compute ops
  CHECK(all_finite(viz::to_json(r)));
  REQUIRE(r.trace);
  std::ostringstream out;
  viz::write_chrome_trace(out, *r.trace, *r.program, {1000.0, "t"});
  const json trace = json::parse(out.str());  // throws on "ts": inf
  CHECK(all_finite(trace));
  for (const char* bad : {": inf", ":inf", "nan", "null"})
    CHECK(out.str().find(bad) == std::string::npos);
  // Twice that is refused.
  j["costs"]["forward"] = 3e13;
  CHECK_REFUSED(j, "costs.forward", "above the bound");
}
