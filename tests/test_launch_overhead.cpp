// costs.launch_overhead and costs.start_offset: closed forms of the simulator, their reading from a
// config, and their measurement from a run (real::launch_overhead, real::start_offset).
#include <catch2/catch.hpp>

#include <memory>
#include <nlohmann/json.hpp>

#include "error_of.hpp"
#include "helpers.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/real/comparison.hpp"
#include "ppsim/record/metrics.hpp"

using namespace ppsim;

namespace {
// The simulated run of `prog` as a record with its trace, as a measured one would be.
record::RunRecord record_of(const schedules::Program& prog, const sim::SimOptions& opts) {
  record::RunRecord rec;
  record::Trace trace;
  record::TraceRecorder recorder(trace);
  (void)sim::simulate(prog, opts, &recorder);
  rec.program = std::make_shared<const schedules::Program>(prog);
  rec.metrics = record::compute_metrics(trace, prog);
  rec.trace = std::move(trace);
  return rec;
}
}  // namespace

TEST_CASE("launch_overhead.fill_drain_closed_form", "[closed_form][launch]") {
  // With free comm each op of GPipe and 1F1B waits L for its launch, so it takes F + L (B + L) on
  // the critical path: makespan (M+P-1)(F+B+2L); busy stays M(F+B). A start offset O delays every
  // rank's first op: makespan + O.
  const double F = 1.0, B = 2.0, L = 0.25, O = 0.5;
  for (const char* kind : {"gpipe", "1f1b"})
    for (int P = 1; P <= 6; ++P)
      for (int M = 1; M <= 10; ++M) {
        INFO(kind << " P=" << P << " M=" << M);
        const auto prog = test::lowered(kind, P, M, 1, "async");
        auto opts = test::uniform(P, F, B);
        opts.costs.launch_overhead = L;
        const auto r = sim::simulate(prog, opts);
        REQUIRE_FALSE(r.deadlock);
        CHECK(r.makespan == Approx((M + P - 1) * (F + B + 2 * L)));
        for (const auto& m : r.per_rank) CHECK(m.busy == Approx(M * (F + B)));
        opts.costs.start_offset = O;
        const auto late = sim::simulate(prog, opts);
        CHECK(late.makespan == Approx(r.makespan + O));
        for (const auto& m : late.per_rank) CHECK(m.start == 0);
      }
}

TEST_CASE("launch_overhead.zero_changes_nothing", "[launch]") {
  // The defaults are 0: every bundled config simulates as without them, bit for bit.
  const auto prog = test::lowered("zb-h1", 4, 8, 1, "async");
  auto opts = test::uniform(4, 1.0, 2.0);
  const auto a = sim::simulate(prog, opts);
  opts.costs.launch_overhead = 0;
  opts.costs.start_offset = 0;
  const auto b = sim::simulate(prog, opts);
  CHECK(a.makespan == b.makespan);
}

TEST_CASE("launch_overhead.negative_refused", "[launch]") {
  const auto prog = test::lowered("gpipe", 2, 2, 1, "async");
  auto opts = test::uniform(2, 1.0, 2.0);
  opts.costs.launch_overhead = -1;
  CHECK_THROWS_AS(sim::simulate(prog, opts), sim::SimulationError);
}

TEST_CASE("launch_overhead.read_from_costs", "[launch][config]") {
  nlohmann::json j = {{"schedule", {{"kind", "gpipe"}, {"ranks", 2}, {"microbatches", 2}}},
                      {"costs", {{"launch_overhead", 0.01}, {"start_offset", 0.2}}}};
  const auto prepared = config::prepare(config::parse_config(j, "c.json"));
  CHECK(prepared.model.costs.launch_overhead == 0.01);
  CHECK(prepared.model.costs.start_offset == 0.2);
  j["costs"]["launch_overhead"] = -0.1;
  const auto e =
      test::error_of<config::ConfigError>([&] { (void)config::parse_config(j, "c.json"); });
  CHECK(e.key() == "costs.launch_overhead");
  CHECK(std::string(e.what()).find("expected a number >= 0") != std::string::npos);
}

TEST_CASE("launch_overhead.measured_from_a_simulated_run", "[launch][calibrate]") {
  // A run simulated with L and O, read back as if measured, gives L and O again: every op's gap
  // after an op whose output it did not wait for is exactly L, and stage 0's first F starts at O+L.
  for (const char* kind : {"gpipe", "1f1b", "zb-h1", "interleaved-1f1b"}) {
    INFO(kind);
    const int V = std::string_view(kind) == "interleaved-1f1b" ? 2 : 1;
    const auto prog = test::lowered(kind, 4, 8, V, "async");
    auto opts = test::uniform(4 * V, 1.0, 2.0);
    opts.costs.launch_overhead = 0.125;
    opts.costs.start_offset = 0.75;
    const record::RunRecord rec = record_of(prog, opts);
    const double L = real::launch_overhead(rec);
    CHECK(L == Approx(0.125));
    CHECK(real::start_offset(rec, L) == Approx(0.75));
    const model::Model cal = real::calibrated(opts, rec);
    CHECK(cal.costs.launch_overhead == Approx(0.125));
    CHECK(cal.costs.start_offset == Approx(0.75));
  }
}
