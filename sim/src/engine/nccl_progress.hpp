#pragma once
// The NCCL-like progress rule (internal to sim/; comm.semantics "nccl", docs/SEMANTICS.md): an op
// is a kernel on its rank's stream (or part of its group's kernel) and does nothing until the
// kernel reaches the head of the stream; a running send waits for its running receive
// (rendezvous) or goes into the pair's buffer if it fits; a WAIT returns when its kernel has.
// Rank r's k-th comm op is endpoint ep_base[r] + k, since the streams index kernels by endpoint.
// The calls the engine makes are listed in mpi_progress.hpp.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ppsim/model/model.hpp"
#include "ppsim/schedules/semantics.hpp"
#include "state.hpp"
#include "streams.hpp"

namespace ppsim::sim::engine {

class NcclProgress {
 public:
  NcclProgress(const schedules::Semantics& sem, const model::NetworkOptions& network)
      : streams_(sem, model::stream_options(network)),
        capacity_(network.nccl_buffer_bytes),
        bytes_(network.boundary_bytes) {}

  template <class E>
  void setup(E& e, std::size_t endpoints) {
    base::assign_huge(e.eps_, endpoints, Endpoint{});
    streams_.setup(e.R_, endpoints);
    buffered_.clear();
    stalled_.clear();
  }
  template <class E>
  std::int32_t new_endpoint(E&, RankState& rs) {
    return rs.ep_base + rs.next_ep++;
  }
  // A group's requests complete together, as PyTorch's coalesced works do.
  template <class E>
  double waited_time(const E&, std::int32_t id) const {
    if (id == kRetired) return 0;
    // No kernel yet: its group is still open (only in a program validation refuses).
    const std::int32_t kernel = streams_.kernel_of(id);
    if (kernel < 0) return kNever;
    const auto& k = streams_.kernel(kernel);
    return k.remaining == 0 ? k.done : kNever;
  }
  template <class E>
  void marker(E& e, int r, const schedules::Op& op, double t) {
    if (op.kind == schedules::OpKind::GROUP_START)
      streams_.group_start(r);
    else
      streams_.group_end(r, [&](std::int32_t k) { start_kernel(e, k, t); });
  }
  // What the op does once it runs is decided in run_op.
  template <class E>
  void posted(E& e, int r, std::int32_t id, const schedules::Op& op, double t) {
    streams_.issue(r, id, op, [&](std::int32_t k) { start_kernel(e, k, t); });
  }
  template <class E>
  void matched(E&, std::int32_t, std::int32_t, double) {}  // transfers start when ops run
  template <class E>
  void sent(E& e, std::int32_t id, const Endpoint& s) {
    member_done(e, id);
    if (s.partner == kNoEndpoint) return;
    Endpoint& r = e.eps_[static_cast<std::size_t>(s.partner)];
    if (!r.running) return;  // a buffered message: its receive takes it when it runs
    r.at = s.at;
    e.transferred(s, r);
    member_done(e, s.partner);
  }
  // Bytes and order are counted when a message is delivered: a matched pair may never run.
  template <class E>
  void delivered(E& e, const Endpoint& s, const Endpoint& r) {
    e.count_bytes(s, r);
    e.message_order(s, r, r.at);
  }
  template <class E>
  void retire_wait(E&, int, const schedules::Op&) {}
  template <class E>
  void release_held(E&, std::int32_t) {}
  template <class E>
  void try_free(E&, std::int32_t) {}  // the streams index kernels by endpoint id
  template <class E>
  void stream_done(E& e, std::int32_t stream, double t) {
    streams_.advance(stream, [&](std::int32_t k) { start_kernel(e, k, t); });
  }
  const Streams* streams() const { return &streams_; }

 private:
  template <class E>
  void start_kernel(E& e, std::int32_t k, double t) {
    for (const std::int32_t id : streams_.members(streams_.kernel(k))) run_op(e, id, t);
  }
  // Op `id` starts running at t (its kernel reached the head of its stream).
  template <class E>
  void run_op(E& e, std::int32_t id, double t) {
    Endpoint& ep = e.eps_[static_cast<std::size_t>(id)];
    ep.running = 1;
    Endpoint* partner =
        ep.partner != kNoEndpoint ? &e.eps_[static_cast<std::size_t>(ep.partner)] : nullptr;
    if (ep.send) {
      if (partner && partner->running)
        ready(e, id, t);  // rendezvous
      else if (!try_buffer(e, id, t))
        stalled(ep.link).push_back(id);  // waits for its receive, or for room in the buffer
      return;
    }
    if (!partner || !partner->running) return;  // its send will find it running
    if (!partner->buffered) {                   // a send waiting for this receive
      std::erase(stalled(ep.link), ep.partner);
      ready(e, ep.partner, t);
      return;
    }
    // The message went into the buffer: it is received when it has arrived, freeing its room.
    consume(e, ep.link, t);
    if (partner->at == kNever) return;  // its transfer starts this instant (start_ready)
    ep.at = std::max(t, partner->at);
    e.transferred(*partner, ep);
    member_done(e, id);
    e.wake_if_waiting(id, t);
  }
  template <class E>
  void ready(E& e, std::int32_t send_id, double t) {
    e.eps_[static_cast<std::size_t>(send_id)].ready = 1;
    e.net_.make_ready(send_id, t);
  }
  // A running send whose receive is not running goes into the pair's buffer if it fits.
  template <class E>
  bool try_buffer(E& e, std::int32_t id, double t) {
    Endpoint& ep = e.eps_[static_cast<std::size_t>(id)];
    std::int64_t& used = buffered(ep.link);
    if (capacity_ <= 0 || used + bytes_ > capacity_) return false;
    used += bytes_;
    ep.buffered = 1;
    ready(e, id, t);
    return true;
  }
  // A receive takes its message out of the buffer: sends waiting for room go in, in order.
  template <class E>
  void consume(E& e, int link, double t) {
    buffered(link) -= bytes_;
    auto& waiting = stalled(link);
    std::size_t n = 0;
    while (n < waiting.size() && try_buffer(e, waiting[n], t)) ++n;
    waiting.erase(waiting.begin(), waiting.begin() + static_cast<std::ptrdiff_t>(n));
  }
  // An op's completion time is known: its kernel ends once all of its ops are.
  template <class E>
  void member_done(E& e, std::int32_t id) {
    if (!streams_.member_done(id, e.eps_[static_cast<std::size_t>(id)].at)) return;
    const auto& k = streams_.kernel(streams_.kernel_of(id));
    e.queue_.push(k.done, static_cast<std::uint32_t>(e.R_) + static_cast<std::uint32_t>(k.stream));
  }
  std::int64_t& buffered(int link) {
    if (static_cast<std::size_t>(link) >= buffered_.size())
      buffered_.resize(static_cast<std::size_t>(link) + 1, 0);
    return buffered_[static_cast<std::size_t>(link)];
  }
  std::vector<std::int32_t>& stalled(int link) {
    if (static_cast<std::size_t>(link) >= stalled_.size())
      stalled_.resize(static_cast<std::size_t>(link) + 1);
    return stalled_[static_cast<std::size_t>(link)];
  }

  Streams streams_;
  std::int64_t capacity_, bytes_;       // a link's buffer and a message, in bytes
  std::vector<std::int64_t> buffered_;  // bytes sent on a link and not yet received
  // running sends waiting for their receive or for room, by link, in the order they ran
  std::vector<std::vector<std::int32_t>> stalled_;
};

}  // namespace ppsim::sim::engine
