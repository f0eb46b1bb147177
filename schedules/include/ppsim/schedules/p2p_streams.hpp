#pragma once
// NCCL's model of point-to-point ops (comm.semantics "nccl", docs/SEMANTICS.md), the parts that
// need no clock: which stream of its rank an op runs on, how the ops issued at one moment become
// kernels, and how an op stuck behind another kernel is named. The simulator and the executor
// both ask here, so that they cut the same kernels and report a hang in the same words.
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ppsim/schedules/op.hpp"
#include "ppsim/schedules/semantics.hpp"

namespace ppsim::schedules {

struct StreamOptions {
  bool per_peer = false;  // a stream per (rank, peer) pair instead of one per rank
  int max_group_ops = 0;  // a group launches in kernels of at most this many ops; 0: no limit
};

class P2pStreams {
 public:
  static constexpr int kRankStream = -1;  // the rank's one stream (per_peer off)

  P2pStreams(const Semantics& semantics, StreamOptions options) : sem_(semantics), o_(options) {}
  const StreamOptions& options() const { return o_; }

  // The stream of a p2p op on its rank: kRankStream, or (per peer) the peer's rank. A send and a
  // receive between the same two ranks share it.
  int stream_of(const Op& op) const { return o_.per_peer ? sem_.peer_of(op) : kRankStream; }
  std::string stream_name(int rank, int stream) const;

  // The p2p ops a rank issues at one moment (one op outside a group, or a group's ops at its
  // GROUP_END), in issue order, as kernels in launch order: pieces of at most max_group_ops ops,
  // each split by stream in order of first appearance. Calls kernel(stream, members), members
  // being indices into `ops`.
  template <typename Fn>
  void for_each_kernel(std::span<const Op> ops, Fn&& kernel) const {
    const std::size_t n = ops.size();
    const std::size_t piece = o_.max_group_ops > 0 ? static_cast<std::size_t>(o_.max_group_ops) : n;
    std::vector<std::uint32_t> members;
    for (std::size_t begin = 0; begin < n; begin += piece) {
      const std::size_t end = std::min(n, begin + piece);
      if (!o_.per_peer) {
        members.clear();
        for (std::size_t i = begin; i < end; ++i) members.push_back(static_cast<std::uint32_t>(i));
        kernel(kRankStream, std::span<const std::uint32_t>(members));
        continue;
      }
      std::vector<std::pair<int, std::vector<std::uint32_t>>> by_stream;
      for (std::size_t i = begin; i < end; ++i) {
        const int s = stream_of(ops[i]);
        auto it = std::find_if(by_stream.begin(), by_stream.end(),
                               [&](const auto& b) { return b.first == s; });
        if (it == by_stream.end()) it = by_stream.insert(by_stream.end(), {s, {}});
        it->second.push_back(static_cast<std::uint32_t>(i));
      }
      for (const auto& [s, m] : by_stream) kernel(s, std::span<const std::uint32_t>(m));
    }
  }

  // What a rank blocked on `awaited` waits for when that op is queued behind the kernel running
  // `blocker` on its stream: "0SEND_F0 (queued behind kernel 0RECV_B0 on rank 0's p2p stream)".
  std::string queued_text(int rank, const Op& awaited, const Op& blocker) const;
  // An awaited op that is complete while `partner`, launched in the same kernel, is not: a WAIT
  // returns with the kernel, so it waits on the partner's peer.
  std::string partner_text(int rank, const Op& awaited, const Op& partner) const;

 private:
  const Semantics& sem_;
  StreamOptions o_;
};

}  // namespace ppsim::schedules
