#pragma once
// What a compute op does on a rank: holds it busy for the op's duration, reading its inputs and
// writing its outputs. `emulated` sleeps the modelled duration; a CPU or GPU compute does real
// work.
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ppsim/base/registry.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/model/model.hpp"
#include "ppsim/real/buffer.hpp"
#include "ppsim/real/clock.hpp"
#include "ppsim/schedules/program.hpp"

namespace ppsim::real {

struct ComputeContext {
  const config::Config& config;  // its registered sections (the GPU compute reads `model`)
  const schedules::Program& program;
  const model::Model& model;
  double time_scale;  // seconds of wall clock per time unit; 0: as fast as possible
  const RunClock& clock;
  const std::atomic<bool>& cancel;  // set when the run stops early: return soon
};

class Compute {
 public:
  virtual ~Compute() = default;
  virtual void begin(const ComputeContext& context) = 0;
  // Runs compute op `op` of `rank` (a plain F/B/I/W or a composite), which started at `start`
  // (seconds on the run clock) and lasts `duration` time units in the model. `blocked` is how long
  // (seconds) the rank waited on communication since its previous compute op ended: what of the
  // time between the two is not the cost of issuing them. `inputs` hold what it reads (already
  // checked by the executor), `outputs` what it writes. Returns when it is done; may throw (the
  // executor stops the run cleanly and reports the rank and op).
  virtual void run(int rank, const schedules::Op& op, double start, double duration, double blocked,
                   std::span<Buffer* const> inputs, std::span<Buffer* const> outputs) = 0;
  // The span (seconds on the run clock) of the op `rank`'s last run() call ran, where the compute
  // knows it better than that call's start and return: a GPU's own times for an op it launched
  // before the call. Called by the rank's thread after run() returns.
  virtual std::optional<std::pair<double, double>> span(int /*rank*/) const { return std::nullopt; }
  // Every rank has returned: what a stopped run left waiting on the device is released.
  virtual void end() {}
  // Lines about the last run for the report (a GPU compute: device memory, issue gaps).
  virtual std::vector<std::string> report() const { return {}; }
  // True when its ops allocate the real memory themselves (a GPU compute's device stashes): the
  // executor's host buffers then only carry the payload stamps (memory scale 0 unless set), so
  // that filling them does not add to the ops' measured time.
  virtual bool holds_memory() const { return false; }
  // True when an op waits on a device that may never finish it (a hung kernel or stream on a
  // GPU): the watchdog then stops a run whose op has not returned after 10 times its modelled
  // wall time and at least the hang timeout, and names it. (Its run() must return once the
  // context's `cancel` is set.)
  virtual bool may_hang() const { return false; }
};

struct ComputeInfo {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<Compute>()> make;
};

// Computes by name: one file under real/src/computes/ each, registered by file name.
using ComputeRegistry = base::Registry<ComputeInfo>;
void register_builtins(ComputeRegistry& registry);

}  // namespace ppsim::real
