#pragma once
// Runs f(i) for i in [0, n) on `threads` threads (the calling thread is one of them). Each index
// runs exactly once; f must only write state of its own index, so the results are the same in any
// thread count. `on_claim(i)` runs on the calling thread for the indices it takes (a progress
// line). If some f(i) throw, the exception of the smallest such i is rethrown after all threads
// stop, as a loop from 0 would have thrown it first; indices after it may or may not have run.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <exception>
#include <thread>
#include <vector>

namespace ppsim::config {

// Threads for a sweep: PPSIM_JOBS when set to a positive number, else the machine's cores.
inline unsigned default_jobs() {
  if (const char* env = std::getenv("PPSIM_JOBS")) {
    const long n = std::strtol(env, nullptr, 10);
    if (n > 0) return static_cast<unsigned>(std::min<long>(n, 256));
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

template <typename Fn, typename OnClaim>
void parallel_for(std::size_t n, unsigned threads, Fn&& f, OnClaim&& on_claim) {
  std::vector<std::exception_ptr> errors(n);
  std::atomic<std::size_t> next{0};
  // The smallest index that has failed so far. Only indices above it are skipped, so every index
  // below the final one has run and the error reported does not depend on timing.
  std::atomic<std::size_t> first_failed{n};
  auto work = [&](bool caller) {
    for (;;) {
      const std::size_t i = next.fetch_add(1);
      if (i >= n || i > first_failed.load()) return;
      try {
        if (caller) on_claim(i);  // inside: a throw here must not skip the joins below
        f(i);
      } catch (...) {
        errors[i] = std::current_exception();
        std::size_t seen = first_failed.load();
        while (i < seen && !first_failed.compare_exchange_weak(seen, i)) {
        }
      }
    }
  };
  const std::size_t extra = std::min<std::size_t>(threads > 0 ? threads - 1 : 0, n > 0 ? n - 1 : 0);
  std::vector<std::thread> pool;
  pool.reserve(extra);
  for (std::size_t t = 0; t < extra; ++t) pool.emplace_back(work, false);
  work(true);
  for (auto& t : pool) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace ppsim::config
