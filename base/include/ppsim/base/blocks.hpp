#pragma once
// Per-rank work (lowering, validation) on several threads: the ranks are cut into contiguous
// blocks of about equal work, one thread per block, so that block b's results all come after block
// b-1's and merging them in block order gives what one loop over the ranks gives.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "ppsim/base/jobs.hpp"

namespace ppsim::base {

// Below this much work (ops) per block, a thread costs more than it saves.
inline constexpr std::size_t kMinWorkPerBlock = std::size_t{1} << 16;

// Boundaries of `blocks` contiguous blocks of ranks, of about equal total weight: block b is
// ranks [bounds[b], bounds[b + 1]). No block is empty; fewer blocks when there are fewer ranks.
std::vector<int> rank_blocks(const std::vector<std::size_t>& weights, unsigned blocks);

// How many blocks to cut work of `total` weight into: `threads` when given (> 0), else as many as
// jobs_here() allows with at least kMinWorkPerBlock each.
inline unsigned blocks_for(std::size_t total, unsigned threads) {
  if (threads > 0) return threads;
  const std::size_t by_work = total / kMinWorkPerBlock;
  return static_cast<unsigned>(
      std::max<std::size_t>(1, std::min<std::size_t>(jobs_here(), by_work)));
}

// Runs f(block, first_rank, end_rank) for each block of `bounds` (rank_blocks), block 0 on the
// calling thread. f must write only the state of its own ranks and block. If some blocks throw,
// the exception of the lowest such block is rethrown after all have stopped: the one a loop over
// the ranks in order would have thrown first.
template <typename Fn>
void for_rank_blocks(const std::vector<int>& bounds, Fn&& f) {
  const std::size_t n = bounds.size() - 1;
  std::vector<std::exception_ptr> errors(n);
  auto work = [&](std::size_t b) {
    const ParallelWorkScope scope;
    try {
      f(b, bounds[b], bounds[b + 1]);
    } catch (...) {
      errors[b] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  std::vector<std::size_t> here;  // blocks no thread could be started for
  pool.reserve(n > 0 ? n - 1 : 0);
  for (std::size_t b = 1; b < n; ++b) {
    try {
      pool.emplace_back(work, b);
    } catch (const std::system_error&) {
      here.push_back(b);
    }
  }
  if (n > 0) work(0);
  for (const std::size_t b : here) work(b);
  for (auto& t : pool) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// Runs f(worker, rank) once for each rank in [0, ranks) on `workers` threads (worker 0 is the
// calling thread), each taking the next rank not yet taken: for per-rank work whose cost does not
// follow a weight known up front (lowering, where first-touched memory costs more on one thread
// than on another). f must write only its rank's state and its worker's. If some ranks throw, the
// exception of the lowest such rank is rethrown after all have stopped: the one a loop over the
// ranks in order would have thrown first.
template <typename Fn>
void for_each_rank(int ranks, unsigned workers, Fn&& f) {
  std::atomic<int> next{0};
  std::mutex error_mutex;
  int error_rank = ranks;  // the lowest rank that threw so far
  std::exception_ptr error;
  auto work = [&](unsigned worker) {
    const ParallelWorkScope scope;
    while (true) {
      const int r = next.fetch_add(1, std::memory_order_relaxed);
      if (r >= ranks) return;
      {
        const std::lock_guard lock(error_mutex);
        if (r > error_rank) return;  // a loop in order would have stopped before it
      }
      try {
        f(worker, r);
      } catch (...) {
        const std::lock_guard lock(error_mutex);
        if (r < error_rank) {
          error_rank = r;
          error = std::current_exception();
        }
      }
    }
  };
  const unsigned n = std::max(1u, std::min(workers, static_cast<unsigned>(std::max(ranks, 1))));
  std::vector<std::thread> pool;
  pool.reserve(n - 1);
  for (unsigned w = 1; w < n; ++w) {
    try {
      pool.emplace_back(work, w);
    } catch (const std::system_error&) {
      break;  // the workers started take its ranks
    }
  }
  work(0);
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace ppsim::base
