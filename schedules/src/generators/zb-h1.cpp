// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): 1F1B with the backward split
// into I (input gradient, on the critical path) and W (weight gradient, free to move). Rank r
// warms up with 1F1B's P - r - 1 forwards, then runs F, I, W per step with its W r steps behind
// its I, so the late W fill the cool-down. Peak memory on rank r: (P - r) M_B + r M_W (M >= P).
#include "ppsim/schedules/generator.hpp"
#include "weight_lag.hpp"

namespace ppsim::schedules::generators {

namespace {
Program build(const ScheduleParams& p) {
  const int P = p.ranks();
  return weight_lag_schedule(
      P, p.microbatches(), [P](int r) { return P - r - 1; }, [](int r) { return r; });
}
}  // namespace

void register_zb_h1(Registry& registry) {
  registry.add({"zb-h1",
                {},
                "zero bubble H1: 1F1B's warm-up and peak memory, backward split into I and W, "
                "rank r runs each W r steps late to fill the cool-down",
                {ranks_param("pipeline ranks P (one stage each)"),
                 microbatches_param("M >= 1 (the memory and bubble formulas hold for M >= P)"),
                 ParamSpec("chunks", "one chunk per rank").with_default(1).range(1, 1)},
                build,
                {{{"ranks", 1}, {"microbatches", 1}},
                 {{"ranks", 2}, {"microbatches", 3}},
                 {{"ranks", 4}, {"microbatches", 8}},
                 {{"ranks", 5}, {"microbatches", 2}}}});
}

}  // namespace ppsim::schedules::generators
