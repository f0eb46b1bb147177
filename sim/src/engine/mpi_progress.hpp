#pragma once
// The MPI-like progress rule (internal to sim/; DESIGN.md): a posted op progresses on its own; a
// matched pair's transfer is ready at once (or left already, eager); a WAIT returns when its own
// requests are complete. Endpoint records live while something needs them and their slots are
// reused, so the engine's memory follows the comm ops in flight.
//
// The engine (Engine<Progress>, simulator.cpp) calls a progress rule at these points, each a
// template on the engine, whose state it reads as a friend; NcclProgress is the other rule:
//   setup(e, endpoints)          before the run; `endpoints`: the program's comm ops
//   new_endpoint(e, rank_state)  a slot for an op being posted
//   waited_time(e, id)           when a WAIT on endpoint `id` can return (kNever: not known yet)
//   marker(e, r, op, t)          rank r passed GROUP_START / GROUP_END at t
//   posted(e, r, id, op, t)      rank r posted endpoint `id` at t (after matching it)
//   matched(e, send, recv, t)    two endpoints matched at t
//   sent(e, id, s)               send `id`'s transfer ended at s.at
//   delivered(e, s, r)           a message reached its receive (before observers hear of it)
//   retire_wait(e, r, op)        rank r passed the WAIT `op`
//   release_held(e, id)          rank r passed blocking op `id`
//   try_free(e, id)              something that kept endpoint `id` alive let go
//   stream_done(e, stream, t)    a stream's head kernel ended at t (queued by the rule itself)
//   streams()                    the kernels, for the deadlock analysis; nullptr here
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ppsim/model/model.hpp"
#include "ppsim/schedules/semantics.hpp"
#include "state.hpp"
#include "streams.hpp"

namespace ppsim::sim::engine {

class MpiProgress {
 public:
  MpiProgress(const schedules::Semantics&, const model::NetworkOptions&) {}

  template <class E>
  void setup(E& e, std::size_t /*endpoints*/) {
    e.eps_.clear();
    faulted_ = 0;
    free_.clear();
  }
  template <class E>
  std::int32_t new_endpoint(E& e, RankState& /*rs*/) {
    if (!free_.empty()) {
      const std::int32_t id = free_.back();
      free_.pop_back();
      return id;
    }
    if (e.eps_.size() == faulted_) fault_ahead(e.eps_);
    e.eps_.emplace_back();
    return static_cast<std::int32_t>(e.eps_.size() - 1);
  }
  template <class E>
  double waited_time(const E& e, std::int32_t id) const {
    return id == kRetired ? 0 : done_time(e.eps_[static_cast<std::size_t>(id)]);
  }
  template <class E>
  void marker(E&, int, const schedules::Op&, double) {}  // groups change nothing under mpi
  template <class E>
  void posted(E&, int, std::int32_t, const schedules::Op&, double) {}

  template <class E>
  void matched(E& e, std::int32_t send_id, std::int32_t recv_id, double t) {
    Endpoint& s = e.eps_[static_cast<std::size_t>(send_id)];
    Endpoint& r = e.eps_[static_cast<std::size_t>(recv_id)];
    if (e.match_.by_order()) e.message_order(s, r, t);
    // Bytes are counted once per transfer, here where both ends are known.
    e.count_bytes(s, r);
    if (!s.eager) {
      e.net_.make_ready(send_id, t);
      return;
    }
    if (s.at == kNever) return;  // an eager send posted this instant: its start is not yet known
    // An eager message that already left: the receive is done when it has arrived.
    r.at = s.at;
    e.transferred(s, r);
    e.wake_if_waiting(recv_id, t);
    try_free(e, send_id);
  }
  template <class E>
  void sent(E& e, std::int32_t /*id*/, const Endpoint& s) {
    if (s.partner == kNoEndpoint) return;
    Endpoint& r = e.eps_[static_cast<std::size_t>(s.partner)];
    r.at = s.at;
    e.transferred(s, r);
  }
  template <class E>
  void delivered(E&, const Endpoint&, const Endpoint&) {}

  // Its requests are complete (a later WAIT on one returns at once) and nothing waits on their
  // endpoints any more.
  template <class E>
  void retire_wait(E& e, int r, const schedules::Op& op) {
    RankState& rs = e.ranks_[static_cast<std::size_t>(r)];
    for (const std::int32_t request : e.p_.wait_ids(r, op)) {
      std::int32_t* slot = nullptr;
      if (request >= 0 && request < rs.dense_limit)
        slot = &rs.request_ep[static_cast<std::size_t>(request)];
      else
        slot = &rs.sparse_request_ep.find(request)->second;  // found by wait_time
      const std::int32_t id = *slot;
      *slot = kRetired;
      release_held(e, id);
    }
  }
  template <class E>
  void release_held(E& e, std::int32_t id) {
    if (id < 0) return;
    e.eps_[static_cast<std::size_t>(id)].held = 0;
    try_free(e, id);
  }
  // Frees endpoint `id` once nothing can read it again: its rank is past it (and its request
  // was retired then), its buffer is released, it is matched and its completion time is known
  // (the partner has nothing more to tell it). Its tensor's slot forgets it.
  template <class E>
  void try_free(E& e, std::int32_t id) {
    Endpoint& ep = e.eps_[static_cast<std::size_t>(id)];
    if (ep.held || ep.buffer_live || ep.freed || ep.partner == kNoEndpoint || ep.at == kNever)
      return;
    auto& slots = e.tensors_[ep.tensor];
    if (!ep.send) {
      if (slots.recv == id) slots.recv = kNoEndpoint;
    } else if (ep.send_f && slots.send_f == id) {
      slots.send_f = kNoEndpoint;
    }
    ep.freed = 1;
    free_.push_back(id);
  }
  template <class E>
  void stream_done(E&, std::int32_t, double) {}
  const Streams* streams() const { return nullptr; }

 private:
  // The records grow as ops are posted (to 12 MiB at P=256). Their fresh pages are faulted in
  // kAhead records at a time by one call (base::prefault), not one fault per page; the table
  // grows by doubling as a vector does, into memory faulted in before the records are copied.
  void fault_ahead(std::vector<Endpoint>& eps) {
    constexpr std::size_t kAhead = (std::size_t{64} << 10) / sizeof(Endpoint);
    const std::size_t n = eps.size();
    if (n == eps.capacity()) {
      std::vector<Endpoint> grown;
      grown.reserve(std::max(2 * n, kAhead));
      faulted_ = std::min(grown.capacity(), n + kAhead);
      base::prefault(grown.data(), faulted_ * sizeof(Endpoint));
      grown.assign(eps.begin(), eps.end());
      eps.swap(grown);
      return;
    }
    faulted_ = std::min(eps.capacity(), n + kAhead);
    base::prefault(eps.data() + n, (faulted_ - n) * sizeof(Endpoint));
  }

  std::size_t faulted_ = 0;         // records of eps_ whose pages are faulted in
  std::vector<std::int32_t> free_;  // endpoint slots to reuse
};

}  // namespace ppsim::sim::engine
