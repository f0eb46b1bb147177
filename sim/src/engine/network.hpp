#pragma once
// Links and transfers (internal to sim/): which link a message takes, when its transfer ends, and
// the order in which transfers that become ready at one instant take their links.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "ppsim/model/model.hpp"
#include "state.hpp"

namespace ppsim::sim::engine {

struct Link {
  double free_at = 0;
};

class Network {
 public:
  void setup(const model::NetworkOptions& o, int ranks) {
    ranks_ = ranks;
    xfer_time_ =
        o.latency + (o.bandwidth > 0 ? static_cast<double>(o.boundary_bytes) / o.bandwidth : 0);
    eager_ = o.eager_limit > 0 && o.boundary_bytes <= o.eager_limit;
  }
  double xfer_time() const { return xfer_time_; }
  bool eager() const { return eager_; }  // sends complete when posted

  // The link of a message between rank r and `peer` (r sends it if `send`): one per directed rank
  // pair, looked up in the rank's own short list first.
  int link_of(RankState& rs, int r, int peer, bool send) {
    const int key = send ? peer : -peer - 1;
    for (const auto& [k, l] : rs.links)
      if (k == key) return l;
    const long long pair = send ? static_cast<long long>(r) * ranks_ + peer
                                : static_cast<long long>(peer) * ranks_ + r;
    auto [it, inserted] = link_ids_.emplace(pair, static_cast<int>(links_.size()));
    if (inserted) links_.emplace_back();
    rs.links.emplace_back(key, it->second);
    return it->second;
  }

  // Transfers that become ready at one instant take their links once the instant is over, in the
  // order their senders posted them (DESIGN.md's tie rule): by sender, then by the op's position
  // (a link has one sender; endpoint ids are reused, so they say nothing of the order).
  bool has_ready() const { return !ready_.empty(); }
  double ready_time() const { return ready_time_; }
  void make_ready(std::int32_t send_id, double t) {
    ready_time_ = t;
    ready_.push_back(send_id);
  }
  // Starts the ready transfers in that order, calling started(id, send) after each, then
  // after_all(id, send) for each once all have started (ranks blocked on them wake then).
  template <typename Started, typename AfterAll>
  void start_ready(std::vector<Endpoint>& eps, Started&& started, AfterAll&& after_all) {
    std::sort(ready_.begin(), ready_.end(), [&](std::int32_t a, std::int32_t b) {
      const Endpoint& x = eps[static_cast<std::size_t>(a)];
      const Endpoint& y = eps[static_cast<std::size_t>(b)];
      return x.rank != y.rank ? x.rank < y.rank : x.pos < y.pos;
    });
    for (const std::int32_t id : ready_) {
      Endpoint& s = eps[static_cast<std::size_t>(id)];
      start_transfer(s, ready_time_);
      started(id, s);
    }
    for (const std::int32_t id : ready_) after_all(id, eps[static_cast<std::size_t>(id)]);
    ready_.clear();
  }

 private:
  void start_transfer(Endpoint& s, double t) {
    Link& l = links_[static_cast<std::size_t>(s.link)];
    s.at = std::max(t, l.free_at) + xfer_time_;
    l.free_at = s.at;
  }

  int ranks_ = 0;
  double xfer_time_ = 0;
  bool eager_ = false;
  std::vector<std::int32_t> ready_;  // sends whose transfers became ready at ready_time_
  double ready_time_ = 0;
  std::vector<Link> links_;
  std::unordered_map<long long, int> link_ids_;
};

}  // namespace ppsim::sim::engine
