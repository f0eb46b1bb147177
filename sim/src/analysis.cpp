#include "ppsim/sim/analysis.hpp"

#include "ppsim/schedules/lowering.hpp"
#include "ppsim/schedules/validation.hpp"
#include "ppsim/sim/simulator.hpp"

namespace ppsim::sim {

record::RunRecord analyze(const config::Prepared& prepared, const AnalyzeOptions& options) {
  const config::Config& c = prepared.config;
  record::RunRecord rec;
  rec.info = {c.name,
              c.source,
              c.kind,
              c.comm_style(),
              std::string(config::to_string(c.network.matching)),
              c.time_unit,
              "simulated"};
  rec.program = prepared.program;
  if (c.comm_style() == c.lowering.style) {  // lowered by a style, not written out
    rec.info.lowering = schedules::describe_lowering(c.lowering.style, c.lowering.params);
    const schedules::LoweringOptions def = c.program->default_comm();
    const auto* style = schedules::LoweringRegistry::instance().find(def.style);
    rec.info.default_lowering = schedules::describe_lowering(
        def.style, style ? schedules::resolve(style->params, def.params, def.style) : def.params);
  }
  // The model is what runs (prepare() copies the config's network into it).
  const model::NetworkOptions& net = prepared.model.network;
  rec.info.semantics = config::to_string(net.semantics);
  rec.diagnostics = schedules::validate(*prepared.program, model::validate_options(net));
  if (schedules::has_fatal(rec.diagnostics)) return rec;
  record::Trace trace;
  trace.time_unit = c.time_unit;
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
  rec.metrics = static_cast<record::RunMetrics&&>(std::move(r));
  rec.out_of_memory =
      record::out_of_memory(*rec.metrics, prepared.model.memory.limit_bytes, /*split=*/true);
  if (options.trace) rec.trace = std::move(trace);
  return rec;
}

record::RunRecord analyze(const config::Config& config, const AnalyzeOptions& options) {
  const config::ResourceLimits limits{
      options.max_memory, options.trace ? config::Workload::trace : config::Workload::run};
  return analyze(config::prepare(config, limits), options);
}

}  // namespace ppsim::sim
