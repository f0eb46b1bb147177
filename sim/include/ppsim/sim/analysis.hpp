#pragma once
// One config end to end: build the program, validate it, simulate it if it can run.
#include <optional>
#include <vector>

#include "ppsim/schedules/diagnostic.hpp"
#include "ppsim/sim/config.hpp"
#include "ppsim/sim/simulator.hpp"

namespace ppsim::sim {

struct Analysis {
  Config config;
  BuiltRun run;
  std::vector<schedules::Diagnostic> errors;  // validation + simulation, without repeats
  std::optional<SimResult> result;            // absent when validation found fatal problems

  // No errors and no deadlock: the schedule is right.
  bool ok() const { return errors.empty() && result && !result->deadlock; }
};

// Throws ConfigError for bad input (exit 2 material); schedule problems land in the Analysis.
Analysis analyze(const Config& config, Observer* observer = nullptr);

}  // namespace ppsim::sim
