#pragma once
// When each rank's part of one whole training step ends (model/step_phases.hpp says what the
// parts are): its pipeline work, its gradient reduction, the optimizer.
#include <vector>

namespace ppsim::record {

struct RankStep {
  double pipeline_end = 0;  // its last pipeline op
  double reduced = 0;       // its gradients reduced (and the tied embedding's)
  double optimizer_start = 0, end = 0;
  friend bool operator==(const RankStep&, const RankStep&) = default;
};

// The critical rank's step by what it spent it on, in seconds: its ops' compute and the
// communication they hold, its idle time in the pipeline, its wait for the gradients (exposed
// reduction, the tied embedding, the other ranks) and the optimizer. They add up to `time`.
struct StepBreakdown {
  double compute = 0, tp_comm = 0, cp_comm = 0, ep_comm = 0, pp_bubble = 0, dp_exposed = 0,
         optimizer = 0;
};

struct StepSummary {
  double time = 0;  // seconds, one training iteration
  StepBreakdown breakdown;
  long long global_batch = 0;  // sequences per step
  double tokens_per_second = 0, tflops_per_gpu = 0, mfu = 0;
  long long gpus = 0;
};

struct StepTiming {
  std::vector<RankStep> ranks;
  double time = 0;        // the step's end, in the run's time unit
  int critical_rank = 0;  // the rank the optimizer waited for (its gradients reduced last)
  StepSummary summary;    // filled by the run step that knows the model
};

}  // namespace ppsim::record
