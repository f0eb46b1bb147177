#include "ppsim/sim/analysis.hpp"

#include "ppsim/config/run_step.hpp"
#include "ppsim/sim/simulator.hpp"
#include "ppsim/sim/step_summary.hpp"

namespace ppsim::sim {

record::RunRecord analyze(const config::Prepared& prepared, const AnalyzeOptions& options) {
  record::RunRecord rec = config::start_run(prepared, "simulated");
  if (!config::runnable(rec)) return rec;
  record::Trace trace;
  trace.time_unit = prepared.config.time_unit;
  record::TraceRecorder recorder(trace);
  record::ObserverList sinks;
  if (options.trace) sinks.add(&recorder);
  sinks.add(options.observer);
  SimResult r = simulate(*prepared.program, prepared.model, sinks.get());
  // Each hazard has one detector: validation for what program order shows, the engine for what
  // only a run shows; the lists do not overlap.
  rec.diagnostics.insert(rec.diagnostics.end(), r.errors.begin(), r.errors.end());
  rec.deadlock = std::move(r.deadlock);
  if (r.send_held_rank >= 0)
    rec.send_hold = record::RunRecord::SendHold{r.send_held_rank, r.send_held};
  rec.step = std::move(r.step);
  rec.metrics = static_cast<record::RunMetrics&&>(std::move(r));
  rec.out_of_memory =
      record::out_of_memory(*rec.metrics, prepared.model.memory.limit_bytes, /*split=*/true);
  summarize_step(prepared, rec);
  if (options.trace) rec.trace = std::move(trace);
  return rec;
}

record::RunRecord analyze(const config::Config& config, const AnalyzeOptions& options) {
  const config::ResourceLimits limits{
      options.max_memory, options.trace ? config::Workload::trace : config::Workload::run};
  return analyze(config::prepare(config, limits), options);
}

}  // namespace ppsim::sim
