#pragma once
// The metrics of a run (docs/METRICS.md), defined once: the simulator fills them from its
// accumulators, compute_metrics() from any Trace (a measured run has nothing else).
#include <cstdint>
#include <vector>

#include "ppsim/record/trace.hpp"
#include "ppsim/schedules/program.hpp"

namespace ppsim::record {

struct RankMetrics {
  int rank = 0;
  double start = 0, end = 0;
  double busy = 0;          // compute time
  double idle = 0;          // makespan - busy
  double comm_exposed = 0;  // time blocked in SEND/RECV/WAIT
  int peak_inflight = 0;
  std::int64_t peak_memory_bytes = 0;  // static + live stashes + live comm buffers
  // The parts of the peak (simulated runs): static bytes, and the stashes live at the peak; the
  // rest are comm buffers.
  std::int64_t peak_static_bytes = 0, peak_activation_bytes = 0;
  std::int64_t sent_bytes = 0, recv_bytes = 0;
  std::size_t ops_done = 0;
  friend bool operator==(const RankMetrics&, const RankMetrics&) = default;
};

struct RunMetrics {
  double makespan = 0;
  double bubble_fraction = 0;  // 1 - sum(busy) / (P * makespan)
  double bubble_vs_ideal = 0;  // (makespan - max busy) / max busy
  std::int64_t comm_bytes = 0;
  std::uint64_t ops_executed = 0;
  std::int64_t peak_memory_bytes = 0;  // max over ranks
  int peak_inflight = 0;               // max over ranks
  std::vector<RankMetrics> per_rank;

  // Fills the run-level figures and each rank's idle from per_rank (start, end, busy, ...).
  void summarize();
  friend bool operator==(const RunMetrics&, const RunMetrics&) = default;
};

// The metrics of a recorded run. Sums run per rank in the order the trace holds the spans (issue
// order), as a producer's accumulators do, so a simulated run gives identical numbers both ways.
// Byte sums are 64-bit and checked: std::overflow_error when one would overflow.
RunMetrics compute_metrics(const Trace& trace, const schedules::Program& program);

}  // namespace ppsim::record
