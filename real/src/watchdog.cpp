#include "watchdog.hpp"

#include <algorithm>
#include <array>
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
  // Across processes each poll is a collective: a slower pace keeps it cheap.
  const auto poll =
      std::chrono::duration<double>(std::clamp(hang_timeout_ / 20, world_ ? 0.002 : 0.0005, 0.01));
  const std::int64_t total = world_ ? world_->processes() : static_cast<std::int64_t>(ranks.size());
  Outcome outcome = Outcome::finished;
  bool stopping = false;
  std::int64_t last_progress = -1;
  auto quiet_since = Clock::now();
  auto stop_run = [&](Outcome why) {
    outcome = why;
    stopping = true;
    run.cancel.store(true);
    run.transport.abort();
  };
  while (true) {
    enum { kOver, kBlocked, kStuck, kBusy, kProgress, kFailed, kStop, kOverdue, kQuiet, kN };
    std::array<std::int64_t, kN> v{};
    for (const auto& r : ranks) {
      const RankStatus s = r->status();
      v[kOver] += s == RankStatus::done || s == RankStatus::stopped;
      v[kBlocked] += s == RankStatus::blocked;
    }
    v[kStuck] = static_cast<std::int64_t>(run.transport.stuck_waiters());
    v[kBusy] = !run.transport.quiescent();
    v[kProgress] = static_cast<std::int64_t>(run.progress.load());
    v[kFailed] = !stopping && run.cancel.load();  // a rank here threw
    v[kStop] = stop_ && stop_->load();
    std::optional<std::string> late;
    if (!stopping) late = overdue(run, ranks);
    v[kOverdue] = late.has_value();
    // This process has seen nothing move for the whole timeout (the sums below said so in every
    // poll since quiet_since, the same polls in every process).
    v[kQuiet] = std::chrono::duration<double>(Clock::now() - quiet_since).count() >= hang_timeout_;
    if (world_) world_->sum(v);
    if (v[kOver] == total) {
      if (!stopping && v[kFailed] > 0) outcome = Outcome::failed;
      break;
    }
    if (!stopping) {
      if (v[kFailed] > 0) {  // a rank failed and stopped the others (of its process)
        outcome = Outcome::failed;
        stopping = true;
        run.cancel.store(true);
        run.transport.abort();
      } else if (v[kStop] > 0) {
        stop_run(Outcome::interrupted);
      } else if (v[kOverdue] > 0) {
        if (late) {
          std::lock_guard lock(run.failure_mu);
          if (run.failure.empty()) run.failure = std::move(*late);
        }
        stop_run(Outcome::failed);
      } else if (v[kProgress] != last_progress || v[kOver] + v[kBlocked] != total || v[kBusy] > 0 ||
                 v[kStuck] != total - v[kOver]) {
        // A hang: every rank still running waits inside the transport on a request that is
        // not complete, nothing is in flight, and nothing moved for the whole timeout.
        last_progress = v[kProgress];
        quiet_since = Clock::now();
      } else if (v[kQuiet] == (world_ ? world_->processes() : 1)) {
        stop_run(Outcome::hang);
      }
    }
    std::this_thread::sleep_for(poll);
  }
  return outcome;
}

}  // namespace ppsim::real::detail
