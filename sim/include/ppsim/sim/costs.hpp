#pragma once
// Durations of compute ops per virtual stage, in the config's time unit.
#include <vector>

namespace ppsim::sim {

struct StageCost {
  double forward = 1.0;
  double backward_input = 1.0;   // I
  double backward_weight = 1.0;  // W
  double backward = 2.0;         // a full B; equals I + W when the split is known
  bool split = true;             // false: only `backward` was given, I/W cannot run
};

struct CostModel {
  std::vector<StageCost> stages;  // one per virtual stage
  static CostModel uniform(int stages, StageCost cost) {
    return {std::vector<StageCost>(stages, cost)};
  }
};

}  // namespace ppsim::sim
