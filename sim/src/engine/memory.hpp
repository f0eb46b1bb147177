#pragma once
// Per-rank memory and in-flight microbatches (internal to sim/), and the sent buffers that free
// themselves when their transfers end.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "ppsim/record/observer.hpp"
#include "state.hpp"

namespace ppsim::sim::engine {

// `rs` is always the state of `rank`, the rank that owns the memory (for an endpoint: its rank).
class Memory {
 public:
  // on_release(id): endpoint id's buffer was released (the engine may then reuse the endpoint).
  using ReleaseHook = void (*)(void* context, std::int32_t id);
  Memory(std::vector<Endpoint>& eps, record::Observer* obs, ReleaseHook on_release, void* context)
      : eps_(eps), obs_(obs), on_release_(on_release), context_(context) {}

  // `dense`: a (rank, microbatch) grid is small next to the program (the Semantics' cells are
  // dense); otherwise the counters live in a map, sized by the stashes alive.
  void setup(int ranks, int microbatches, std::int64_t buffer_bytes, bool dense) {
    M_ = static_cast<std::size_t>(microbatches);
    buffer_bytes_ = buffer_bytes;
    dense_ = dense;
    if (dense_)
      base::assign_huge(inflight_, static_cast<std::size_t>(ranks) * M_, std::uint32_t{0});
  }
  std::int64_t buffer_bytes() const { return buffer_bytes_; }

  // `stash`: the bytes are activations (the rest are comm buffers), so that an out-of-memory
  // verdict can say what the peak is made of.
  void add(RankState& rs, int rank, std::int64_t delta, double time, bool stash = false) {
    if (delta == 0) return;
    if (!rs.releases.empty() && rs.releases.front().first <= time) flush_releases(rs, time);
    rs.memory += delta;
    if (stash) rs.stashed += delta;
    if (rs.memory > rs.peak_memory) {
      rs.peak_memory = rs.memory;
      rs.stashed_at_peak = rs.stashed;
    }
    if (obs_) obs_->on_counter(rank, time, rs.memory, rs.inflight);
  }
  void stash(RankState& rs, int rank, int mb, int delta, double time) {
    const std::size_t cell = static_cast<std::size_t>(rank) * M_ + static_cast<std::size_t>(mb);
    auto& n = dense_ ? inflight_[cell] : sparse_inflight_[cell];
    const bool was = n > 0;
    n = static_cast<std::uint32_t>(n + delta);
    const bool now = n > 0;
    if (!dense_ && !now) sparse_inflight_.erase(cell);  // n is gone
    if (was != now) {
      rs.inflight += now ? 1 : -1;
      rs.peak_inflight = std::max(rs.peak_inflight, rs.inflight);
      if (obs_) obs_->on_counter(rank, time, rs.memory, rs.inflight);
    }
  }

  // Applies, in time order, the releases of sent buffers whose transfers ended by `time`.
  void flush_releases(RankState& rs, double time) {
    auto later = [](const auto& a, const auto& b) { return a.first > b.first; };
    while (!rs.releases.empty() && rs.releases.front().first <= time) {
      std::pop_heap(rs.releases.begin(), rs.releases.end(), later);
      const auto [when, id] = rs.releases.back();
      rs.releases.pop_back();
      release_buffer(rs, id, when);
    }
  }
  void release_when_sent(RankState& rs, const Endpoint& e, std::int32_t id) {
    auto& q = rs.releases;
    q.emplace_back(e.at, id);
    std::push_heap(q.begin(), q.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  }
  void release_buffer(RankState& rs, std::int32_t id, double time) {
    Endpoint& e = eps_[static_cast<std::size_t>(id)];
    if (!e.buffer_live) return;
    e.buffer_live = 0;
    add(rs, e.rank, -buffer_bytes_, time);
    on_release_(context_, id);
  }

 private:
  std::vector<Endpoint>& eps_;
  record::Observer* obs_;
  ReleaseHook on_release_;
  void* context_;
  std::size_t M_ = 0;
  std::int64_t buffer_bytes_ = 0;
  bool dense_ = true;
  std::vector<std::uint32_t> inflight_;  // (rank, mb) -> live stashes
  std::unordered_map<std::size_t, std::uint32_t> sparse_inflight_;
};

}  // namespace ppsim::sim::engine
