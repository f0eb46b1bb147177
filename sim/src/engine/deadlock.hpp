#pragma once
// Why a stuck run is stuck (internal to sim/): the wait-for edges of every blocked rank, handed to
// record::find_deadlock. Under nccl (`streams` given) an op queued behind a kernel waits on what
// that kernel waits on, and a WAIT on a done op waits on the rest of its kernel.
#include <span>
#include <vector>

#include "ppsim/record/wait_graph.hpp"
#include "ppsim/schedules/program.hpp"
#include "ppsim/schedules/semantics.hpp"
#include "state.hpp"
#include "streams.hpp"

namespace ppsim::sim::engine {

struct StuckRun {
  const schedules::Program& program;
  const schedules::Semantics& sem;
  std::span<const RankState> ranks;
  const std::vector<Endpoint>& eps;
  const Streams* streams;  // nullptr under mpi
};

record::Deadlock analyze_deadlock(const StuckRun& run);

}  // namespace ppsim::sim::engine
