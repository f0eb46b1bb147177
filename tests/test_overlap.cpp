// analyze() validates on a thread of its own while the engine runs (sim/src/analysis.cpp): the
// record is the one validating first gives, and a program validation refuses is never reported
// as run, whatever the engine made of it.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "ppsim/config/config.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/record/observer.hpp"
#include "ppsim/schedules/validation.hpp"
#include "ppsim/sim/analysis.hpp"
#include "ppsim/sim/simulator.hpp"
#include "ppsim/viz/json_report.hpp"

using namespace ppsim;

namespace {

// Two jobs for the test's lifetime, so that analyze() overlaps on any machine.
class TwoJobs {
 public:
  TwoJobs() {
    if (const char* v = std::getenv("PPSIM_JOBS")) saved_ = v;
    setenv("PPSIM_JOBS", "2", 1);
  }
  ~TwoJobs() {
    if (saved_.empty())
      unsetenv("PPSIM_JOBS");
    else
      setenv("PPSIM_JOBS", saved_.c_str(), 1);
  }
  TwoJobs(const TwoJobs&) = delete;
  TwoJobs& operator=(const TwoJobs&) = delete;

 private:
  std::string saved_;
};

config::Prepared prepared(const std::string& config, std::vector<std::string> overrides) {
  return config::prepare(
      config::load_config(std::string(PPSIM_SOURCE_DIR) + "/configs/" + config, overrides));
}

// The record of validating and then simulating, one after the other: analyze() takes that path
// whenever an observer watches the run.
std::string serial_json(const config::Prepared& p) {
  record::Observer watcher;
  return viz::to_json(sim::analyze(p, {.trace = false, .observer = &watcher})).dump();
}

// A copy of `p` whose program is `text` (a changed to_text() of it).
config::Prepared with_program(const config::Prepared& p, const std::string& text) {
  config::Prepared q = p;
  q.program = std::make_shared<const schedules::Program>(schedules::Program::parse(text));
  return q;
}

void replace_once(std::string& text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("analyze overlapped with validation gives the record of validating first",
          "[analysis][overlap][threads]") {
  const TwoJobs jobs;
  struct Case {
    const char* config;
    std::vector<std::string> overrides;
  };
  for (const Case& c : {
           Case{"1f1b-async-send.json", {"schedule.ranks=8", "schedule.microbatches=2048"}},
           Case{"interleaved-1f1b.json", {"schedule.ranks=4", "schedule.microbatches=2048"}},
           // A deadlock: the verdict names the same ranks and ops.
           Case{"1f1b-blocking-deadlock.json", {"schedule.microbatches=16384"}},
           // Warnings from validation (never_waited) next to the run's metrics, under nccl.
           Case{"1f1b-async-send.json",
                {"schedule.ranks=4", "schedule.microbatches=8192", "comm.semantics=nccl"}},
       }) {
    INFO(c.config);
    const config::Prepared p = prepared(c.config, c.overrides);
    REQUIRE(p.program->total_ops() >= 65536);  // large enough to overlap
    const record::RunRecord rec = sim::analyze(p);
    CHECK(viz::to_json(rec).dump() == serial_json(p));
  }
}

TEST_CASE("analyze never reports a run of a program validation refuses",
          "[analysis][overlap][threads]") {
  const TwoJobs jobs;
  const config::Prepared p =
      prepared("1f1b-async-send.json", {"schedule.ranks=8", "schedule.microbatches=4096"});
  REQUIRE(p.program->total_ops() >= 65536);
  const std::string text = p.program->to_text();

  SECTION("a WAIT on a request never posted: the engine would refuse it") {
    std::string bad = text;
    replace_once(bad, "WAIT(", "WAIT(99999999;");
    const config::Prepared q = with_program(p, bad);
    CHECK_THROWS_AS(sim::simulate(*q.program, q.model), sim::SimulationError);
    const record::RunRecord rec = sim::analyze(q);
    CHECK_FALSE(rec.metrics);
    CHECK_FALSE(rec.deadlock);
    REQUIRE(schedules::has_fatal(rec.diagnostics));
    CHECK(rec.diagnostics[0].kind == "unknown_request");
    CHECK(viz::to_json(rec).dump() == serial_json(q));
  }
  SECTION("a request id used twice: the engine would run it to the end") {
    // Rank 0's second async send takes the first one's id.
    std::string bad = text;
    const auto first = bad.find("SEND_F0#");
    REQUIRE(first != std::string::npos);
    const auto id_end = bad.find_first_not_of("0123456789", first + 8);
    const std::string id = bad.substr(first + 8, id_end - first - 8);
    const auto second = bad.find("SEND_F1#", first);
    REQUIRE(second != std::string::npos);
    const auto second_end = bad.find_first_not_of("0123456789", second + 8);
    bad.replace(second + 8, second_end - second - 8, id);
    const config::Prepared q = with_program(p, bad);
    const record::RunRecord rec = sim::analyze(q);
    CHECK_FALSE(rec.metrics);
    REQUIRE(schedules::has_fatal(rec.diagnostics));
    CHECK(viz::to_json(rec).dump() == serial_json(q));
  }
}

TEST_CASE("simulate ends with SimulationStopped once its stop flag is set", "[analysis][overlap]") {
  const config::Prepared p =
      prepared("1f1b-async-send.json", {"schedule.ranks=8", "schedule.microbatches=4096"});
  std::atomic<bool> stop{true};
  CHECK_THROWS_AS(sim::simulate(*p.program, p.model, nullptr, &stop), sim::SimulationStopped);
  stop = false;
  const sim::SimResult r = sim::simulate(*p.program, p.model, nullptr, &stop);
  CHECK(r.makespan == sim::simulate(*p.program, p.model).makespan);
  CHECK_FALSE(r.deadlock);
}
