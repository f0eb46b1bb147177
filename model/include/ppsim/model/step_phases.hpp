#pragma once
// The parts of a training step after each rank's pipeline work, as the event simulator runs
// them (docs/MODEL.md, "The whole step"): gradient buckets on each rank's data-parallel channel,
// the tied embedding's all-reduce between the first and last stage, then the optimizer (which
// waits for every rank: the gradient norm and the fp16 overflow check are all-reduces over the
// whole model) and the distributed optimizer's parameter all-gather. Times in the config's unit.
#include <vector>

namespace ppsim::model {

struct GradBucket {
  // Its last gradient is produced this far (0..1) into the stage's last backward op: layers
  // produce gradients in reverse order.
  double ready = 1.0;
  double duration = 0;  // its all-reduce (or reduce-scatter) on the data-parallel group
};

struct StepPhases {
  bool enabled = false;
  // Buckets start when ready (Megatron's overlap_grad_reduce); else all after the rank's last op.
  bool overlap_grad_reduce = false;
  std::vector<std::vector<GradBucket>> buckets;  // per virtual stage, in the order produced
  // The word embedding's gradient summed between the ranks of the first and the last stage
  // (tied embeddings, P > 1); -1: none.
  double embedding_sync = 0;
  int embedding_first = -1, embedding_last = -1;
  std::vector<double> optimizer;     // per rank: the optimizer step over its parameters
  std::vector<double> param_gather;  // per rank: the distributed optimizer's all-gather
};

}  // namespace ppsim::model
