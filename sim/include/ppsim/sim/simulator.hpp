#pragma once
// The discrete-event engine: replays a lowered Program under a cost, network and memory model.
#include <stdexcept>

#include "ppsim/schedules/program.hpp"
#include "ppsim/sim/observer.hpp"
#include "ppsim/sim/options.hpp"
#include "ppsim/sim/result.hpp"

namespace ppsim::sim {

// Raised when the program or options cannot be simulated at all (run validate() first).
class SimulationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `program` must have no fatal diagnostics from schedules::validate. The observer, if any, sees
// every op and transfer; without one nothing per-op is kept.
SimResult simulate(const schedules::Program& program, const SimOptions& options,
                   Observer* observer = nullptr);

}  // namespace ppsim::sim
