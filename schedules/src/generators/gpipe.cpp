// GPipe: every rank runs all its forwards, then all its backwards.
#include "ppsim/schedules/generator.hpp"

namespace ppsim::schedules::generators {

namespace {
Program build(const ScheduleParams& p) {
  const int P = p.ranks(), M = p.microbatches();
  Program program(M, make_placement(PlacementKind::loop, P, 1));
  for (int r = 0; r < P; ++r) {
    program.reserve(r, 2 * static_cast<std::size_t>(M));
    for (int m = 0; m < M; ++m) program.push(r, Op::compute(OpKind::F, r, m));
    for (int m = 0; m < M; ++m) program.push(r, Op::compute(OpKind::B, r, m));
  }
  return program;
}
}  // namespace

void register_gpipe(Registry& registry) {
  registry.add({"gpipe",
                {"GPipe"},
                "all forwards, then all backwards (fill-drain)",
                one_chunk_params(),
                build,
                one_chunk_test_params()});
}

}  // namespace ppsim::schedules::generators
