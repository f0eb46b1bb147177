#pragma once
// The executor's watchdog (internal to real/): watches a run from the thread that started it and
// stops every rank when the run hangs, is interrupted, or a rank has failed.
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ppsim/real/executor.hpp"
#include "ppsim/real/world.hpp"
#include "rank_runner.hpp"

namespace ppsim::real::detail {

class Watchdog {
 public:
  // `hang_timeout`: seconds during which every unfinished rank is blocked, the transport has
  // nothing under way and no rank makes progress, before the run is declared hung; also the
  // least time a compute op that may never return (a GPU's) is given before the run is stopped
  // as failed.
  // With a World, `ranks` are this process's and every process decides from the sums of all
  // processes' states, so that all of them stop the run in the same poll, for the same reason.
  Watchdog(double hang_timeout, const std::atomic<bool>* stop, World* world = nullptr)
      : hang_timeout_(hang_timeout), stop_(stop), world_(world) {}
  // Returns once every rank (of every process) has finished or stopped.
  Outcome watch(RunShared& run, const std::vector<std::unique_ptr<RankRunner>>& ranks);

 private:
  // A rank in a compute op that may never return (Compute::may_hang) and is past its budget.
  std::optional<std::string> overdue(const RunShared& run,
                                     const std::vector<std::unique_ptr<RankRunner>>& ranks) const;

  double hang_timeout_;
  const std::atomic<bool>* stop_;
  World* world_;
};

}  // namespace ppsim::real::detail
