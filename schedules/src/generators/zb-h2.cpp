// ZB-H2 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): ZB-H1 with a deeper warm-up.
// Rank r runs 2(P - r) - 2 warm-up forwards, so the warm-up has no bubble either, then F, I, W
// per step with its W 2r steps behind its I. With F = I = W and free communication every rank is
// busy from its first op to its last once M >= 2P - 1. Peak memory on rank r:
// (2P - 2r - 1) M_B + 2r M_W (M >= 2P - 1). A unit-time greedy (I when its gradient is there,
// else F under the 2(P-r)-1 cap, else W) gives the same Table 5 rates but runs no W while an F
// can run, so its weight stashes grow with M; the fixed lag keeps the paper's memory.
#include "ppsim/schedules/generator.hpp"
#include "weight_lag.hpp"

namespace ppsim::schedules::generators {

namespace {
Program build(const ScheduleParams& p) {
  const int P = p.ranks();
  return weight_lag_schedule(
      P, p.microbatches(), [P](int r) { return 2 * (P - r) - 2; }, [](int r) { return 2 * r; });
}
}  // namespace

void register_zb_h2(Registry& registry) {
  registry.add(
      {"zb-h2",
       {},
       "zero bubble H2: rank r warms up with 2(P-r)-2 forwards (up to 2P-1 in flight) "
       "and runs each W 2r steps late",
       {ranks_param("pipeline ranks P (one stage each)"),
        microbatches_param("M >= 1 (no warm-up bubble and the memory formula need M >= 2P-1)"),
        ParamSpec("chunks", "one chunk per rank").with_default(1).range(1, 1)},
       build,
       {{{"ranks", 1}, {"microbatches", 1}},
        {{"ranks", 2}, {"microbatches", 3}},
        {{"ranks", 4}, {"microbatches", 8}},
        {{"ranks", 3}, {"microbatches", 7}},
        {{"ranks", 5}, {"microbatches", 2}}}});
}

}  // namespace ppsim::schedules::generators
