// Looped BFS (breadth-first pipeline parallelism, PyTorch ScheduleLoopedBFS): V chunks per rank,
// stage s on rank s mod P. A rank runs every microbatch through its first chunk, then its second,
// and so on; then the backwards chunk by chunk in reverse, each chunk's microbatches last first.
#include "ppsim/schedules/generator.hpp"
#include "ppsim/schedules/lowering.hpp"

namespace ppsim::schedules::generators {

namespace {
Program build(const ScheduleParams& p) {
  const int P = p.ranks(), M = p.microbatches(), V = p.chunks();
  Program program(M, make_placement(PlacementKind::loop, P, V));
  for (int r = 0; r < P; ++r) {
    program.reserve(r, 2 * static_cast<std::size_t>(M) * static_cast<std::size_t>(V));
    for (int c = 0; c < V; ++c)
      for (int m = 0; m < M; ++m) program.push(r, Op::compute(OpKind::F, c * P + r, m));
    for (int c = V - 1; c >= 0; --c)
      for (int m = M - 1; m >= 0; --m) program.push(r, Op::compute(OpKind::B, c * P + r, m));
  }
  return program;
}
}  // namespace

void register_looped_bfs(Registry& registry) {
  registry.add({"looped-bfs",
                {"ScheduleLoopedBFS", "LoopedBFS"},
                "breadth-first: V chunks per rank (stage s on rank s mod P); all microbatches "
                "through chunk 0, then chunk 1, ...; backwards chunk by chunk in reverse, last "
                "microbatch first",
                {ranks_param("pipeline ranks P"), microbatches_param("M >= 1"),
                 ParamSpec("chunks", "chunks per rank V (stage s on rank s mod P)")
                     .with_default(2)
                     .range(1, 1024)},
                build,
                {{{"ranks", 1}, {"microbatches", 2}, {"chunks", 2}},
                 {{"ranks", 2}, {"microbatches", 3}, {"chunks", 2}},
                 {{"ranks", 4}, {"microbatches", 8}, {"chunks", 2}},
                 {{"ranks", 3}, {"microbatches", 4}, {"chunks", 3}}},
                prefetch_comm([](const ScheduleParams&) { return kPrefetchAll; }, "all",
                              "all forwards of a chunk come before their consumers; with receives "
                              "posted k ops ahead it deadlocks once M >= (k+2)P")});
}

}  // namespace ppsim::schedules::generators
