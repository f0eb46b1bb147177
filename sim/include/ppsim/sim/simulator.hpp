#pragma once
// The discrete-event engine: replays a lowered Program under a cost, network and memory model.
#include <optional>
#include <stdexcept>
#include <vector>

#include "ppsim/model/model.hpp"
#include "ppsim/record/deadlock.hpp"
#include "ppsim/record/metrics.hpp"
#include "ppsim/record/observer.hpp"
#include "ppsim/record/step.hpp"
#include "ppsim/schedules/diagnostic.hpp"
#include "ppsim/schedules/program.hpp"

namespace ppsim::sim {

using SimOptions = model::Model;
using model::CostModel;
using model::Matching;
using model::StageCost;

// Raised when the program or options cannot be simulated at all (run validate() first).
class SimulationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The engine's own findings next to the metrics: the deadlock, if the run could not finish, and
// the hazards only a run can show (message-order mismatches under fifo matching). Hazards visible
// in program order are validation's (schedules::validate), reported there and only there.
struct SimResult : record::RunMetrics {
  std::optional<record::Deadlock> deadlock;
  std::vector<schedules::Diagnostic> errors;
  // The most communication-op records the engine held at once (32 bytes each): under mpi
  // semantics the comm ops in flight, not the program's length; under nccl every comm op.
  std::size_t endpoint_records = 0;
  // The rank blocked longest on its own sends after every receive it waited for had arrived,
  // and for how long in all (-1 and 0: none): the lowering holding back ops that could run.
  int send_held_rank = -1;
  double send_held = 0;
  // With the model's step phases (a `model` section): when each rank's step ends.
  std::optional<record::StepTiming> step;
};

// The results mean something only for a program without fatal diagnostics from
// schedules::validate. On any other program the engine may throw SimulationError or return
// results that mean nothing, but it never reads out of bounds: fuzz_oplist and fuzz_pipeline run
// it on every program they build, unvalidated. The observer, if any, sees every op and transfer
// (record/observer.hpp); without one nothing per-op is kept.
SimResult simulate(const schedules::Program& program, const SimOptions& options,
                   record::Observer* observer = nullptr);

}  // namespace ppsim::sim
