// The host executor runs the op lists for real and must observe what the simulator predicts:
// the same verdict (finishes / deadlocks, with the same ranks stuck on the same ops), the same
// hazards at the same ops, and the same peak in-flight microbatches and peak memory per rank.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fmt/format.h>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "helpers.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/real/executor.hpp"
#include "ppsim/real/settings.hpp"
#include "ppsim/sim/analysis.hpp"

using namespace ppsim;
namespace fs = std::filesystem;

namespace {

config::Prepared prepared_of(schedules::Program p, const sim::SimOptions& o) {
  config::Prepared prep;
  prep.config.name = "test";
  prep.config.source = "test";
  prep.program = std::make_shared<const schedules::Program>(std::move(p));
  prep.model = o;
  return prep;
}

real::Settings untimed() {
  real::Settings s;
  s.time_scale = 0;
  s.hang_timeout = 0.05;
  return s;
}

std::string blocked_text(const record::BlockedOp& b) {
  return fmt::format("{}@{} {} -> {} [{}]", b.rank, b.position, b.op, b.peer, b.waiting_for);
}
std::vector<std::string> texts(const std::vector<record::BlockedOp>& ops) {
  std::vector<std::string> out;
  for (const auto& b : ops) out.push_back(blocked_text(b));
  return out;
}

// The hazards of a run as (kind, rank, pos).
std::set<std::string> hazards(const record::RunRecord& rec) {
  std::set<std::string> out;
  for (const auto& d : rec.diagnostics)
    out.insert(fmt::format("{} at rank {} op {}", d.kind, d.rank, d.position));
  return out;
}

// Verdict, deadlock report and peak in-flight per rank agree; `memory`: peak memory too.
void check_agreement(const record::RunRecord& predicted, const real::Execution& measured,
                     bool memory) {
  const record::RunRecord& m = measured.record;
  REQUIRE(predicted.metrics);
  REQUIRE(m.metrics);
  CHECK(real::to_string(measured.outcome) ==
        std::string(predicted.deadlock ? "hang" : "finished"));
  CHECK(m.verdict().kind == predicted.verdict().kind);
  CHECK(m.deadlock.has_value() == predicted.deadlock.has_value());
  if (m.deadlock && predicted.deadlock) {
    CHECK(m.deadlock->describe() == predicted.deadlock->describe());
    REQUIRE(m.deadlock->cycles.size() == predicted.deadlock->cycles.size());
    for (std::size_t i = 0; i < m.deadlock->cycles.size(); ++i)
      CHECK(texts(m.deadlock->cycles[i]) == texts(predicted.deadlock->cycles[i]));
    CHECK(texts(m.deadlock->unmatched) == texts(predicted.deadlock->unmatched));
    CHECK(texts(m.deadlock->blocked) == texts(predicted.deadlock->blocked));
  }
  // A run that finishes went through every op: it saw every hazard validation and the engine
  // report, at the same ops.
  if (!predicted.deadlock) CHECK(hazards(m) == hazards(predicted));
  const auto& pr = predicted.metrics->per_rank;
  const auto& mr = m.metrics->per_rank;
  REQUIRE(pr.size() == mr.size());
  for (std::size_t r = 0; r < pr.size(); ++r) {
    INFO("rank " << r);
    CHECK(mr[r].peak_inflight == pr[r].peak_inflight);
    CHECK(mr[r].ops_done == pr[r].ops_done);
    CHECK(mr[r].sent_bytes == pr[r].sent_bytes);
    CHECK(mr[r].recv_bytes == pr[r].recv_bytes);
    if (memory) CHECK(mr[r].peak_memory_bytes == pr[r].peak_memory_bytes);
  }
}

}  // namespace

TEST_CASE("Executor and simulator agree on every bundled config (verdict, stuck ops, peaks)",
          "[real][threads][golden]") {
  const fs::path root = PPSIM_SOURCE_DIR;
  int configs = 0;
  for (const auto& e : fs::directory_iterator(root / "configs")) {
    if (e.path().extension() != ".json") continue;
    INFO(e.path().string());
    const config::Prepared prep = config::prepare(config::load_config(e.path().string()));
    const record::RunRecord predicted = sim::analyze(prep, {.trace = true});
    // Untimed: the verdict and the in-flight peaks do not depend on durations.
    check_agreement(predicted, real::execute(prep, {untimed()}), false);
    // Timed (1 unit = 1 ms): sent buffers free themselves in the simulator's order, so memory
    // peaks agree exactly too.
    real::Settings timed = untimed();
    timed.time_scale = 1e-3;
    check_agreement(predicted, real::execute(prep, {timed}), true);
    ++configs;
  }
  CHECK(configs >= 6);
}

TEST_CASE("The three classic 1F1B cases: all-blocking hangs with ranks 2 and 3 in sends to each "
          "other; async forward sends and Megatron's batched pairs finish",
          "[real][threads]") {
  const auto run = [](std::string_view style) {
    auto p = test::lowered("1f1b", 4, 8, 1, style);
    return real::execute(prepared_of(std::move(p), test::uniform(4, 1, 2)), {untimed()});
  };
  const real::Execution blocking = run("blocking");
  CHECK(blocking.outcome == real::Outcome::hang);
  REQUIRE(blocking.record.deadlock);
  CHECK(blocking.record.deadlock->describe().find(
            "rank 2 blocked in 2SEND_F1 -> rank 3; rank 3 blocked in 3SEND_B0 -> rank 2") !=
        std::string::npos);
  CHECK_FALSE(blocking.record.trace->ranks[2].finished);
  CHECK(blocking.record.trace->ranks[2].stuck_pos >= 0);
  CHECK(run("async-send").outcome == real::Outcome::finished);
  CHECK(run("batched").outcome == real::Outcome::finished);
}

TEST_CASE("Executor and simulator agree on 300 random programs (schedules, comm styles, "
          "networks, matching, eager sends; ops swapped or dropped)",
          "[real][threads][property]") {
  std::mt19937 rng(11);
  int hung = 0, finished = 0;
  for (int i = 0; i < 300; ++i) {
    auto [p, o, name] = test::random_case(rng);
    INFO("program " << i << ": " << name << "\n" << p.to_text());
    const config::Prepared prep = prepared_of(std::move(p), o);
    const record::RunRecord predicted = sim::analyze(prep, {.trace = true});
    const real::Execution measured = real::execute(prep, {untimed()});
    check_agreement(predicted, measured, false);
    (measured.outcome == real::Outcome::hang ? hung : finished) += 1;
  }
  CHECK(hung > 10);
  CHECK(finished > 100);
}
