#pragma once
// The directed links of the simulator's network (sim/src/engine/network.hpp): one transfer at a
// time on each, a hop long, in the order the sender posts them. Internal to search/.
#include <algorithm>
#include <utility>
#include <vector>

namespace ppsim::search::detail {

class Links {
 public:
  explicit Links(int ranks) : busy_(static_cast<std::size_t>(ranks)) {}
  // When a transfer `from` -> `to` posted at `t` arrives; the link is busy until then.
  double send(int from, int to, double t, double hop) {
    auto& links = busy_[static_cast<std::size_t>(from)];
    for (auto& [peer, until] : links)
      if (peer == to) return until = std::max(t, until) + hop;
    links.emplace_back(to, t + hop);
    return t + hop;
  }

 private:
  std::vector<std::vector<std::pair<int, double>>> busy_;  // per sender: (peer, busy until)
};

}  // namespace ppsim::search::detail
