// 1F1B (PipeDream-flush): warm-up forwards, then one forward / one backward, then cool-down.
#include <algorithm>

#include "ppsim/schedules/generator.hpp"

namespace ppsim::schedules::generators {

namespace {
Program build(const ScheduleParams& p) {
  const int P = p.ranks(), M = p.microbatches();
  Program program(M, make_placement(PlacementKind::loop, P, 1));
  for (int r = 0; r < P; ++r) {
    program.reserve(r, 2 * static_cast<std::size_t>(M));
    const int warmup = std::min(P - r - 1, M);
    int next_f = 0, next_b = 0;
    for (; next_f < warmup; ++next_f) program.push(r, Op::compute(OpKind::F, r, next_f));
    while (next_f < M) {
      program.push(r, Op::compute(OpKind::F, r, next_f++));
      program.push(r, Op::compute(OpKind::B, r, next_b++));
    }
    for (; next_b < M; ++next_b) program.push(r, Op::compute(OpKind::B, r, next_b));
  }
  return program;
}
}  // namespace

void register_1f1b(Registry& registry) {
  registry.add({"1f1b",
                {"1F1B", "PipeDream-flush"},
                "warm-up min(P-r-1, M) forwards, then one forward / one backward, then cool-down",
                one_chunk_params(),
                build,
                one_chunk_test_params()});
}

}  // namespace ppsim::schedules::generators
