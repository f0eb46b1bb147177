// GPipe: every rank runs all its forwards, then all its backwards.
#include <fmt/format.h>

#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/generator.hpp"

namespace ppsim::schedules::generators {

namespace {
Program build(const ScheduleParams& p) {
  if (p.chunks != 1)
    throw ParameterError("chunks", fmt::format("gpipe runs one chunk per rank, got chunks={}; "
                                               "use interleaved-1f1b for virtual stages",
                                               p.chunks));
  Program program(p.microbatches, make_placement(PlacementKind::loop, p.ranks, 1));
  for (int r = 0; r < p.ranks; ++r) {
    program.reserve(r, 2 * static_cast<std::size_t>(p.microbatches));
    for (int m = 0; m < p.microbatches; ++m) program.push(r, Op::compute(OpKind::F, r, m));
    for (int m = 0; m < p.microbatches; ++m) program.push(r, Op::compute(OpKind::B, r, m));
  }
  return program;
}
}  // namespace

void register_gpipe(Registry& registry) {
  registry.add({"gpipe",
                {"GPipe"},
                "all forwards, then all backwards (fill-drain)",
                {{"ranks", "pipeline ranks P (one stage each)"}, {"microbatches", "M >= 1"}},
                build});
}

}  // namespace ppsim::schedules::generators
