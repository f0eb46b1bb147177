#pragma once
// One prepared config end to end: validate the program, simulate it if it can run, and return
// the run record that writers draw.
#include "ppsim/config/prepare.hpp"
#include "ppsim/record/observer.hpp"
#include "ppsim/record/run_record.hpp"

namespace ppsim::sim {

struct AnalyzeOptions {
  bool trace = false;                    // record the timeline into RunRecord::trace
  record::Observer* observer = nullptr;  // another sink of the run's events
  // Refuse configs estimated to need more (docs/LIMITS.md); 0 = no limit. Read only by the
  // overload that prepares.
  std::uint64_t max_memory = config::default_max_memory();
};

record::RunRecord analyze(const config::Prepared& prepared, const AnalyzeOptions& options = {});
// Prepare, then analyze. Throws config::ConfigError for bad input (exit 2 material); schedule
// problems land in the record.
record::RunRecord analyze(const config::Config& config, const AnalyzeOptions& options = {});

}  // namespace ppsim::sim
