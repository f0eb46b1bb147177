#pragma once
// A memory-aware list scheduler: ranks advance in time; a free rank runs the backward whose
// gradient has arrived, else a forward its memory admits, else a weight-gradient W to fill the
// wait, under a per-rank limit. The policy knobs are the variants a search tries; each gives
// one schedule or none (the limit is too tight for that variant).
#include <cstdint>
#include <optional>
#include <string>

#include "ppsim/search/instance.hpp"

namespace ppsim::search {

struct Policy {
  // Forwards in flight on a rank beyond 1F1B's warm-up (P - r for one chunk); -1: the memory
  // limit alone decides.
  int extra_warmup = -1;
  // When a forward and a backward are both ready: true runs the forward first while the rank is
  // under its warm-up cap (fills the pipeline), false the backward (frees memory).
  bool forward_first = false;
  // Fill a wait with W only when the wait is at least this fraction of the W (0: always,
  // 1: only when the W ends before the next input arrives; > 1: never, W only for memory).
  double fill_fraction = 0.0;
  // Pending W on a rank beyond which one runs before the next F or backward; -1: no cap.
  int max_pending_w = -1;
  // Of two ready backwards, run the one of the later stage first (true) or the earlier one.
  bool later_stage_first = true;

  std::string describe() const;
};

// `limit`: per-rank bytes the schedule may use (static included); 0 = none. Returns nullopt
// when the variant runs out of memory with nothing to free, or cannot continue.
std::optional<Orders> greedy(const Instance& in, const Policy& policy, std::int64_t limit);

}  // namespace ppsim::search
