#pragma once
// The ranks blocked inside Transport::wait() and on which requests: what every transport's
// wait(), quiescent() and stuck_waiters() share. It takes no lock of its own: the transport's
// mutex guards it (`lock` below holds it).
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <span>
#include <vector>

#include "ppsim/real/request.hpp"

namespace ppsim::real {

// A request's own flag: the done() of a transport that sets `complete` when the transfer ends.
inline bool completed(const Request& r) {
  return r.complete.load(std::memory_order_acquire);
}

class Waiters {
 public:
  void reset(int ranks) {
    waiting_.assign(static_cast<std::size_t>(ranks), nullptr);
    cvs_ = std::vector<std::condition_variable>(static_cast<std::size_t>(ranks));
  }

  // Rank `rank` sleeps until `stop()` (aborted) or `done(request)` holds for every request.
  // Returns whether they are all done.
  template <typename Stop, typename Done>
  bool wait(std::unique_lock<std::mutex>& lock, int rank, std::span<const RequestPtr> requests,
            Stop&& stop, Done&& done) {
    const auto all = [&] { return all_done(requests, done); };
    waiting_[static_cast<std::size_t>(rank)] = &requests;
    cvs_[static_cast<std::size_t>(rank)].wait(lock, [&] { return stop() || all(); });
    waiting_[static_cast<std::size_t>(rank)] = nullptr;
    return all();
  }
  // For a transport that spins before it sleeps: `rank` is waiting on `requests` (nullptr: no
  // longer), and its condition variable.
  void set_waiting(int rank, const std::span<const RequestPtr>* requests) {
    waiting_[static_cast<std::size_t>(rank)] = requests;
  }
  std::condition_variable& cv(int rank) { return cvs_[static_cast<std::size_t>(rank)]; }

  void wake(int rank) { cvs_[static_cast<std::size_t>(rank)].notify_all(); }
  void wake_all() {
    for (auto& cv : cvs_) cv.notify_all();
  }

  // A rank whose requests are all done but has not woken yet is about to move.
  template <typename Done>
  bool any_about_to_move(Done&& done) const {
    for (const auto* w : waiting_)
      if (w != nullptr && all_done(*w, done)) return true;
    return false;
  }
  // Ranks waiting on a request not done.
  template <typename Done>
  std::size_t stuck(Done&& done) const {
    std::size_t n = 0;
    for (const auto* w : waiting_)
      if (w != nullptr && !all_done(*w, done)) ++n;
    return n;
  }

  // Whether every request is done.
  template <typename Done>
  static bool all_done(std::span<const RequestPtr> requests, Done&& done) {
    for (const auto& r : requests)
      if (!done(*r)) return false;
    return true;
  }

 private:
  std::vector<const std::span<const RequestPtr>*> waiting_;
  std::vector<std::condition_variable> cvs_;
};

}  // namespace ppsim::real
