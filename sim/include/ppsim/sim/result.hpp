#pragma once
// What a simulation produces: metrics (docs/METRICS.md), deadlock verdict, runtime errors.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ppsim/schedules/diagnostic.hpp"

namespace ppsim::sim {

struct RankMetrics {
  int rank = 0;
  double start = 0, end = 0;
  double busy = 0;          // compute time
  double idle = 0;          // makespan - busy
  double comm_exposed = 0;  // time blocked in SEND/RECV/WAIT
  int peak_inflight = 0;
  std::int64_t peak_memory_bytes = 0;
  std::int64_t sent_bytes = 0, recv_bytes = 0;
  std::size_t ops_done = 0;
};

struct BlockedOp {
  int rank = 0;
  int position = 0;
  std::string op;           // the op the rank is stuck in
  int peer = -1;            // the rank it waits on
  std::string waiting_for;  // for a WAIT: the pending request's op
};

struct Deadlock {
  std::vector<std::vector<BlockedOp>> cycles;  // each: rank -> peer -> ... back to the first
  std::vector<BlockedOp> unmatched;            // waits on a rank that has finished
  std::vector<BlockedOp> blocked;              // waits on a blocked rank outside any cycle
  std::string describe() const;                // "rank 2 blocked in 2SEND_F1 -> rank 3; ..."
};

struct SimResult {
  double makespan = 0;
  double bubble_fraction = 0;  // 1 - sum(busy) / (P * makespan)
  double bubble_vs_ideal = 0;  // (makespan - max busy) / max busy
  std::int64_t comm_bytes = 0;
  std::uint64_t ops_executed = 0;
  std::vector<RankMetrics> per_rank;
  std::optional<Deadlock> deadlock;
  std::vector<schedules::Diagnostic> errors;  // hazards seen while running
};

}  // namespace ppsim::sim
