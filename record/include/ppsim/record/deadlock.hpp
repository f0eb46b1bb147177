#pragma once
// Why a run could not finish: the wait-for cycles, the ops waiting on finished ranks, the ranks
// blocked behind a cycle. The simulator finds it from its state; the executor's watchdog from what
// it observed; both report it in these words.
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace ppsim::record {

struct BlockedOp {
  int rank = 0;
  int position = 0;
  std::string op;           // the op the rank is stuck in
  int peer = -1;            // the rank it waits on
  std::string waiting_for;  // for a WAIT: the pending request's op
};

struct Deadlock {
  // One wait-for cycle per strongly connected group of stuck ranks, each: rank -> peer -> ... back
  // to the first (its smallest rank), at most kMaxCycles of them.
  std::vector<std::vector<BlockedOp>> cycles;
  std::size_t cycles_total = 0;      // cycles found; more than cycles.size() when the report is cut
  std::vector<BlockedOp> unmatched;  // waits on a rank that has finished
  std::vector<BlockedOp> blocked;    // waits on a blocked rank outside any cycle
  std::string describe() const;      // "rank 2 blocked in 2SEND_F1 -> rank 3; ..."

  static constexpr std::size_t kMaxCycles = 256;
  std::size_t cycle_count() const { return std::max(cycles_total, cycles.size()); }
  bool cut() const { return cycle_count() > cycles.size(); }
};

}  // namespace ppsim::record
