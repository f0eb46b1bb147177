#include "ppsim/sim/analysis.hpp"

#include <atomic>
#include <exception>
#include <optional>
#include <system_error>
#include <thread>

#include "ppsim/schedules/jobs.hpp"
#include "ppsim/schedules/rank_blocks.hpp"
#include "ppsim/schedules/validation.hpp"
#include "ppsim/sim/simulator.hpp"

namespace ppsim::sim {

namespace {

void finish(record::RunRecord& rec, SimResult&& r) {
  // Each hazard has one detector: validation for what program order shows, the engine for what
  // only a run shows; the lists do not overlap.
  rec.diagnostics.insert(rec.diagnostics.end(), r.errors.begin(), r.errors.end());
  rec.deadlock = std::move(r.deadlock);
  rec.metrics = static_cast<record::RunMetrics&&>(std::move(r));
}

// Validation on a thread of its own while the engine runs here, when two cores are free and the
// program is large enough to pay for the thread: the run needs validation's verdict only at its
// end. Fills `diagnostics`; returns the run, or nothing when validation found a fatal error (the
// run, stopped or not, is dropped with whatever it threw) or when there was no thread to run it
// on (then nothing was validated either).
std::optional<SimResult> overlapped(const schedules::Program& program, const config::Model& model,
                                    const schedules::ValidateOptions& validate_options,
                                    std::vector<schedules::Diagnostic>& diagnostics) {
  if (schedules::jobs_here() < 2 || program.total_ops() < schedules::kMinWorkPerBlock) {
    diagnostics = schedules::validate(program, validate_options);
    return std::nullopt;
  }
  std::atomic<bool> stop{false};
  std::exception_ptr validate_error;
  std::thread validator;
  try {
    validator = std::thread([&] {
      // One thread for validation: the engine has the other core.
      const schedules::ParallelWorkScope scope;
      try {
        diagnostics = schedules::validate(program, validate_options);
        if (schedules::has_fatal(diagnostics)) stop.store(true, std::memory_order_relaxed);
      } catch (...) {
        validate_error = std::current_exception();
        stop.store(true, std::memory_order_relaxed);
      }
    });
  } catch (const std::system_error&) {
    diagnostics = schedules::validate(program, validate_options);
    return std::nullopt;
  }
  std::optional<SimResult> run;
  std::exception_ptr run_error;
  try {
    run = simulate(program, model, nullptr, &stop);
  } catch (...) {
    run_error = std::current_exception();
  }
  validator.join();
  if (validate_error) std::rethrow_exception(validate_error);
  if (schedules::has_fatal(diagnostics)) return std::nullopt;
  if (run_error) std::rethrow_exception(run_error);
  return run;
}

}  // namespace

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
  // The model is what runs (prepare() copies the config's network into it).
  const config::NetworkOptions& net = prepared.model.network;
  rec.info.semantics = config::to_string(net.semantics);
  const schedules::ValidateOptions validate_options = config::validate_options(net);
  if (!options.trace && !options.observer) {
    if (auto r = overlapped(*prepared.program, prepared.model, validate_options, rec.diagnostics)) {
      finish(rec, std::move(*r));
      return rec;
    }
    if (schedules::has_fatal(rec.diagnostics)) return rec;
  } else {
    rec.diagnostics = schedules::validate(*prepared.program, validate_options);
    if (schedules::has_fatal(rec.diagnostics)) return rec;
  }
  record::Trace trace;
  trace.time_unit = c.time_unit;
  record::TraceRecorder recorder(trace);
  record::ObserverList sinks;
  if (options.trace) sinks.add(&recorder);
  sinks.add(options.observer);
  finish(rec, simulate(*prepared.program, prepared.model, sinks.get()));
  if (options.trace) rec.trace = std::move(trace);
  return rec;
}

record::RunRecord analyze(const config::Config& config, const AnalyzeOptions& options) {
  const config::ResourceLimits limits{
      options.max_memory, options.trace ? config::Workload::trace : config::Workload::run};
  return analyze(config::prepare(config, limits), options);
}

}  // namespace ppsim::sim
