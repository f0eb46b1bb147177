#pragma once
// Sweeps over one config (`ppsim compare --schedules ... --microbatches ... --chunks ...`).
#include <string>
#include <vector>

#include "ppsim/config/config.hpp"

namespace ppsim::config {

struct SweepAxes {
  std::vector<std::string> kinds;  // empty: the config's own
  std::vector<int> microbatches;   // empty: the config's own
  std::vector<int> chunks;         // empty: the config's own; only for schedules that take chunks
};

bool sweep_requested(const SweepAxes& axes);

// One config per combination. The model stays fixed: splitting each rank into V chunks instead of
// the config's V0 scales per-stage costs, activation and static bytes by V0 / V (boundary_bytes,
// the size of one activation crossing ranks, stays). Schedules whose `chunks` parameter allows only
// one value run with it (V = 1 for 1F1B, V = 2 for zbv).
std::vector<Config> sweep(const Config& base, const SweepAxes& axes);

}  // namespace ppsim::config
