#pragma once
// Runs f(i) for i in [0, n) on `threads` threads (the calling thread is one of them). Each index
// runs exactly once; f must only write state of its own index, so the results are the same in any
// thread count. `on_claim(i)` runs on the calling thread for the indices it takes (a progress
// line). If some f(i) throw, the exception of the smallest such i is rethrown after all threads
// stop, as a loop from 0 would have thrown it first; indices after it may or may not have run.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <optional>
#include <thread>
#include <vector>

#include "ppsim/base/jobs.hpp"

namespace ppsim::base {

template <typename Fn, typename OnClaim>
void parallel_for(std::size_t n, unsigned threads, Fn&& f, OnClaim&& on_claim) {
  std::vector<std::exception_ptr> errors(n);
  std::atomic<std::size_t> next{0};
  // The smallest index that has failed so far. Only indices above it are skipped, so every index
  // below the final one has run and the error reported does not depend on timing.
  std::atomic<std::size_t> first_failed{n};
  const std::size_t extra = std::min<std::size_t>(threads > 0 ? threads - 1 : 0, n > 0 ? n - 1 : 0);
  auto work = [&](bool caller) {
    // With other threads running, lowering and validation inside stay on this one.
    std::optional<ParallelWorkScope> scope;
    if (extra > 0) scope.emplace();
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
  std::vector<std::thread> pool;
  pool.reserve(extra);
  for (std::size_t t = 0; t < extra; ++t) pool.emplace_back(work, false);
  work(true);
  for (auto& t : pool) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace ppsim::base
