#pragma once
// Point-to-point transfers in profiler traces (internal to profile/): the GPU activity a CPU range
// launched, the pairing of sends with receives across ranks, and the latency + bandwidth fit.
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ppsim/profile/kineto.hpp"

namespace ppsim::profile::detail {

// The GPU activity launched inside a CPU range, through the launches' correlation ids. A query
// is O(log n): the launches that ran anything, sorted by time per thread, each under a segment
// tree of their activity's [first start, last end] (a trace holds hundreds of thousands).
class Launched {
 public:
  explicit Launched(const RankTrace& t);
  // [first start, last end] of what was launched in [ts, ts + dur] on thread `tid` (any thread
  // when either side does not say); nullopt when nothing was.
  std::optional<std::pair<double, double>> span(double ts, double dur, std::int64_t tid) const;
  // Tree nodes visited by all span() calls so far (the tests hold it to O(log n) a call).
  std::size_t visits() const { return visits_; }

 private:
  using Span = std::pair<double, double>;
  struct Group {  // launches sorted by time, and a segment tree over their spans
    std::vector<double> ts;
    std::vector<Span> tree;  // leaves at [n, 2n)
  };
  static void build(Group& g, std::vector<std::pair<double, Span>>& launches);
  std::optional<Span> query(const Group& g, double lo, double hi) const;

  Group all_, untagged_;                            // every launch; those with no thread
  std::unordered_map<std::int64_t, Group> by_tid_;  // the rest by thread
  mutable std::size_t visits_ = 0;
};

// A send or receive of one rank, its times on that rank's clock (microseconds): its kernels'
// where it launched any, else its CPU range.
struct TimedComm {
  bool send = false;
  int peer = -1;
  std::int64_t bytes = -1;
  double start = 0, end = 0;
  bool device = false;  // timed by its kernels
};

struct TransferPair {
  int src = 0, dst = 0;
  std::int64_t bytes = -1;
  double send_start = 0, send_end = 0, recv_start = 0, recv_end = 0;  // each on its rank's clock
  bool device = false;  // both sides timed by their kernels (a CPU range of an asynchronous op
                        // may end before its transfer began)
};

// The k-th send from a to b with the k-th receive on b from a (NCCL matches them in order);
// `unpaired` counts the ops left over (a peer outside the run, or more of one side).
std::vector<TransferPair> pair_transfers(const std::vector<std::vector<TimedComm>>& by_rank,
                                         std::size_t& unpaired);

// t = latency + bytes / bandwidth, least squares over (bytes, time) when the sizes differ and
// the slope is positive; otherwise the median time is the latency and bandwidth 0 (no term).
struct LinkFit {
  double latency = 0, bandwidth = 0;  // time and bytes per time, in the samples' unit
  double median = 0;                  // the median time (0 without samples)
};
LinkFit fit_link(const std::vector<std::pair<std::int64_t, double>>& samples);

}  // namespace ppsim::profile::detail
