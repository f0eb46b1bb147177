#pragma once
// The `ppsim run --json` object (keys documented in docs/METRICS.md).
#include <nlohmann/json.hpp>

#include "ppsim/sim/analysis.hpp"

namespace ppsim::sim {

nlohmann::json to_json(const Analysis& analysis);
nlohmann::json to_json(const Deadlock& deadlock);
nlohmann::json to_json(const schedules::Diagnostic& diagnostic);

}  // namespace ppsim::sim
