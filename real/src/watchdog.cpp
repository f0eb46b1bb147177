#include "watchdog.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

namespace ppsim::real::detail {

std::optional<std::string> Watchdog::overdue(
    const RunShared& run, const std::vector<std::unique_ptr<RankRunner>>& ranks) const {
  const double now = run.clock.now();
  for (const auto& r : ranks)
    if (auto late = r->overdue(now, hang_timeout_)) return late;
  return std::nullopt;
}

Outcome Watchdog::watch(RunShared& run, const std::vector<std::unique_ptr<RankRunner>>& ranks) {
  using Clock = std::chrono::steady_clock;
  const auto poll = std::chrono::duration<double>(std::clamp(hang_timeout_ / 20, 0.0005, 0.01));
  Outcome outcome = Outcome::finished;
  bool stopping = false;
  std::uint64_t last_progress = run.progress.load();
  auto quiet_since = Clock::now();
  auto stop_run = [&](Outcome why) {
    outcome = why;
    stopping = true;
    run.cancel.store(true);
    run.transport.abort();
  };
  while (true) {
    std::size_t over = 0, blocked = 0;
    for (const auto& r : ranks) {
      const RankStatus s = r->status();
      over += s == RankStatus::done || s == RankStatus::stopped;
      blocked += s == RankStatus::blocked;
    }
    if (over == ranks.size()) break;
    if (!stopping) {
      if (run.cancel.load()) {  // a rank failed and stopped the others
        outcome = Outcome::failed;
        stopping = true;
      } else if (stop_ && stop_->load()) {
        stop_run(Outcome::interrupted);
      } else if (auto late = overdue(run, ranks)) {
        {
          std::lock_guard lock(run.failure_mu);
          if (run.failure.empty()) run.failure = std::move(*late);
        }
        stop_run(Outcome::failed);
      } else {
        const std::uint64_t progress = run.progress.load();
        // A hang: every rank still running waits inside the transport on a request that is not
        // complete, nothing is in flight, and nothing moved for the whole timeout.
        if (progress != last_progress || over + blocked != ranks.size() ||
            !run.transport.quiescent() || run.transport.stuck_waiters() != ranks.size() - over) {
          last_progress = progress;
          quiet_since = Clock::now();
        } else if (std::chrono::duration<double>(Clock::now() - quiet_since).count() >=
                   hang_timeout_) {
          stop_run(Outcome::hang);
        }
      }
    }
    std::this_thread::sleep_for(poll);
  }
  if (!stopping && run.cancel.load()) outcome = Outcome::failed;
  return outcome;
}

}  // namespace ppsim::real::detail
