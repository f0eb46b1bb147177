// `ppsim real`: run a config's Program on the executor, then print measured against predicted.
#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "commands.hpp"
#include "outputs.hpp"
#include "ppsim/base/human_bytes.hpp"
#include "ppsim/base/output_file.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/profile/calibration.hpp"
#include "ppsim/profile/kineto.hpp"
#include "ppsim/real/backend_error.hpp"
#include "ppsim/real/comparison.hpp"
#include "ppsim/real/compute.hpp"
#include "ppsim/real/executor.hpp"
#include "ppsim/real/mpi_backend.hpp"
#include "ppsim/real/settings.hpp"
#include "ppsim/real/transport.hpp"
#include "ppsim/sim/analysis.hpp"
#include "ppsim/viz/chrome_trace.hpp"
#include "ppsim/viz/html_report.hpp"
#include "ppsim/viz/json_report.hpp"
#include "ppsim/viz/trace_stream.hpp"

namespace ppsim::cli {

using base::excerpt;

namespace {

// Set by SIGINT/SIGTERM while the executor runs; the executor polls it and stops every rank.
std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free, "touched from a signal handler");
struct sigaction g_old_int {
}, g_old_term{};

extern "C" void request_stop(int sig) {
  g_stop.store(true);
  // A second signal gets the handler that was there before (the default, or base::OutputFile's,
  // which removes the temporary trace and dies): a stuck shutdown can still be killed by Ctrl-C.
  ::sigaction(sig, sig == SIGINT ? &g_old_int : &g_old_term, nullptr);
}

// Installs request_stop for SIGINT and SIGTERM for its lifetime.
class StopOnSignal {
 public:
  StopOnSignal() {
    g_stop.store(false);
    struct sigaction sa {};
    sa.sa_handler = request_stop;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &g_old_int);
    ::sigaction(SIGTERM, &sa, &g_old_term);
  }
  ~StopOnSignal() {
    ::sigaction(SIGINT, &g_old_int, nullptr);
    ::sigaction(SIGTERM, &g_old_term, nullptr);
  }
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;
};

double parse_number(const std::string& option, const std::string& text, const char* expected) {
  double x = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, x);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(x))
    throw UsageError(fmt::format("{}: '{}' is not a number; expected {}", option,
                                 base::excerpt(text, 80), expected));
  return x;
}

int parse_int(const std::string& option, const std::string& text, int min, int max) {
  long long v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || v < min || v > max)
    throw UsageError(fmt::format("{}: '{}' is not valid; expected an integer in {}..{}", option,
                                 base::excerpt(text, 80), min, max));
  return static_cast<int>(v);
}

// `--option name`: a name `registry` knows, else UsageError listing them; a GPU one (`gpu_names`)
// in a build without CUDA is BackendUnavailable, saying so (`needs`: what was not found).
template <typename Registry>
const std::string& known(const Registry& registry, const std::string& name, const char* option,
                         const char* what, std::initializer_list<const char*> gpu_names,
                         const char* needs) {
  if (registry.find(name)) return name;
  for (const char* gpu : gpu_names)
    if (name == gpu)
      throw real::BackendUnavailable(
          fmt::format("{} {}: this ppsim was built without {} ({} not found when it was "
                      "configured); rebuild where /usr/local/cuda has {}",
                      option, name, needs, gpu_names.size() > 1 ? "they were" : "it was",
                      gpu_names.size() > 1 ? "them" : "it"));
  throw UsageError(fmt::format("{}: unknown {} '{}'; expected one of {}", option, what,
                               base::excerpt(name, 80), fmt::join(registry.names(), ", ")));
}

// The command line's values over the config's `real` section.
void apply_options(real::Settings& s, const RealOptions& o) {
  if (o.backend)
    s.backend = known(real::TransportRegistry::instance(), *o.backend, "--backend", "backend",
                      {"cuda", "nccl"}, "CUDA and NCCL");
  if (o.compute)
    s.compute = known(real::ComputeRegistry::instance(), *o.compute, "--compute", "compute",
                      {"cuda"}, "CUDA");
  if (o.time_scale) {
    try {
      s.time_scale = real::parse_time_scale(*o.time_scale);
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("--time-scale: {}", e.what()));
    }
  }
  if (o.memory_scale) {
    const double x = parse_number("--memory-scale", *o.memory_scale, "a number in (0, 1]");
    if (!(x > 0 && x <= 1))
      throw UsageError(
          fmt::format("--memory-scale: '{}' is out of range; expected a number in "
                      "(0, 1]",
                      base::excerpt(*o.memory_scale, 80)));
    s.memory_scale = x;
  }
  if (o.iterations)
    s.iterations = parse_int("--iterations", *o.iterations, 1, real::kMaxIterations);
  if (o.warmup) s.warmup = parse_int("--warmup", *o.warmup, 0, real::kMaxWarmup);
  if (o.hang_timeout) {
    // Seconds as a plain number, or a duration with its unit ("200ms").
    double t = 0;
    const std::string& v = *o.hang_timeout;
    const char* end = v.data() + v.size();
    const auto [ptr, ec] = std::from_chars(v.data(), end, t);
    const bool plain = !v.empty() && ec == std::errc() && ptr == end && std::isfinite(t);
    if (!plain) {
      try {
        t = real::parse_duration(v);
      } catch (const std::invalid_argument&) {
        throw UsageError(fmt::format(
            "--hang-timeout: '{}' is not valid; expected seconds in (0, {}], e.g. 2 or 500ms",
            base::excerpt(v, 80), real::kMaxHangTimeout));
      }
    }
    if (!(t > 0 && t <= real::kMaxHangTimeout))
      throw UsageError(
          fmt::format("--hang-timeout: '{}' is out of range; expected seconds in "
                      "(0, {}]",
                      base::excerpt(v, 80), real::kMaxHangTimeout));
    s.hang_timeout = t;
  }
}

// "1 ms", "250 us", "0 (no delays)": wall clock per time unit.
std::string describe_scale(double seconds) {
  if (seconds == 0) return "0 (no delays)";
  if (seconds >= 1) return fmt::format("{:g} s", seconds);
  if (seconds >= 1e-3) return fmt::format("{:g} ms", seconds * 1e3);
  if (seconds >= 1e-6) return fmt::format("{:g} us", seconds * 1e6);
  return fmt::format("{:g} ns", seconds * 1e9);
}

nlohmann::json to_json(const real::Settings& s, double memory_scale, bool calibrate) {
  return {{"backend", s.backend},
          {"compute", s.compute},
          {"time_scale_s", s.time_scale},
          {"memory_scale", memory_scale},
          {"iterations", s.iterations},
          {"warmup", s.warmup},
          {"hang_timeout_s", s.hang_timeout},
          {"calibrate", calibrate}};
}

nlohmann::json to_json(const real::Comparison& c, const std::string& unit) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& r : c.ranks)
    ranks.push_back({{"rank", r.rank},
                     {"predicted_peak_inflight", r.predicted_inflight},
                     {"measured_peak_inflight", r.measured_inflight},
                     {"predicted_peak_memory_bytes", r.predicted_memory},
                     {"measured_peak_memory_bytes", r.measured_memory}});
  return {
      {"time_unit", unit},
      {"predicted_verdict", c.predicted_verdict},
      {"measured_verdict", c.measured_verdict},
      {"verdicts_agree", c.verdicts_agree},
      {"predicted_makespan", c.predicted_makespan},
      {"measured_makespan", c.measured_makespan},
      {"makespan_error", c.makespan_error},
      {"predicted_bubble_fraction", c.predicted_bubble},
      {"measured_bubble_fraction", c.measured_bubble},
      {"peaks_agree", c.peaks_agree},
      {"ranks", ranks},
      {"ops_compared", c.ops_compared},
      {"start_error",
       {{"median", c.start_error_median}, {"p95", c.start_error_p95}, {"max", c.start_error_max}}},
      {"host_lag",
       {{"fraction", c.host_lag_fraction},
        {"median", c.host_lag_median},
        {"compute_overrun_fraction", c.compute_overrun_fraction}}}};
}

struct PeakCheck {
  bool inflight_equal = true, memory_equal = true;
  // Program order alone fixes the memory peaks: a difference is a disagreement. Otherwise async
  // sends free their buffers when their transfers end, and the peaks depend on timing: compared
  // only in a timed run, and a difference there is the host's timing, reported, not an error.
  bool memory_fixed = true;
  bool memory_checked = true;
};

PeakCheck peak_check(const real::Comparison& c, const real::Settings& s,
                     const record::RunRecord& predicted, const model::Model& model) {
  PeakCheck p;
  for (const auto& r : c.ranks) {
    p.inflight_equal = p.inflight_equal && r.predicted_inflight == r.measured_inflight;
    p.memory_equal = p.memory_equal && r.predicted_memory == r.measured_memory;
  }
  if (!c.peaks_agree && c.ranks.empty()) p.inflight_equal = p.memory_equal = false;
  p.memory_fixed = real::memory_follows_program_order(predicted, model);
  p.memory_checked = s.time_scale > 0 || p.memory_fixed;
  return p;
}

// "rank 3 predicted 2424307712 B, measured 2420113408 B; ..." for the ranks whose peak differs.
std::string peak_differences(const real::Comparison& c, bool memory) {
  std::string out;
  for (const auto& r : c.ranks) {
    const std::int64_t p = memory ? r.predicted_memory : r.predicted_inflight;
    const std::int64_t m = memory ? r.measured_memory : r.measured_inflight;
    if (p == m) continue;
    out += fmt::format("{}rank {} predicted {}{}, measured {}{}", out.empty() ? "" : "; ", r.rank,
                       p, memory ? " B" : "", m, memory ? " B" : "");
  }
  return out;
}

std::string text_report(const std::string& path, const config::Prepared& prepared,
                        const real::Settings& s, const real::Execution& run,
                        const record::RunRecord& predicted, const real::Comparison& c,
                        bool calibrate, const std::optional<double>& uncalibrated_makespan) {
  const std::string& u = predicted.info.time_unit;
  const auto& program = *prepared.program;
  std::string out = fmt::format(
      "ppsim real: {} ({}: {} P={} M={}) backend {}, compute {}, time scale {}{}, "
      "{} iteration{} + {} warmup, memory scale {:g}{}\n",
      path, prepared.config.name, predicted.info.schedule, program.ranks(), program.microbatches(),
      s.backend, s.compute, describe_scale(s.time_scale),
      s.time_scale > 0 ? fmt::format(" of wall clock per time unit ({})", u) : "", s.iterations,
      s.iterations == 1 ? "" : "s", s.warmup, run.memory_scale,
      run.memory_scale == 0 ? " (host buffers hold payload stamps only: the compute holds the "
                              "real memory)"
                            : "");
  out += fmt::format("  outcome          {}\n",
                     run.record.metrics ? real::to_string(run.outcome)
                                        : "not run: the program is invalid (errors below)");
  out += fmt::format("\n  {:<18} {:>16} {:>16} {:>10}\n", "",
                     calibrate ? "calibrated" : "predicted", "measured", "error");
  out +=
      fmt::format("  {:<18} {:>16} {:>16}\n", "verdict", c.predicted_verdict, c.measured_verdict);
  // At time scale 0 nothing waits for its modelled duration: times are not comparable.
  const bool timed = s.time_scale > 0;
  out += fmt::format("  {:<18} {:>16} {:>16} {:>10}\n", fmt::format("makespan ({})", u),
                     fmt::format("{:.4f}", c.predicted_makespan),
                     fmt::format("{:.4f}", c.measured_makespan),
                     timed ? fmt::format("{:+.2f}%", 100 * c.makespan_error) : "n/a");
  if (uncalibrated_makespan)
    out += fmt::format("  {:<18} {:>16}\n", "  (uncalibrated)",
                       fmt::format("{:.4f}", *uncalibrated_makespan));
  out += fmt::format("  {:<18} {:>16.4f} {:>16.4f}\n", "bubble_fraction", c.predicted_bubble,
                     c.measured_bubble);
  // --calibrate on a transport with collectives: their fits, for the fragment's `collectives`.
  for (const auto& [k, f] : real::fit_collectives(run.collectives))
    out += fmt::format("  {:<18} {:.2f} us + bytes at {:.4g} GB/s bus, {} ranks\n",
                       model::to_string(k), f.latency * 1e6, f.bus_bandwidth / 1e9, f.ranks);
  if (!c.ranks.empty()) {
    out += fmt::format("\n  {:>4} {:>10} {:>10} {:>14} {:>14}\n", "rank", "inflight", "inflight",
                       "peak_mem", "peak_mem");
    out += fmt::format("  {:>4} {:>10} {:>10} {:>14} {:>14}\n", "", "predicted", "measured",
                       "predicted", "measured");
    for (const auto& r : c.ranks) {
      std::string note;
      if (r.predicted_inflight != r.measured_inflight)
        note += fmt::format("  <- in-flight differs by {:+}",
                            r.measured_inflight - r.predicted_inflight);
      if (r.predicted_memory != r.measured_memory) {
        const std::int64_t d = r.measured_memory - r.predicted_memory;
        note += fmt::format("  <- memory differs by {}{}", d < 0 ? "-" : "+",
                            base::human_bytes(d < 0 ? -d : d));
      }
      out += fmt::format("  {:>4} {:>10} {:>10} {:>14} {:>14}{}\n", r.rank, r.predicted_inflight,
                         r.measured_inflight, base::human_bytes(r.predicted_memory),
                         base::human_bytes(r.measured_memory), note);
    }
    const PeakCheck peaks = peak_check(c, s, predicted, prepared.model);
    if (peaks.inflight_equal && peaks.memory_equal)
      out += "  peaks equal      yes\n";
    else if (peaks.inflight_equal && !peaks.memory_checked)
      out +=
          "  peaks equal      in-flight yes; memory not compared at time scale 0 (async sends "
          "free their buffers when the transfer ends, so memory peaks depend on timing here)\n";
    else if (peaks.inflight_equal && !peaks.memory_fixed)
      out += fmt::format(
          "  peaks equal      in-flight yes; memory NO: {} (async sends free their buffers when "
          "their transfers end; the host's timing, off the model by the op start errors below, "
          "moved such an end across an allocation)\n",
          peak_differences(c, true));
    else
      out += "  peaks equal      NO\n";
  }
  out += fmt::format(
      "\n  op start error   median {:.4f} {}, p95 {:.4f} {}, max {:.4f} {} ({} ops)\n",
      c.start_error_median, u, c.start_error_p95, u, c.start_error_max, u, c.ops_compared);
  if (!timed)
    out += "  (time scale 0: ops take no wall-clock time, so measured times are not comparable)\n";
  const bool emulated = s.compute == "emulated";
  if (timed && c.host_too_busy(emulated))
    out += fmt::format(
        "  host lag         {:.1f}% of the ranks' time went to the host: {:.1f}% between ops with "
        "nothing to wait for (median {:.4f} {} per op){}; this machine is too busy for time "
        "scale {}: the measured times are the host's, not the schedule's; use a larger "
        "--time-scale or a quieter machine\n",
        100 * (c.host_lag_fraction + (emulated ? c.compute_overrun_fraction : 0.0)),
        100 * c.host_lag_fraction, c.host_lag_median, u,
        emulated ? fmt::format(", {:.1f}% in ops overrunning their modelled time",
                               100 * c.compute_overrun_fraction)
                 : "",
        describe_scale(s.time_scale));
  if (!run.makespans.empty()) {
    std::string list;
    for (double m : run.makespans) list += fmt::format("{}{:.4f}", list.empty() ? "" : " ", m);
    out += fmt::format("  iterations       {} ({}; the median one is reported)\n", list, u);
  }
  if (run.real_peak_bytes > 0)
    out += fmt::format("  real memory      {} at most on one rank\n",
                       base::human_bytes(run.real_peak_bytes));
  for (const auto& line : run.notes) out += fmt::format("  {}\n", line);
  if (run.outcome == real::Outcome::hang && run.record.deadlock) {
    out += fmt::format("\nobserved hang (watchdog after {:g} s without progress):\n{}\n",
                       s.hang_timeout, run.record.deadlock->describe());
    out += c.verdicts_agree ? "the simulator predicted the same\n"
                            : "the simulator predicted otherwise:\n" +
                                  (predicted.deadlock ? predicted.deadlock->describe() + "\n"
                                                      : "  " + c.predicted_verdict + "\n");
  }
  if (!run.record.diagnostics.empty()) {
    out += "\n";
    for (const auto& d : run.record.diagnostics)
      out += fmt::format("  {}: {}\n", d.kind, d.message);
  }
  return out;
}

int real_body(const std::string& path, const RealOptions& o, const CommonOptions& common);

NamedOutputs named_outputs(const RealOptions& o) {
  return {{"--trace", o.trace_file}, {"--report", o.report_file}};
}

}  // namespace

int cmd_real(const std::string& path, const RealOptions& o, const CommonOptions& common) {
  // A GPU backend that cannot run here (no driver, no device, too few GPUs) is neither bad input
  // nor a wrong schedule: its own exit code, and the message says what to do instead.
  return run_guarded(path, [&] {
    refuse_clashes(named_outputs(o), {path, common.calibration}, o.json);
    // --profile-trace against the files named here, before any is read (again with the config's
    // own when the outputs are opened).
    ProfileDirectory(o.profile_dir, named_outputs(o), {path, common.calibration});
    try {
      return real_body(path, o, common);
    } catch (const real::BackendUnavailable& e) {
      std::cerr << "ppsim: error: " << path << ": " << e.what() << "\n";
      return kNoDevice;
    }
  });
}

namespace {

// Under a launcher (mpirun): the World of a backend that runs one rank per process. Every process
// loads the config and fails alike on bad input before it.
std::unique_ptr<real::World> world_for(const config::Config& cfg, const real::Settings& settings) {
  const real::TransportInfo* ti = real::TransportRegistry::instance().find(settings.backend);
  if (ti && ti->per_process) return real::make_mpi_world();
  if (const int n = real::launched_processes(); n > 1)
    throw config::ConfigError(
        cfg.source, "real.backend",
        fmt::format("ppsim was started by a launcher as {} processes, and the {} backend runs "
                    "every rank in one process (each would run the whole program): under "
                    "mpirun use --backend mpi, one process per rank, or run ppsim alone",
                    n, settings.backend));
  return nullptr;
}

// What a run writes, published together after it (all or none).
struct Outputs {
  std::optional<ProfileDirectory> profile;  // (destroyed after the set: its temporaries first)
  base::OutputSet set;
  base::OutputFile *trace = nullptr, *report = nullptr;
};

// Opened before the run: a bad path fails at once, and the temporaries go whatever happens.
void open_outputs(const RealOptions& o, const std::vector<std::string>& inputs, Outputs& out) {
  out.profile.emplace(o.profile_dir, named_outputs(o), inputs);
  if (!o.trace_file.empty()) out.trace = &out.set.add("--trace", o.trace_file);
  if (!o.report_file.empty()) out.report = &out.set.add("--report", o.report_file);
}

int real_run(const std::string& path, const RealOptions& o, const config::Config& cfg,
             const real::Settings& settings, const config::Prepared& prepared, real::World* world,
             Outputs& out, bool* ran = nullptr);

int real_body(const std::string& path, const RealOptions& o, const CommonOptions& common) {
  real::register_settings_section();
  config::Config cfg = load_with_calibration(path, common);
  // The config, the CSV it reads and the calibration fragment: none may be replaced.
  std::vector<std::string> inputs = read_files(cfg);
  inputs.push_back(common.calibration);
  refuse_clashes(named_outputs(o), inputs, o.json);
  real::Settings settings = real::settings_of(cfg);
  apply_options(settings, o);
  settings.max_memory = common.max_memory;
  const config::Prepared prepared =
      config::prepare(cfg, {common.max_memory, config::Workload::trace});
  const auto world = world_for(cfg, settings);
  // Refused before the prediction is simulated: 100,000 ranks must not be simulated first.
  real::check_runnable(prepared, {settings, &g_stop, world.get()});
  Outputs out;
  if (!world || world->processes() == 1) {
    open_outputs(o, inputs, out);
    return real_run(path, o, cfg, settings, prepared, world.get(), out);
  }
  // Process 0 writes the files and reports; the others run their rank, then end with its exit
  // code once it is done (a process that ended first with an error would make mpirun stop the
  // job). What fails in one process only is told to all, so that none waits for it.
  std::string failed;
  if (world->process() == 0) try {
      open_outputs(o, inputs, out);
    } catch (const base::OutputError& e) {
      failed = e.what();
      // Said before the others learn of it: the first process to end makes mpirun stop the job.
      std::cerr << "ppsim: error: " << failed << std::endl;
    }
  world->broadcast(failed);
  if (!failed.empty()) return kBadInput;
  // Errors before the run (the config, the backend) are the same in every process; after it,
  // process 0's (writing a file) are its own, and the others wait for its exit code.
  std::string code;
  bool ran = false;
  try {
    if (world->process() != 0) {
      StopOnSignal on_signal;  // (mpirun passes SIGINT on to every process: all stop together)
      real::execute(prepared, {settings, &g_stop, world.get()});
    } else {
      try {
        code = std::to_string(real_run(path, o, cfg, settings, prepared, world.get(), out, &ran));
      } catch (const base::OutputError&) {
        if (!ran) throw;
        code = std::to_string(kBadInput);
        world->broadcast(code);
        throw;
      }
    }
  } catch (const config::ConfigError&) {
    throw;
  } catch (const real::BackendUnavailable&) {
    throw;
  } catch (const base::OutputError&) {
    throw;
  } catch (const std::exception& e) {
    // One process failed where the others may be waiting for it: the job stops.
    std::cerr << "ppsim: error: " << path << ": process " << world->process() << ": " << e.what()
              << "\n";
    world->abort(kRankFailed);
  }
  world->broadcast(code);
  return std::stoi(code);
}

int real_run(const std::string& path, const RealOptions& o, const config::Config& cfg,
             const real::Settings& settings, const config::Prepared& prepared, real::World* world,
             Outputs& out, bool* ran) {
  {
    base::OutputFile* const trace = out.trace;
    base::OutputFile* const report = out.report;

    record::RunRecord predicted = sim::analyze(prepared, {.trace = true});
    real::Execution run;
    {
      StopOnSignal on_signal;
      run = real::execute(prepared, {settings, &g_stop, world, o.calibrate});
    }
    if (ran) *ran = true;
    const bool interrupted = run.outcome == real::Outcome::interrupted;

    std::optional<double> uncalibrated;
    std::optional<model::Model> calibrated;
    if (o.calibrate && run.record.trace && run.outcome == real::Outcome::finished) {
      config::Prepared again = prepared;
      again.model = real::calibrated(prepared.model, run.record);
      calibrated = again.model;
      if (predicted.metrics) uncalibrated = predicted.metrics->makespan;
      predicted = sim::analyze(again, {.trace = true});
    }
    const real::Comparison c = real::compare(predicted, run.record);

    // The simulated and the measured run in one trace, one process group each; the measured
    // one also when partial (hang, interrupt, failure): what happened up to the stop is what
    // one wants to look at.
    if (trace) {
      if (run.record.trace) {
        std::vector<viz::LabelledRun> runs;
        if (predicted.trace) runs.push_back({&predicted, "simulated"});
        runs.push_back({&run.record, "measured"});
        viz::write_chrome_trace(trace->stream(), runs,
                                {config::microseconds_per_unit(cfg.time_unit), cfg.name},
                                viz::trace_format_for(o.trace_file));
      } else {
        trace->abandon();
      }
    }

    if (run.record.trace) out.profile->write(run.record, out.set);
    if (report) {
      viz::HtmlReportOptions options;
      options.title = fmt::format("{}: simulated and measured", cfg.name);
      viz::write_html_report(report->stream(), {predicted, run.record}, options);
    }
    out.set.commit();  // every file, or none
    out.profile->clear_stale();

    // Disagreement: a different verdict, or (for a run that finished) different peaks. Peak
    // memory may depend on transfer times; at time scale 0 it is compared only where program
    // order alone fixes it.
    const PeakCheck peaks = peak_check(c, settings, predicted, prepared.model);
    std::string disagreement;
    if (run.outcome != real::Outcome::interrupted && run.outcome != real::Outcome::failed) {
      if (!c.verdicts_agree)
        disagreement = fmt::format("the simulator predicted {}, the executor observed {}",
                                   c.predicted_verdict, c.measured_verdict);
      else if (run.outcome == real::Outcome::finished && !peaks.inflight_equal)
        disagreement = "peak in-flight microbatches differ: " + peak_differences(c, false);
      else if (run.outcome == real::Outcome::finished && peaks.memory_fixed && !peaks.memory_equal)
        disagreement = "peak memory differs: " + peak_differences(c, true);
    }
    int code = kOk;
    if (interrupted)
      code = kInterrupted;
    else if (run.outcome == real::Outcome::failed)
      code = kRankFailed;
    else if (!disagreement.empty() || !run.record.ok())
      code = kWrong;

    if (o.json) {
      nlohmann::json j;
      j["config"] = path;
      j["name"] = cfg.name;
      j["settings"] = to_json(settings, run.memory_scale, o.calibrate);
      j["outcome"] = real::to_string(run.outcome);
      j["failure"] = run.failure.empty() ? nlohmann::json(nullptr) : nlohmann::json(run.failure);
      j["predicted"] = viz::to_json(predicted);
      if (uncalibrated) j["predicted_uncalibrated_makespan"] = *uncalibrated;
      if (calibrated) {
        j["calibrated"] =
            profile::calibration_fragment(*calibrated, prepared.program.get(), cfg.time_unit);
        if (const auto coll = profile::collectives_fragment(run.collectives); !coll.is_null())
          j["calibrated"]["collectives"] = coll;
      }
      j["measured"] = viz::to_json(run.record);
      j["comparison"] = to_json(c, predicted.info.time_unit);
      j["comparison"]["memory_peaks_compared"] = peaks.memory_checked;
      j["comparison"]["memory_peaks_fixed_by_program_order"] = peaks.memory_fixed;
      j["iteration_makespans"] = run.makespans;
      j["real_peak_bytes"] = run.real_peak_bytes;
      if (!run.notes.empty()) j["backend_notes"] = run.notes;
      j["disagreement"] =
          disagreement.empty() ? nlohmann::json(nullptr) : nlohmann::json(disagreement);
      j["exit_code"] = code;
      std::cout << viz::json_text(j) << "\n";
    } else {
      std::cout << text_report(path, prepared, settings, run, predicted, c, o.calibrate,
                               uncalibrated);
      if (!disagreement.empty()) std::cout << "\nDISAGREEMENT: " << disagreement << "\n";
    }
    std::cout.flush();
    // stdout holds only the JSON object: the loud line goes to stderr there.
    if (!disagreement.empty() && o.json) std::cerr << "DISAGREEMENT: " << disagreement << "\n";
    if (run.outcome == real::Outcome::failed)
      std::cerr << "ppsim: error: " << path << ": a rank failed: " << run.failure << "\n";
    if (interrupted)
      std::cerr << "ppsim: " << path << ": interrupted; every rank stopped"
                << (trace && run.record.trace ? ", partial trace written" : "") << "\n";
    return code;
  }
}

}  // namespace

}  // namespace ppsim::cli
