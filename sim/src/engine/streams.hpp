#pragma once
// NCCL's p2p streams (internal to sim/; comm.semantics "nccl", docs/SEMANTICS.md): the kernels
// each rank enqueues, in stream order, and the groups that gather a rank's posts into kernels.
// The engine decides what a running op does; this part says which ops run and when a stream
// moves on.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "ppsim/schedules/p2p_streams.hpp"
#include "state.hpp"

namespace ppsim::sim::engine {

class Streams {
 public:
  struct Kernel {
    std::int32_t first = 0, count = 0;  // members_[first, first + count): endpoint ids
    std::int32_t remaining = 0;         // members whose completion time is not known yet
    std::int32_t next = -1;             // the kernel enqueued after it on its stream
    std::int32_t stream = 0;
    double done = 0;  // when its last member completes (once remaining is 0)
  };

  Streams(const schedules::Semantics& sem, schedules::StreamOptions o) : streams_(sem, o) {}
  const schedules::P2pStreams& model() const { return streams_; }

  void setup(int ranks, std::size_t endpoints) {
    ranks_.assign(static_cast<std::size_t>(ranks), {});
    kernel_of_.assign(endpoints, -1);
    if (!streams_.options().per_peer)  // stream r is rank r's one stream
      for (int r = 0; r < ranks; ++r) stream_id(r, schedules::P2pStreams::kRankStream);
  }

  // Rank r issues endpoint `id` (op `op`). Outside a group it is a kernel of its own at once;
  // inside one it waits for the group's end. Calls run(kernel) for a kernel that starts now.
  template <typename Run>
  void issue(int r, std::int32_t id, const schedules::Op& op, Run&& run) {
    RankGroups& g = ranks_[static_cast<std::size_t>(r)];
    g.ids.push_back(id);
    g.ops.push_back(op);
    if (g.depth == 0) flush(r, run);
  }
  void group_start(int r) { ++ranks_[static_cast<std::size_t>(r)].depth; }
  template <typename Run>
  void group_end(int r, Run&& run) {
    RankGroups& g = ranks_[static_cast<std::size_t>(r)];
    if (g.depth > 0 && --g.depth == 0) flush(r, run);
  }

  std::int32_t kernel_of(std::int32_t id) const { return kernel_of_[static_cast<std::size_t>(id)]; }
  const Kernel& kernel(std::int32_t k) const { return kernels_[static_cast<std::size_t>(k)]; }
  std::span<const std::int32_t> members(const Kernel& k) const {
    return {members_.data() + k.first, static_cast<std::size_t>(k.count)};
  }
  // The kernel running on a stream (its head); -1 when the stream is idle.
  std::int32_t head(std::int32_t stream) const {
    return stream_list_[static_cast<std::size_t>(stream)].head;
  }
  bool running(std::int32_t id) const {
    const std::int32_t k = kernel_of(id);
    return k >= 0 && head(kernel(k).stream) == k;
  }

  // Member `id` of a running kernel completes at `at`: true when that completes its kernel,
  // which then ends at kernel(kernel_of(id)).done (the engine wakes the stream then).
  bool member_done(std::int32_t id, double at) {
    Kernel& k = kernels_[static_cast<std::size_t>(kernel_of(id))];
    k.done = std::max(k.done, at);
    return --k.remaining == 0;
  }
  // The kernel at the head of `stream` has completed: the next one starts (run(kernel)).
  template <typename Run>
  void advance(std::int32_t stream, Run&& run) {
    StreamList& s = stream_list_[static_cast<std::size_t>(stream)];
    s.head = kernels_[static_cast<std::size_t>(s.head)].next;
    if (s.head < 0)
      s.tail = -1;
    else
      run(s.head);
  }
  std::size_t stream_count() const { return stream_list_.size(); }

 private:
  struct RankGroups {
    int depth = 0;
    std::vector<std::int32_t> ids;  // issued, not yet enqueued (a group's posts)
    std::vector<schedules::Op> ops;
    std::vector<std::pair<int, std::int32_t>> streams;  // (stream key, stream id)
  };
  struct StreamList {
    std::int32_t head = -1, tail = -1;
  };

  std::int32_t stream_id(int r, int key) {
    auto& list = ranks_[static_cast<std::size_t>(r)].streams;
    for (const auto& [k, id] : list)
      if (k == key) return id;
    const auto id = static_cast<std::int32_t>(stream_list_.size());
    stream_list_.emplace_back();
    list.emplace_back(key, id);
    return id;
  }

  template <typename Run>
  void flush(int r, Run&& run) {
    RankGroups& g = ranks_[static_cast<std::size_t>(r)];
    streams_.for_each_kernel(g.ops, [&](int key, std::span<const std::uint32_t> idx) {
      const std::int32_t stream = stream_id(r, key);
      const auto k = static_cast<std::int32_t>(kernels_.size());
      Kernel kernel;
      kernel.first = static_cast<std::int32_t>(members_.size());
      kernel.count = kernel.remaining = static_cast<std::int32_t>(idx.size());
      kernel.stream = stream;
      for (const std::uint32_t i : idx) {
        members_.push_back(g.ids[i]);
        kernel_of_[static_cast<std::size_t>(g.ids[i])] = k;
      }
      kernels_.push_back(kernel);
      StreamList& s = stream_list_[static_cast<std::size_t>(stream)];
      if (s.tail >= 0) {
        kernels_[static_cast<std::size_t>(s.tail)].next = k;
        s.tail = k;
        return;
      }
      s.head = s.tail = k;  // an idle stream: it starts now
      run(k);
    });
    g.ids.clear();
    g.ops.clear();
  }

  schedules::P2pStreams streams_;
  std::vector<RankGroups> ranks_;
  std::vector<std::int32_t> kernel_of_;  // endpoint -> kernel
  std::vector<Kernel> kernels_;
  std::vector<std::int32_t> members_;
  std::vector<StreamList> stream_list_;
};

}  // namespace ppsim::sim::engine
