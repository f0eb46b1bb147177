#pragma once
// How many threads ppsim's parallel loops use: PPSIM_JOBS when set to a positive number, else the
// machine's cores. A loop that runs inside another one's worker runs on its own thread only, so
// that a sweep of N configs does not start N x N threads.
#include <algorithm>
#include <cstdlib>
#include <thread>

namespace ppsim::base {

inline unsigned default_jobs() {
  if (const char* env = std::getenv("PPSIM_JOBS")) {
    const long n = std::strtol(env, nullptr, 10);
    if (n > 0) return static_cast<unsigned>(std::min<long>(n, 256));
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

// True on a thread while it runs a parallel loop's work (parallel_for, for_rank_blocks).
inline thread_local bool in_parallel_work = false;

// Marks the current thread as running parallel work for its lifetime.
class ParallelWorkScope {
 public:
  ParallelWorkScope() : outer_(in_parallel_work) { in_parallel_work = true; }
  ~ParallelWorkScope() { in_parallel_work = outer_; }
  ParallelWorkScope(const ParallelWorkScope&) = delete;
  ParallelWorkScope& operator=(const ParallelWorkScope&) = delete;

 private:
  bool outer_;
};

// Threads for a parallel loop here: default_jobs(), or 1 inside another loop's work.
inline unsigned jobs_here() {
  return in_parallel_work ? 1u : default_jobs();
}

}  // namespace ppsim::base
