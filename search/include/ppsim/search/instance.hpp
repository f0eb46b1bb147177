#pragma once
// What a constructive scheduler sees of a config: ranks, microbatches, where each virtual stage
// runs, how long its F / I / W (or B) take, what a hop between ranks costs and what each stage
// holds in memory. Built from a prepared config, so costs and memory are exactly the ones the
// simulator replays.
#include <cstdint>
#include <vector>

#include "ppsim/config/prepare.hpp"
#include "ppsim/model/model.hpp"
#include "ppsim/schedules/op.hpp"
#include "ppsim/schedules/placement.hpp"

namespace ppsim::search {

struct Instance {
  int ranks = 0, microbatches = 0, chunks = 1;
  std::vector<schedules::StagePlace> placement;  // stage -> (rank, chunk), one route 0..S-1
  std::vector<model::StageCost> costs;           // per virtual stage
  bool split = true;                             // I and W exist (else one B per microbatch)
  double hop = 0;                                // latency + boundary bytes / bandwidth
  std::vector<model::StageMemory> memory;        // per virtual stage
  std::vector<std::int64_t> static_bytes;        // per rank
  std::int64_t limit = 0;                        // per rank, bytes; 0 = none

  int stages() const { return static_cast<int>(placement.size()); }
  int rank_of(int stage) const { return placement[static_cast<std::size_t>(stage)].rank; }
  // Duration of a compute op (F, I, W or B) of `stage`.
  double duration(schedules::OpKind kind, int stage) const;
  // Bytes a rank's activation memory changes by when the op runs (F takes the stash, I keeps the
  // weight stash, W and B release the rest).
  std::int64_t memory_delta(schedules::OpKind kind, int stage) const;
};

// The instance of `prepared` (one route through the stages: not DualPipe's two directions);
// `limit`: the per-rank memory limit in bytes (0 = none).
Instance make_instance(const config::Prepared& prepared, std::int64_t limit);

// Per-rank compute orders: the op lists a constructive scheduler writes.
using Orders = std::vector<std::vector<schedules::Op>>;

}  // namespace ppsim::search
