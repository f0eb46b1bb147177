// ZB-V (Qi et al., "Zero Bubble Pipeline Parallelism", section 6): two chunks per rank in a V
// (chunk 0 runs down ranks 0..P-1, chunk 1 back up), backward split into I and W. The per-rank
// order is the one PyTorch's ScheduleZBVZeroBubble computes, op for op.
#include <algorithm>
#include <initializer_list>

#include "ppsim/schedules/generator.hpp"

namespace ppsim::schedules::generators {

namespace {

// One chunk of a rank: its stage and the next microbatch of each kind.
struct Lane {
  int stage;
  int f = 0, i = 0, w = 0;
};

// Runs `round` `rounds` times; each round advances every counter in `counters` by one. Ops of
// microbatches >= M are dropped, so once all those counters reach M no later round emits anything:
// the rest are skipped and the counters moved on, which keeps the work O(M) per rank however
// large P is.
template <typename Round>
void rounds_of(int rounds, int M, std::initializer_list<int*> counters, Round round) {
  int done = 0;
  for (; done < rounds; ++done) {
    bool live = false;
    for (const int* c : counters) live = live || *c < M;
    if (!live) break;
    round();
  }
  for (int* c : counters) *c += rounds - done;
}

Program build(const ScheduleParams& p) {
  const int P = p.ranks(), M = p.microbatches();
  // PyTorch plans at least 2P-1 microbatches (enough to fill the V) and drops the ops of those
  // that do not exist, so a small M keeps the full-size order minus the missing microbatches.
  const int planned = std::max(2 * P - 1, M);
  Program program(M, make_placement(PlacementKind::v, P, 2));
  for (int r = 0; r < P; ++r) {
    program.reserve(r, 6 * static_cast<std::size_t>(M));
    Lane down{r}, up{2 * P - 1 - r};
    auto emit = [&](OpKind kind, int stage, int mb) {
      if (mb < M) program.push(r, Op::compute(kind, stage, mb));
    };
    auto forward = [&](Lane& l) { emit(OpKind::F, l.stage, l.f++); };
    auto input = [&](Lane& l) { emit(OpKind::I, l.stage, l.i++); };
    auto weight = [&](Lane& l) { emit(OpKind::W, l.stage, l.w++); };

    // Warm-up: fill chunk 0 (fewer forwards the further down the V), alternate chunks while the
    // first microbatches come back up, then start chunk 1's backward as soon as it can.
    rounds_of(2 * (P - r) - 1, M, {&down.f}, [&] { forward(down); });
    rounds_of(r, M, {&up.f, &down.f}, [&] {
      forward(up);
      forward(down);
    });
    rounds_of(P - r, M, {&up.f, &up.i, &up.w}, [&] {
      forward(up);
      input(up);
      weight(up);
    });
    // Steady state: F, I, W on chunk 0 (no F once `planned` are done) then on chunk 1, until
    // chunk 1 has caught up: planned - up.f rounds. down.i <= down.f, so the counters listed
    // decide whether a round can emit.
    rounds_of(planned - up.f, M, {&down.i, &down.w, &up.f, &up.i, &up.w}, [&] {
      if (down.f < planned) forward(down);
      input(down);
      weight(down);
      forward(up);
      input(up);
      weight(up);
    });
    down.f = planned;
    // Cool-down: input gradients first (other ranks wait for them); the W they leave behind fill
    // the drain: chunk 1's, then chunk 0's.
    rounds_of(r, M, {&down.i, &up.i}, [&] {
      input(down);
      input(up);
    });
    rounds_of(P - r, M, {&down.i, &down.w}, [&] {
      input(down);
      weight(down);
    });
    rounds_of(up.i - up.w, M, {&up.w}, [&] { weight(up); });
    rounds_of(down.i - down.w, M, {&down.w}, [&] { weight(down); });
  }
  return program;
}

}  // namespace

void register_zbv(Registry& registry) {
  registry.add(
      {"zbv",
       {"ZBVZeroBubble", "ScheduleZBVZeroBubble", "ZB-V"},
       "zero-bubble V: 2 chunks per rank in a V (rank r runs stages r and 2P-1-r), backward "
       "split into I and W; deadlocks unless comm.style is async",
       {ranks_param("pipeline ranks P (stages S = 2P)"), microbatches_param("M >= 1"),
        ParamSpec("chunks",
                  "chunks per rank: exactly 2, the two arms of the V (as ScheduleZBVZeroBubble)")
            .with_default(2)
            .range(2, 2)},
       build,
       {{{"ranks", 1}, {"microbatches", 1}},
        {{"ranks", 2}, {"microbatches", 4}},
        {{"ranks", 4}, {"microbatches", 3}},
        {{"ranks", 4}, {"microbatches", 8}}},
       prefetch_comm([](const ScheduleParams&) { return std::int64_t{2}; }, "2",
                     "with receives posted 1 op ahead the sends at the turn of the V wait: "
                     "2-4% slower")});
}

}  // namespace ppsim::schedules::generators
