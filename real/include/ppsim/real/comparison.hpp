#pragma once
// Measured against predicted: the run-level figures, per-rank peaks, and how far each op's measured
// start is from the simulator's, plus calibration (the model's costs replaced by measured ones).
#include <optional>
#include <string>
#include <vector>

#include "ppsim/model/model.hpp"
#include "ppsim/record/run_record.hpp"

namespace ppsim::real {

struct RankComparison {
  int rank = 0;
  int predicted_inflight = 0, measured_inflight = 0;
  std::int64_t predicted_memory = 0, measured_memory = 0;
};

struct Comparison {
  std::string predicted_verdict, measured_verdict;
  bool verdicts_agree = false;  // same verdict kind and, for a hang, the same blocked ranks and ops
  double predicted_makespan = 0, measured_makespan = 0;
  double makespan_error = 0;  // (measured - predicted) / predicted; 0 when predicted is 0
  double predicted_bubble = 0, measured_bubble = 0;
  std::vector<RankComparison> ranks;
  bool peaks_agree = false;  // every rank's peak in-flight and peak memory equal
  // |measured start - predicted start| over the ops both runs started, time units.
  std::size_t ops_compared = 0;
  double start_error_median = 0, start_error_p95 = 0, start_error_max = 0;
  // The host running behind: time a rank spent between two of its ops (the first from 0) with
  // no op in progress and nothing to wait for, measured less predicted, as a fraction of all
  // ranks' time (P x measured makespan); and the median such gap per op, in time units.
  double host_lag_fraction = 0, host_lag_median = 0;
  // Compute ops running longer than modelled, summed, as the same fraction: under the emulated
  // compute (which only waits for the modelled time) that is the host's lag too.
  double compute_overrun_fraction = 0;
  // The host delayed the run by more than 5% of it (`emulated`: count the compute overrun too).
  bool host_too_busy(bool emulated) const {
    return host_lag_fraction + (emulated ? compute_overrun_fraction : 0.0) > 0.05;
  }
};

// Both records must come from the same Program; both need traces for the start-time errors.
Comparison compare(const record::RunRecord& predicted, const record::RunRecord& measured);

// Whether peak memory is fixed by program order alone, and so equal whatever the durations (at
// time scale 0 too): no asynchronous send frees its buffer when its transfer ends (a moment the
// peer decides), and no diagnostic makes the executor keep or free a buffer otherwise than the
// simulator. Peak in-flight always is.
bool memory_follows_program_order(const record::RunRecord& predicted, const model::Model& model);

// The model with each stage's costs replaced by the mean measured duration of that op kind on that
// stage, durations over twice the median left out as stalls (kinds not measured keep the model's
// cost), the network's latency (or bandwidth) set from the median measured transfer, and the
// launch overhead and start offset measured as below.
model::Model calibrated(const model::Model& model, const record::RunRecord& measured);

// The host's time to launch a compute op: the median gap before the F, B, I and W ops whose input
// was there before their rank's previous compute op ended (a W, an op fed by its own rank, one
// whose input waited), so that the gap is neither a wait for the input nor the latency. 0 when no
// op qualifies.
double launch_overhead(const record::RunRecord& measured);
// How late the first op came: on the rank that runs stage 0, whose first forward waits for no
// input, its start after the rank's less the launch overhead (>= 0).
double start_offset(const record::RunRecord& measured, double launch_overhead);

}  // namespace ppsim::real
