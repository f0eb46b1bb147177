#pragma once
// The engine's queue of rank wake-ups (internal to sim/).
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ppsim/sim/simulator.hpp"

namespace ppsim::sim::engine {

// Min-heap of rank wake-ups with four children per node: shallower than a binary heap, and a
// node's children share a cache line. An event is one 128-bit integer: the bits of its
// (non-negative) time, which order like the value, then a sequence number so equal times pop in
// push order, then the rank.

class EventQueue {
 public:
  using Event = unsigned __int128;
  bool empty() const { return h_.empty(); }
  double top_time() const { return time_of(h_.front()); }
  std::uint32_t top_code() const { return code_of(h_.front()); }
  static double time_of(Event e) {
    return std::bit_cast<double>(static_cast<std::uint64_t>(e >> 64));
  }
  static std::uint32_t code_of(Event e) { return static_cast<std::uint32_t>(e); }

  void push(double time, std::uint32_t code) {
    if (seq_ == 0xffffffffu) throw SimulationError("more than 4 billion events in one run");
    const Event e = (static_cast<Event>(std::bit_cast<std::uint64_t>(time + 0.0)) << 64) |
                    (static_cast<Event>(seq_++) << 32) | code;
    std::size_t i = h_.size();
    h_.push_back(e);
    while (i > 0) {
      const std::size_t parent = (i - 1) / 4;
      if (e >= h_[parent]) break;
      h_[i] = h_[parent];
      i = parent;
    }
    h_[i] = e;
  }
  Event pop() {
    const Event top = h_.front();
    const Event last = h_.back();
    h_.pop_back();
    const std::size_t n = h_.size();
    std::size_t i = 0;
    while (true) {
      const std::size_t first = 4 * i + 1;
      if (first >= n) break;
      std::size_t best = first;
      const std::size_t end = std::min(first + 4, n);
      for (std::size_t c = first + 1; c < end; ++c)
        if (h_[c] < h_[best]) best = c;
      if (h_[best] >= last) break;
      h_[i] = h_[best];
      i = best;
    }
    if (n > 0) h_[i] = last;
    return top;
  }

 private:
  std::vector<Event> h_;
  std::uint32_t seq_ = 0;
};

}  // namespace ppsim::sim::engine
