#include "ppsim/real/executor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <latch>
#include <limits>
#include <thread>
#include <tuple>

#include "ppsim/base/enum_names.hpp"
#include "ppsim/config/error.hpp"
#include "ppsim/config/resources.hpp"
#include "ppsim/config/run_step.hpp"
#include "ppsim/model/op_duration.hpp"
#include "ppsim/real/compute.hpp"
#include "ppsim/real/transport.hpp"
#include "ppsim/record/metrics.hpp"
#include "ppsim/record/wait_graph.hpp"
#include "ppsim/schedules/validation.hpp"
#include "process_report.hpp"
#include "rank_runner.hpp"
#include "watchdog.hpp"

namespace ppsim::real {

namespace {

using detail::pack;
using detail::ProcessReport;
using detail::RankRunner;
using detail::RunShared;
using detail::unpack;

// The host backend runs a thread per rank.
constexpr int kMaxRanks = 1024;
// Events this close (a fraction of a time unit) count as one instant when sent buffers are
// released: the host's timing jitter, tens of microseconds, cannot order them better.
constexpr double kTieWindow = 0.02;
// Real bytes allocated over a whole run, at most (the memory scale is chosen to fit).
constexpr double kRealBudget = 256.0 * 1024 * 1024;

// Every byte the run could allocate, in the model: each F's stash, each comm op's buffer, the
// static bytes.
double modelled_bytes(const schedules::Program& p, const model::Model& m) {
  double bytes = 0;
  for (int r = 0; r < p.ranks(); ++r)
    for (const auto& op : p.ops(r)) {
      if (schedules::is_comm(op.kind)) bytes += static_cast<double>(m.network.boundary_bytes);
      if (op.kind == schedules::OpKind::F || schedules::is_composite(op.kind))
        bytes += static_cast<double>(m.memory.largest_activation());
    }
  for (int s = 0; s < p.stages(); ++s) bytes += static_cast<double>(m.memory.stage(s).static_bytes);
  return bytes;
}

// Real bytes that --max-memory leaves for the buffers beside the estimate of the run's own tables
// (config::estimated_bytes); negative: none. Unlimited without --max-memory.
double room_for_buffers(const config::Prepared& prepared, const Settings& s) {
  if (s.max_memory == 0) return std::numeric_limits<double>::infinity();
  const double rest =
      config::estimated_bytes(config::estimate_ops(prepared.config), config::Workload::trace);
  return static_cast<double>(s.max_memory) - rest;
}

// The default memory scale keeps every byte the run could allocate within the budget.
double auto_memory_scale(const schedules::Program& p, const model::Model& m, double budget) {
  const double bytes = modelled_bytes(p, m);
  return bytes > budget ? budget / bytes : 1.0;
}

// The hazards the ranks see as they run (rank_runner.cpp); validation reports the same ones
// from program order.
bool observed_at_run_time(const std::string& kind) {
  return kind == "read_before_wait" || kind == "missing_receive" || kind == "never_waited" ||
         kind == "buffer_released_before_wait" || kind == "message_order_mismatch";
}

struct Iteration {
  Outcome outcome = Outcome::finished;
  std::string failure;
  record::Trace trace;
  std::vector<schedules::Diagnostic> diagnostics;
  std::optional<record::Deadlock> deadlock;
  std::int64_t real_peak = 0;
  double makespan = 0;
};

// This process's part of the iteration, to process 0 (under a World).
ProcessReport report_of(const Iteration& it, const RankRunner& rr) {
  ProcessReport r;
  r.rank = rr.rank();
  r.timeline = it.trace.ranks[static_cast<std::size_t>(r.rank)];
  r.spans = it.trace.spans;
  r.transfers = it.trace.transfers;
  r.counters = it.trace.counters;
  r.diagnostics = it.diagnostics;
  r.edges = rr.wait_edges();
  r.real_peak = rr.real_peak();
  r.failure = it.failure;
  return r;
}

Iteration run_once(const config::Prepared& prepared, const schedules::Semantics& sem,
                   Transport& transport, Compute& compute, const Settings& s, double memory_scale,
                   std::uint64_t iteration, const std::atomic<bool>* stop, World* world) {
  const schedules::Program& p = *prepared.program;
  const int R = p.ranks();
  Iteration it;
  it.trace.time_unit = prepared.config.time_unit;
  it.trace.origin = "measured";
  it.trace.clock = "steady_clock";
  record::TraceRecorder recorder(it.trace);
  RunShared run{p,
                sem,
                prepared.model,
                transport,
                compute,
                RunClock(),
                s.time_scale > 0 ? s.time_scale : 1e-3,
                s.time_scale * kTieWindow,
                memory_scale,
                iteration,
                &recorder};
  // Under a World this process runs its own rank only.
  std::vector<std::unique_ptr<RankRunner>> ranks;
  for (int r = 0; r < R; ++r)
    if (world == nullptr || r == world->process())
      ranks.push_back(std::make_unique<RankRunner>(run, r));
  recorder.on_begin(R, /*concurrent=*/true);

  // Before any rank thread exists: if either throws, there is nothing to stop.
  const TransportContext tc{p, sem, prepared.model.network, s.time_scale, run.clock};
  const ComputeContext cc{prepared.config, p, prepared.model, s.time_scale, run.clock, run.cancel};
  try {
    transport.begin(tc);
    compute.begin(cc);
  } catch (const config::ConfigError& e) {  // a transport names the key, not the file
    if (!e.source().empty()) throw;
    throw config::ConfigError(prepared.config.source_of(e.key()), e.key(), e.message());
  }
  // Every thread waits at the gate, so that the clock starts when all of them can run.
  std::latch gate(1);
  std::vector<std::jthread> threads;
  threads.reserve(ranks.size());
  try {
    for (auto& rr : ranks)
      threads.emplace_back([&gate, &rr] {
        gate.wait();
        rr->run();
      });
  } catch (const std::system_error& e) {  // out of threads: stop the ones that started
    run.cancel.store(true);
    gate.count_down();
    threads.clear();
    transport.end();
    throw config::ConfigError(prepared.config.source, "schedule.ranks",
                              fmt::format("cannot start a thread per rank: {}", e.what()));
  }
  // The processes start their clocks together (within the barrier's skew: microseconds on one
  // node).
  if (world) world->barrier();
  run.clock = RunClock();
  gate.count_down();
  it.outcome = detail::Watchdog(s.hang_timeout, stop, world).watch(run, ranks);
  threads.clear();  // joins
  compute.end();
  transport.end();
  // A receive never waited may have completed after its rank ended: its transfer happened.
  for (auto& rr : ranks) rr->report_unseen_transfers();
  recorder.on_end();

  it.failure = run.failure;
  if (!it.failure.empty()) it.outcome = Outcome::failed;
  std::vector<record::WaitEdge> edges;
  std::vector<bool> finished(static_cast<std::size_t>(R));
  for (auto& rr : ranks) {
    auto& d = rr->diagnostics();
    it.diagnostics.insert(it.diagnostics.end(), d.begin(), d.end());
    finished[static_cast<std::size_t>(rr->rank())] = rr->timeline().finished;
    for (auto& e : rr->wait_edges()) edges.push_back(std::move(e));
    it.real_peak = std::max(it.real_peak, rr->real_peak());
  }
  if (world) {
    // Process 0 joins every process's part, in rank order, as the recorder joins its threads'.
    auto parts = world->gather(pack(report_of(it, *ranks.front())));
    if (world->process() != 0) return it;
    it.trace.spans.clear();
    it.trace.transfers.clear();
    it.trace.counters.clear();
    it.diagnostics.clear();
    it.failure.clear();
    edges.clear();
    for (const auto& bytes : parts) {
      ProcessReport r = unpack(bytes);
      const auto rank = static_cast<std::size_t>(r.rank);
      it.trace.ranks[rank] = r.timeline;
      it.trace.spans.insert(it.trace.spans.end(), r.spans.begin(), r.spans.end());
      it.trace.transfers.insert(it.trace.transfers.end(), r.transfers.begin(), r.transfers.end());
      it.trace.counters.insert(it.trace.counters.end(), r.counters.begin(), r.counters.end());
      for (auto& d : r.diagnostics) it.diagnostics.push_back(std::move(d));
      for (auto& e : r.edges) edges.push_back(std::move(e));
      finished[rank] = r.timeline.finished;
      it.real_peak = std::max(it.real_peak, r.real_peak);
      if (it.failure.empty()) it.failure = std::move(r.failure);
    }
    if (!it.failure.empty()) it.outcome = Outcome::failed;
  }
  if (it.outcome == Outcome::hang) it.deadlock = record::find_deadlock(R, edges, finished);
  it.makespan = record::compute_metrics(it.trace, p).makespan;
  return it;
}

}  // namespace

const char* to_string(Outcome outcome) {
  constexpr std::array<const char*, 4> kNames = {"finished", "hang", "interrupted", "failed"};
  return base::enum_value(outcome, kNames, "?");
}

void check_runnable(const config::Prepared& prepared, const ExecOptions& options) {
  const Settings& s = options.settings;
  const config::Config& c = prepared.config;
  const TransportInfo* ti = TransportRegistry::instance().find(s.backend);
  if (ti == nullptr) throw config::ConfigError(c.source, "real.backend", "unknown backend");
  const ComputeInfo* ci = ComputeRegistry::instance().find(s.compute);
  if (ci == nullptr) throw config::ConfigError(c.source, "real.compute", "unknown compute");
  const schedules::Program& p = *prepared.program;
  World* world = options.world;
  if (ti->per_process && world == nullptr)
    throw config::ConfigError(c.source, "real.backend",
                              fmt::format("the {} backend runs one rank per process: start it "
                                          "with a launcher, e.g. mpirun -np {} ppsim real ...",
                                          s.backend, p.ranks()));
  if (world && !ti->per_process)
    throw config::ConfigError(c.source, "real.backend",
                              fmt::format("the {} backend runs every rank in one process; under "
                                          "a launcher ({}) use a backend that runs one rank per "
                                          "process (mpi)",
                                          s.backend, world->name()));
  if (world && world->processes() != p.ranks())
    throw config::ConfigError(
        c.source, "schedule.ranks",
        fmt::format("the {} backend runs one rank per process: the config has {} ranks and {} "
                    "started {} processes (mpirun -np {})",
                    s.backend, p.ranks(), world->name(), world->processes(), p.ranks()));
  if (p.ranks() > kMaxRanks)
    throw config::ConfigError(
        c.source, "schedule.ranks",
        fmt::format("the {} backend runs a thread per rank: at most {} ranks, got {}", s.backend,
                    kMaxRanks, p.ranks()));
  // The real buffers within --max-memory: an explicit --memory-scale whose buffers could pass it
  // is refused; the chosen scale fits them in what is left (and there must be some left).
  if (s.max_memory > 0) {
    const double room = room_for_buffers(prepared, s);
    const double need = modelled_bytes(p, prepared.model) * s.memory_scale;
    if (room < 1024.0 * 1024)
      throw config::ConfigError(
          c.source, "real.memory_scale",
          fmt::format("--max-memory {:.0f} B leaves no room for the run's real buffers beside "
                      "its tables; raise --max-memory",
                      static_cast<double>(s.max_memory)));
    if (s.memory_scale > 0 && need > room)
      throw config::ConfigError(
          c.source, "real.memory_scale",
          fmt::format("at memory scale {} the run could allocate {:.4g} bytes of real buffers, "
                      "more than the {:.4g} that --max-memory leaves; lower the memory scale or "
                      "leave it to be chosen",
                      s.memory_scale, need, room));
  }
  // Wall times past the clock's exact range would overflow it (a run "finished" in 0.02 ms):
  // one transfer, or the compute of the busiest rank, at this time scale.
  if (s.time_scale > 0) {
    const auto& net = prepared.model.network;
    const double transfer =
        net.latency +
        (net.bandwidth > 0 ? static_cast<double>(net.boundary_bytes) / net.bandwidth : 0.0);
    double busiest = 0;
    for (int r = 0; r < p.ranks(); ++r) {
      double busy = 0;
      for (const schedules::Op& op : p.ops(r))
        busy += model::op_duration(prepared.model.costs, p, r, op).value_or(0.0);
      busiest = std::max(busiest, busy);
    }
    for (const auto& [what, key, units] :
         {std::tuple{"one transfer", "comm.latency", transfer},
          std::tuple{"the busiest rank's compute", "costs", busiest}})
      if (!(units * s.time_scale <= kMaxRunSeconds))
        throw config::ConfigError(
            c.source, key,
            fmt::format("{} would take {:.3g} s of wall clock at {} s per time unit, more than "
                        "the {:.0f} s the clock holds; lower the time scale (--time-scale) or {}",
                        what, units * s.time_scale, s.time_scale, kMaxRunSeconds, key));
  }
}

Execution execute(const config::Prepared& prepared, const ExecOptions& options) {
  check_runnable(prepared, options);
  const Settings& s = options.settings;
  const config::Config& c = prepared.config;
  const TransportInfo* ti = TransportRegistry::instance().find(s.backend);
  const ComputeInfo* ci = ComputeRegistry::instance().find(s.compute);
  const schedules::Program& p = *prepared.program;
  World* world = options.world;

  Execution ex;
  record::RunRecord& rec = ex.record;
  rec = config::start_run(prepared, "measured");
  if (!config::runnable(rec)) return ex;
  // Kept apart: those a run shows are taken from the run (below).
  auto diagnostics = std::move(rec.diagnostics);
  rec.diagnostics.clear();
  for (int r = 0; r < p.ranks(); ++r)
    for (const auto& op : p.ops(r))
      if (schedules::is_compute(op.kind) && !model::op_duration(prepared.model.costs, p, r, op))
        throw config::ConfigError(
            c.source, "costs",
            fmt::format("{} needs backward_input and backward_weight costs", p.op_text(r, op)));

  const schedules::Semantics sem(p);
  (void)sem.cell_count();  // indexes the cells now: the ranks' threads then only read it
  auto transport = ti->make();
  auto compute = ci->make();
  ex.memory_scale = s.memory_scale > 0 ? s.memory_scale
                    : compute->holds_memory()
                        ? 0.0
                        : auto_memory_scale(p, prepared.model,
                                            std::min(kRealBudget, room_for_buffers(prepared, s)));
  std::vector<Iteration> kept;
  const int total = s.warmup + s.iterations;
  for (int i = 0; i < total; ++i) {
    Iteration it = run_once(prepared, sem, *transport, *compute, s, ex.memory_scale,
                            static_cast<std::uint64_t>(i), options.stop, world);
    const bool over = it.outcome != Outcome::finished;
    if (i >= s.warmup || over) {
      ex.makespans.push_back(it.makespan);
      kept.push_back(std::move(it));
    }
    if (over) break;  // a hang, an interrupt or a failure is the run reported
  }
  // The median iteration (by makespan) is the one reported; a run that did not finish is.
  std::size_t pick = kept.size() - 1;
  if (kept.back().outcome == Outcome::finished) {
    std::vector<std::size_t> order(kept.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return kept[a].makespan < kept[b].makespan; });
    pick = order[(order.size() - 1) / 2];
  }
  Iteration& it = kept[pick];
  ex.outcome = it.outcome;
  if (world && world->process() != 0) return ex;  // process 0 holds the run and reports it
  ex.notes = transport->report();
  for (auto& line : compute->report()) ex.notes.push_back(std::move(line));
  if (options.measure_collectives && it.outcome == Outcome::finished)
    ex.collectives = transport->measure_collectives();
  ex.outcome = it.outcome;
  ex.failure = it.failure;
  for (const auto& k : kept) ex.real_peak_bytes = std::max(ex.real_peak_bytes, k.real_peak);
  // What only program order shows (a missing op, ...) comes from validation; what a run shows,
  // from this run, so that a hazard is reported once.
  for (auto& d : diagnostics)
    if (!observed_at_run_time(d.kind)) rec.diagnostics.push_back(std::move(d));
  rec.diagnostics.insert(rec.diagnostics.end(), it.diagnostics.begin(), it.diagnostics.end());
  rec.deadlock = std::move(it.deadlock);
  rec.metrics = record::compute_metrics(it.trace, p);
  // The measured peaks against the same memory as the prediction's.
  rec.out_of_memory =
      record::out_of_memory(*rec.metrics, prepared.model.memory.limit_bytes, /*split=*/false);
  rec.trace = std::move(it.trace);
  return ex;
}

}  // namespace ppsim::real
