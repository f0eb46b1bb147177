#include "rank_runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "ppsim/model/op_duration.hpp"
#include "ppsim/schedules/p2p_streams.hpp"

namespace ppsim::real::detail {

using schedules::Op;
using schedules::OpKind;
using schedules::Semantics;

RankRunner::RankRunner(RunShared& run, int rank)
    : run_(run),
      rank_(rank),
      ops_(run.program.ops(rank)),
      allocator_(run.memory_scale),
      static_allocator_(run.memory_scale) {
  // The tables at their final size: no rehash while the rank runs (on a GPU every microsecond
  // between two ops is the GPU's idle time).
  std::size_t comm = 0, recvs = 0, forwards = 0;
  for (const auto& op : ops_) {
    comm += schedules::is_comm(op.kind);
    recvs += schedules::is_comm(op.kind) && !schedules::is_send(op.kind);
    forwards += op.kind == OpKind::F || schedules::is_composite(op.kind);
  }
  requests_.reserve(comm);
  by_id_.reserve(comm);
  recv_of_.reserve(recvs);
  send_f_of_.reserve(comm - recvs);
  stashes_.reserve(forwards);
  timeline_.static_bytes = 0;
  for (int st = 0; st < run_.program.stages(); ++st)
    if (run_.program.rank_of(st) == rank_)
      timeline_.static_bytes += run_.model.memory.stage(st).static_bytes;
  // Weights and optimizer state: really held for the whole run, outside the counters (as in the
  // simulator, they are RankTimeline::static_bytes), and allocated before the clock starts.
  static_ =
      std::make_unique<Buffer>(static_allocator_, schedules::TensorId{}, timeline_.static_bytes);
  static_->write({}, rank_, -1, "the weights");
}

void RankRunner::run() noexcept {
  precise_timers();
  try {
    issue_all();
  } catch (const std::exception& e) {
    std::lock_guard lock(run_.failure_mu);
    const int pos = stopped_pos_;
    if (run_.failure.empty())
      run_.failure = pos >= 0
                         ? fmt::format("rank {} op {} ({}): {}", rank_, pos, op_text(pos), e.what())
                         : fmt::format("rank {}: {}", rank_, e.what());
    run_.cancel.store(true);
    run_.transport.abort();
  }
  finish_rank();
}

std::string RankRunner::op_text(int pos) const {
  return schedules::op_label(run_.program, rank_, ops_[static_cast<std::size_t>(pos)]);
}

void RankRunner::hazard(std::string kind, int pos, std::string message) {
  diagnostics_.push_back({std::move(kind), rank_, pos, op_text(pos),
                          fmt::format("rank {} op {} ({}): {}", rank_, pos, op_text(pos), message),
                          false});
}

void RankRunner::issue_all() {
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    const int pos = static_cast<int>(i);
    stopped_pos_ = pos;  // until it is done
    if (run_.cancel.load(std::memory_order_relaxed)) return;
    const Op& op = ops_[i];
    if (i == 0) timeline_.start = now();
    if (schedules::is_comm(op.kind)) {
      run_p2p(pos, op);
      if (stopped_on_.size()) return;
    } else if (op.kind == OpKind::WAIT) {
      if (!run_wait(pos, op)) return;
    } else if (op.kind == OpKind::GROUP_START) {
      run_.transport.group_start(rank_);  // (groups change nothing under mpi)
    } else if (op.kind == OpKind::GROUP_END) {
      run_.transport.group_end(rank_);
    } else {
      run_compute(pos, op);
    }
    run_.progress.fetch_add(1, std::memory_order_relaxed);
    last_end_ = now();
  }
  stopped_pos_ = -1;
}

// ---- memory ------------------------------------------------------------------------------------

void RankRunner::counter(double t) {
  if (allocator_.live() == reported_live_) return;
  reported_live_ = allocator_.live();
  if (run_.observer) run_.observer->on_counter(rank_, t, reported_live_, inflight_);
}

// Sends whose storage goes once transferred: released in the order their transfers ended, at
// those times, before the rank's memory changes again (as the simulator applies them).
void RankRunner::reap(double t, bool wait_for_ties) {
  if (frees_when_sent_.empty()) return;
  const double horizon = t * run_.unit_seconds + run_.tie_window;
  // A transfer under way that ends by now, or within the tie window after now, is waited for:
  // the model may put its end and this memory change at one instant (uniform costs make such
  // ties common), where releases count first; the host's jitter cannot order them better.
  for (Live* l : frees_when_sent_) {
    if (!wait_for_ties) break;
    const double ends = l->request->ends_at.load(std::memory_order_relaxed);
    if (ends >= 0 && ends <= horizon && !l->request->complete.load(std::memory_order_acquire)) {
      const RequestPtr r = l->request;
      if (!run_.transport.wait(rank_, std::span<const RequestPtr>(&r, 1))) return;
    }
  }
  // A transfer that ended after the horizon (it completed while this ran) waits for a later
  // memory change, as in the simulator.
  std::vector<Live*> done;
  std::erase_if(frees_when_sent_, [&](Live* l) {
    if (!l->request->complete.load(std::memory_order_acquire) || l->request->transfer_end > horizon)
      return false;
    done.push_back(l);
    return true;
  });
  std::stable_sort(done.begin(), done.end(), [](const Live* a, const Live* b) {
    return a->request->transfer_end < b->request->transfer_end;
  });
  for (Live* l : done)
    release_now(*l->request->buffer, "its send (deallocated once transferred)",
                l->request->transfer_end / run_.unit_seconds);
}

std::shared_ptr<Buffer> RankRunner::allocate(schedules::TensorId tensor, std::int64_t bytes,
                                             double t) {
  reap(t);
  auto b = std::make_shared<Buffer>(allocator_, tensor, bytes);
  counter(t);
  return b;
}

void RankRunner::release(Buffer& buffer, const std::string& by, double t) {
  reap(t);
  release_now(buffer, by, t);
}

void RankRunner::release_now(Buffer& buffer, const std::string& by, double t) {
  if (!buffer.has_storage()) return;
  buffer.release_storage(by);
  counter(t);
}

void RankRunner::stash(int microbatch, int delta, double t) {
  auto& n = stash_count_[microbatch];
  const bool was = n > 0;
  n = static_cast<std::uint32_t>(static_cast<int>(n) + delta);
  const bool is = n > 0;
  if (!is) stash_count_.erase(microbatch);
  if (was == is) return;
  inflight_ += is ? 1 : -1;
  if (run_.observer) run_.observer->on_counter(rank_, t, allocator_.live(), inflight_);
}

RankRunner::Live* RankRunner::live_of_tensor(std::unordered_map<std::size_t, Live*>& table,
                                             const schedules::TensorId& t) {
  const auto it = table.find(run_.semantics.tensor_index(t));
  return it == table.end() ? nullptr : it->second;
}

// ---- compute -----------------------------------------------------------------------------------

std::optional<std::string> RankRunner::overdue(double now, double hang_timeout) const {
  const int pos = computing_pos_.load(std::memory_order_acquire);
  if (pos < 0) return std::nullopt;
  const double since = computing_since_.load(std::memory_order_relaxed);
  const double expected = computing_expected_.load(std::memory_order_relaxed);
  const double budget = std::max(hang_timeout, 10 * expected);
  if (now - since <= budget || computing_pos_.load(std::memory_order_acquire) != pos)
    return std::nullopt;
  return fmt::format(
      "rank {} op {} ({}): the compute op has not returned after {:.3g} s (its modelled wall "
      "time is {:.3g} s; the watchdog allows 10 times that and at least --hang-timeout {:.3g} "
      "s): the device never completed its work (a hung kernel or stream); the run was stopped",
      rank_, pos, op_text(pos), now - since, expected, hang_timeout);
}

void RankRunner::run_compute(int pos, const Op& op) {
  const Semantics& sem = run_.semantics;
  const auto& mem = run_.model.memory;
  const double t0 = now();
  const auto duration = model::op_duration(run_.model.costs, run_.program, rank_, op);
  if (!duration) throw std::runtime_error("I/W without backward_input and backward_weight costs");
  std::vector<Buffer*> inputs, outputs;
  sem.for_each_part(rank_, op, [&](const Op& part) {
    const std::size_t cell = sem.cell_index(part.stage, part.microbatch);
    if (Semantics::stash_effect(part.kind) == Semantics::Stash::take) {
      stash(part.microbatch, +1, t0);
      auto& s = stashes_[cell];
      s = allocate({false, part.stage, part.microbatch}, mem.stage(part.stage).activation_bytes,
                   t0);
      outputs.push_back(s.get());
    } else if (auto it = stashes_.find(cell); it != stashes_.end() && it->second) {
      inputs.push_back(it->second.get());  // a backward reads what its forward stashed
    }
    // The tensor from another rank: it must have been received and waited.
    if (!sem.input_recv(part)) return;
    const auto tensor = *sem.input_tensor(part);
    Live* l = live_of_tensor(recv_of_, tensor);
    if (l == nullptr) {
      hazard("missing_receive", pos,
             fmt::format("needs the {} from another rank but no receive brought it",
                         describe(tensor)));
      return;
    }
    if (!l->request->waited) {  // its bytes may not be there yet: not read
      hazard("read_before_wait", pos,
             fmt::format("reads the {} while its receive (request #{}) has not been waited",
                         describe(tensor), l->request->op.request));
      return;
    }
    inputs.push_back(l->request->buffer.get());
  });
  for (Buffer* in : inputs) {
    try {
      (void)in->read(rank_, pos, [this, pos] { return op_text(pos); });
    } catch (const HazardError& e) {
      hazard(e.kind(), pos, e.what());
    }
  }
  for (Buffer* out : outputs)
    out->write({out->tensor(), run_.iteration}, rank_, pos, [this, pos] { return op_text(pos); });
  if (run_.compute.may_hang()) {
    computing_expected_.store(*duration * run_.unit_seconds, std::memory_order_relaxed);
    computing_since_.store(run_.clock.now(), std::memory_order_relaxed);
    computing_pos_.store(pos, std::memory_order_release);
  }
  run_.compute.run(rank_, op, t0 * run_.unit_seconds, *duration,
                   blocked_since_compute_ * run_.unit_seconds, inputs, outputs);
  computing_pos_.store(-1, std::memory_order_release);
  blocked_since_compute_ = 0;
  const double t1 = now();
  if (run_.observer) {
    // A GPU's own times where it launched the op before this call.
    const auto span = run_.compute.span(rank_);
    if (span)
      run_.observer->on_compute(rank_, pos, span->first / run_.unit_seconds,
                                span->second / run_.unit_seconds);
    else
      run_.observer->on_compute(rank_, pos, t0, t1);
  }

  // End effects, per part, in the simulator's order.
  sem.for_each_part(rank_, op, [&](const Op& part) {
    if (const auto in = sem.input_tensor(part)) {
      Live* l = live_of_tensor(recv_of_, *in);
      if (l && l->request->rank == rank_ && l->request->complete.load(std::memory_order_acquire))
        release(*l->request->buffer, fmt::format("{} (its consumer)", op_text(pos)), t1);
    }
    if (const auto out = sem.released_output(part)) {
      if (Live* l = live_of_tensor(send_f_of_, *out)) {
        if (l->request->op.async && !l->request->waited) {
          // The request owns its buffer: it goes when the request is waited, not now. NCCL
          // keeps the tensor alive until its kernel is done: no hazard there.
          l->release_when_waited = true;
          if (!nccl())
            hazard("buffer_released_before_wait", pos,
                   fmt::format("frees the output of {}F{} while its send (request #{}) is not "
                               "waited: kept until the wait (Gloo aborts with \"Cannot lock "
                               "pointer to unbound buffer\")",
                               out->producer, out->microbatch, l->request->op.request));
        } else {
          release(*l->request->buffer, op_text(pos), t1);
        }
      }
    }
    const std::size_t cell = sem.cell_index(part.stage, part.microbatch);
    auto it = stashes_.find(cell);
    switch (Semantics::stash_effect(part.kind)) {
      case Semantics::Stash::release:
        if (it != stashes_.end() && it->second) release(*it->second, op_text(pos), t1);
        stashes_.erase(cell);
        stash(part.microbatch, -1, t1);
        break;
      case Semantics::Stash::keep_weights:
        // All but the weight part goes: the stash is replaced by a smaller one.
        if (it != stashes_.end() && it->second) {
          release(*it->second, op_text(pos), t1);
          it->second = allocate({false, part.stage, part.microbatch},
                                mem.stage(part.stage).weight_stash_bytes, t1);
        }
        break;
      case Semantics::Stash::release_weights:
        if (it != stashes_.end() && it->second) release(*it->second, op_text(pos), t1);
        stashes_.erase(cell);
        stash(part.microbatch, -1, t1);
        break;
      default:
        break;
    }
  });
}

// ---- communication -----------------------------------------------------------------------------

void RankRunner::run_p2p(int pos, const Op& op) {
  const Semantics& sem = run_.semantics;
  const auto& net = run_.model.network;
  const double t0 = now();
  const auto tensor = sem.tensor_of(op);
  const bool send = schedules::is_send(op.kind);
  auto buffer = allocate(tensor, net.boundary_bytes, t0);
  // The producer's output, stamped so that the receiver can tell which tensor it got.
  if (send)
    buffer->write({tensor, run_.iteration}, rank_, pos, [this, pos] { return op_text(pos); });
  auto live = std::make_unique<Live>();
  live->request = run_.transport.post(rank_, pos, op, buffer);
  Live* l = live.get();
  requests_.push_back(std::move(live));
  run_.progress.fetch_add(1, std::memory_order_relaxed);
  const std::size_t t = sem.tensor_index(tensor);
  if (send) {
    if (op.kind == OpKind::SEND_F) send_f_of_[t] = l;
    const bool frees = op.kind == OpKind::SEND_B || run_.model.memory.deallocate_outputs;
    const bool eager = !nccl() && net.eager_limit > 0 && net.boundary_bytes <= net.eager_limit;
    if (frees && eager)
      release(*buffer, "its eager send (copied out)", t0);
    else if (frees)
      frees_when_sent_.push_back(l);
  } else {
    recv_of_[t] = l;
  }
  if (op.async) {
    by_id_[op.request] = l;
    if (run_.observer) run_.observer->on_post(rank_, pos, t0);
    return;
  }
  const RequestPtr r = l->request;
  if (!block(pos, std::span<const RequestPtr>(&r, 1), t0)) return;
  completed(*l);
  waited(*l);
}

bool RankRunner::run_wait(int pos, const Op& op) {
  const double t0 = now();
  std::vector<RequestPtr> reqs;
  std::vector<Live*> lives;
  for (const std::int32_t id : run_.program.wait_ids(rank_, op)) {
    const auto it = by_id_.find(id);
    if (it == by_id_.end())
      throw std::runtime_error(fmt::format("WAIT on request #{} that was never posted", id));
    lives.push_back(it->second);
    reqs.push_back(it->second->request);
  }
  if (!block(pos, reqs, t0)) return false;
  for (Live* l : lives) {
    completed(*l);
    waited(*l);
  }
  return true;
}

// Blocks until the requests complete: false (and the rank stops) when the run was stopped.
bool RankRunner::block(int pos, std::span<const RequestPtr> requests, double since) {
  status_.store(RankStatus::blocked, std::memory_order_release);
  const bool ok = run_.transport.wait(rank_, requests);
  status_.store(RankStatus::running, std::memory_order_release);
  if (!ok) {
    blocked_since_ = since;
    stopped_pos_ = pos;
    stopped_on_.assign(requests.begin(), requests.end());
    // What each is queued behind, now that nothing moves any more (the transport forgets it at
    // the run's end).
    stopped_behind_.clear();
    for (const RequestPtr& r : requests) {
      auto& behind = stopped_behind_.emplace_back();
      for (const RequestPtr& b : run_.transport.blockers(*r)) behind.push_back(b->op);
    }
    return false;
  }
  const double end = now();
  blocked_since_compute_ += end - since;
  if (run_.observer) run_.observer->on_blocked(rank_, pos, since, end);
  return true;
}

void RankRunner::completed(Live& l) {
  Request& r = *l.request;
  if (l.reported || r.send) return;
  l.reported = true;
  if (!r.error.empty()) {
    hazard("released_storage_access", r.pos, r.error);
  } else if (r.buffer->has_storage()) {  // (a consumer that did not wait may have freed it)
    try {
      const Payload got = r.buffer->read(rank_, r.pos, [this, &r] { return op_text(r.pos); });
      const auto want = run_.semantics.tensor_of(r.op);
      if (!(got.tensor == want))
        hazard("message_order_mismatch", r.pos,
               fmt::format("receives the message of {} on rank {}: under fifo matching (NCCL) "
                           "the wrong tensor would be delivered silently",
                           schedules::op_label(
                               run_.program, r.peer_rank,
                               run_.program.ops(r.peer_rank)[static_cast<std::size_t>(r.peer_pos)]),
                           r.peer_rank));
    } catch (const HazardError& e) {
      hazard(e.kind(), r.pos, e.what());
    }
  }
  if (run_.observer)
    run_.observer->on_transfer(
        {r.peer_rank, r.peer_pos, rank_, r.pos, r.transfer_start / run_.unit_seconds,
         r.transfer_end / run_.unit_seconds, run_.model.network.boundary_bytes});
}

void RankRunner::waited(Live& l) {
  l.request->waited = true;
  if (l.release_when_waited) {
    l.release_when_waited = false;
    release(*l.request->buffer, "its owner, once its request was waited", now());
  }
}

// ---- the end -----------------------------------------------------------------------------------

void RankRunner::finish_rank() {
  const bool finished = stopped_pos_ < 0;
  const double t = now();
  // Every send that has ended lets go of its buffer, as at the simulator's end (a stopped rank
  // waits for nothing more).
  reap(std::numeric_limits<double>::infinity(), finished);
  if (finished) {
    // Requests never waited: the op that posted each one dropped it.
    std::vector<const Live*> left;
    for (const auto& l : requests_)
      if (l->request->op.async && !l->request->waited) left.push_back(l.get());
    std::sort(left.begin(), left.end(), [](const Live* a, const Live* b) {
      return a->request->op.request < b->request->op.request;
    });
    for (const Live* l : left)
      hazard("never_waited", l->request->pos,
             fmt::format("request #{} is never waited before the program ends",
                         l->request->op.request));
  }
  report_unseen_transfers();
  timeline_.finished = finished;
  timeline_.stuck_pos = finished ? -1 : stopped_pos_;
  timeline_.end = finished ? last_end_ : blocked_since_;
  if (!finished && stopped_on_.empty()) timeline_.end = t;  // stopped between ops
  if (run_.observer) run_.observer->on_rank_end(rank_, timeline_);
  status_.store(finished ? RankStatus::done : RankStatus::stopped, std::memory_order_release);
}

// Transfers that ended but were never looked at still happened.
void RankRunner::report_unseen_transfers() {
  for (const auto& l : requests_)
    if (!l->reported && !l->request->send && l->request->complete.load(std::memory_order_acquire)) {
      l->reported = true;
      if (run_.observer)
        run_.observer->on_transfer({l->request->peer_rank, l->request->peer_pos, rank_,
                                    l->request->pos, l->request->transfer_start / run_.unit_seconds,
                                    l->request->transfer_end / run_.unit_seconds,
                                    run_.model.network.boundary_bytes});
    }
}

std::vector<record::WaitEdge> RankRunner::wait_edges() const {
  std::vector<record::WaitEdge> edges;
  if (stopped_pos_ < 0 || stopped_on_.empty()) return edges;
  const Op& op = ops_[static_cast<std::size_t>(stopped_pos_)];
  const std::string text = op_text(stopped_pos_);
  const schedules::P2pStreams streams(run_.semantics, model::stream_options(run_.model.network));
  // nccl: an op queued behind another kernel waits on that kernel's ops not yet complete, each
  // an edge to its peer (the simulator builds the same edges).
  const auto queued = [&](std::size_t i, const Op& awaited) {
    if (i >= stopped_behind_.size() || stopped_behind_[i].empty()) return false;
    for (const Op& b : stopped_behind_[i])
      edges.push_back({rank_, stopped_pos_, text, run_.semantics.peer_of(b),
                       streams.queued_text(rank_, awaited, b)});
    return true;
  };
  if (op.kind != OpKind::WAIT) {
    if (!queued(0, op))
      edges.push_back({rank_, stopped_pos_, text, run_.semantics.peer_of(op), ""});
    return edges;
  }
  for (std::size_t i = 0; i < stopped_on_.size(); ++i) {
    const RequestPtr& r = stopped_on_[i];
    if (r->complete.load(std::memory_order_acquire)) {
      // nccl: done, but its kernel still runs its other ops (the transport's blockers); one this
      // WAIT awaits itself has its own edge.
      if (i < stopped_behind_.size())
        for (const Op& b : stopped_behind_[i]) {
          if (std::any_of(stopped_on_.begin(), stopped_on_.end(),
                          [&](const RequestPtr& q) { return q->op == b; }))
            continue;
          edges.push_back({rank_, stopped_pos_, text, run_.semantics.peer_of(b),
                           streams.partner_text(rank_, r->op, b)});
        }
      continue;
    }
    if (queued(i, r->op)) continue;
    edges.push_back({rank_, stopped_pos_, text, run_.semantics.peer_of(r->op),
                     run_.program.op_text(rank_, r->op)});
  }
  return edges;
}

}  // namespace ppsim::real::detail
