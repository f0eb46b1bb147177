// Interleaved zero bubble (PyTorch's ScheduleInterleavedZeroBubble, the ZB1P schedule of Qi et
// al.): V chunks per rank, stage s on rank s mod P, the backward split into I and W. Microbatches
// go through the chunks in rounds of `per_round`; rank r warms up with (V-1)*per_round + P-1-r
// forwards, then runs F, I and, once r steps have passed, the W of its oldest I; the W left over
// close the run. PyTorch pads the order with idle slots; a Program needs only the order.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/generator.hpp"

namespace ppsim::schedules::generators {

namespace {
Program build(const ScheduleParams& p) {
  const int P = p.ranks(), M = p.microbatches(), V = p.chunks();
  // PyTorch's rounds: max(1, M / P) of M / rounds microbatches each, which must divide evenly.
  const int rounds = std::max(1, M / P);
  if (M % rounds != 0)
    throw ParameterError(
        "microbatches",
        fmt::format("interleaved-zb splits the microbatches into max(1, M / P) = {} rounds, as "
                    "PyTorch does, and M = {} is not a multiple of {}",
                    rounds, M, rounds));
  const int per_round = M / rounds;
  const int total = M * V;
  Program program(M, make_placement(PlacementKind::loop, P, V));
  for (int r = 0; r < P; ++r) {
    program.reserve(r, 3 * static_cast<std::size_t>(total));
    const int warmup = std::min((V - 1) * per_round + (P - 1 - r), total);
    // Chunk of the k-th forward (round-robin over chunks per round) and of the k-th backward
    // (the chunks in reverse, counted from the end of the warm-up).
    auto forward_stage = [&](int k) { return (k / per_round) % V * P + r; };
    auto backward_stage = [&](int k) { return (V - 1 - (k - warmup) / per_round % V) * P + r; };
    std::vector<int> next_f(static_cast<std::size_t>(V)), next_i(next_f), next_w(next_f);
    auto emit = [&](OpKind kind, int stage, std::vector<int>& next) {
      program.push(r, Op::compute(kind, stage, next[static_cast<std::size_t>(stage / P)]++));
    };
    int backwards = 0, weights = 0;  // I and W emitted; the j-th I ran at step warmup + j
    auto weight = [&] { emit(OpKind::W, backward_stage(warmup + weights++), next_w); };
    for (int k = 0; k < total + warmup; ++k) {
      if (k < total) emit(OpKind::F, forward_stage(k), next_f);
      if (k < warmup) continue;
      emit(OpKind::I, backward_stage(k), next_i);
      ++backwards;
      if (k - warmup >= r) weight();
    }
    while (weights < backwards) weight();
  }
  return program;
}
}  // namespace

void register_interleaved_zb(Registry& registry) {
  registry.add(
      {"interleaved-zb",
       {"InterleavedZeroBubble"},
       "PyTorch's interleaved zero bubble (ZB1P): V chunks per rank, warm-up (V-1)*per_round + "
       "P-1-r forwards, then F, I and W r steps late",
       {ranks_param("pipeline ranks P"),
        microbatches_param("M, a multiple of max(1, M / P) (PyTorch's rounds)"),
        ParamSpec("chunks", "virtual chunks per rank V (stage s on rank s mod P)")
            .with_default(2)
            .range(1)},
       build,
       {{{"ranks", 2}, {"microbatches", 8}, {"chunks", 2}},
        {{"ranks", 4}, {"microbatches", 8}, {"chunks", 2}},
        {{"ranks", 3}, {"microbatches", 4}, {"chunks", 3}},
        {{"ranks", 4}, {"microbatches", 10}, {"chunks", 2}},
        {{"ranks", 1}, {"microbatches", 3}, {"chunks", 2}}},
       prefetch_comm(
           [](const ScheduleParams& p) { return 2 * std::int64_t{p.ranks()}; }, "2P",
           "a rank sends a gradient while its receiver runs up to 2P ops ahead; with "
           "receives posted 1 op ahead that send holds the next op: 9-18% slower at P=4")});
}

}  // namespace ppsim::schedules::generators
