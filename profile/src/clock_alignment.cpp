#include "clock_alignment.hpp"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>

namespace ppsim::profile::detail {

Alignment align_clocks(int ranks, const std::vector<Dependency>& deps) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // For each pair (x < y), bounds on d = offset[y] - offset[x].
  struct Bounds {
    double lo = -kInf, hi = kInf;
  };
  std::map<std::pair<int, int>, Bounds> pairs;
  for (const auto& d : deps) {
    if (d.a == d.b) continue;
    const int x = std::min(d.a, d.b), y = std::max(d.a, d.b);
    auto& b = pairs[{x, y}];
    // offset[b] + consumer_start >= offset[a] + producer_end
    if (d.a == x)
      b.lo = std::max(b.lo, d.producer_end - d.consumer_start);
    else
      b.hi = std::min(b.hi, d.consumer_start - d.producer_end);
  }
  std::vector<std::vector<std::pair<int, double>>> edges(static_cast<std::size_t>(ranks));
  double latency = 0;
  int bounded = 0;
  for (const auto& [xy, b] : pairs) {
    double d = 0;
    if (b.lo > -kInf && b.hi < kInf) {
      d = (b.lo + b.hi) / 2;
      latency += std::max(0.0, (b.hi - b.lo) / 2);
      ++bounded;
    } else {
      d = b.lo > -kInf ? b.lo : b.hi;  // one side only: no delay assumed
    }
    edges[static_cast<std::size_t>(xy.first)].push_back({xy.second, d});
    edges[static_cast<std::size_t>(xy.second)].push_back({xy.first, -d});
  }
  Alignment out;
  out.offset.assign(static_cast<std::size_t>(ranks), 0.0);
  std::vector<bool> seen(static_cast<std::size_t>(ranks), false);
  // Breadth first from each unseen rank, rank 0 first: neighbours in the pipeline are linked
  // directly, so offsets add up along the shortest chains.
  for (int root = 0; root < ranks; ++root) {
    if (seen[static_cast<std::size_t>(root)]) continue;
    seen[static_cast<std::size_t>(root)] = true;
    std::deque<int> queue = {root};
    while (!queue.empty()) {
      const int r = queue.front();
      queue.pop_front();
      for (const auto& [peer, d] : edges[static_cast<std::size_t>(r)]) {
        if (seen[static_cast<std::size_t>(peer)]) continue;
        seen[static_cast<std::size_t>(peer)] = true;
        out.offset[static_cast<std::size_t>(peer)] = out.offset[static_cast<std::size_t>(r)] + d;
        queue.push_back(peer);
      }
    }
  }
  out.latency = bounded > 0 ? latency / bounded : 0.0;
  return out;
}

}  // namespace ppsim::profile::detail
