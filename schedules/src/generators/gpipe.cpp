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
                {ranks_param("pipeline ranks P (one stage each)"), microbatches_param("M >= 1"),
                 ParamSpec("chunks", "one chunk per rank (interleaved-1f1b has more)")
                     .with_default(1)
                     .range(1, 1)},
                build,
                {{{"ranks", 1}, {"microbatches", 1}},
                 {{"ranks", 2}, {"microbatches", 3}},
                 {{"ranks", 4}, {"microbatches", 8}},
                 {{"ranks", 5}, {"microbatches", 2}}}});
}

}  // namespace ppsim::schedules::generators
