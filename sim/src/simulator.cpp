#include "ppsim/sim/simulator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "engine/deadlock.hpp"
#include "engine/event_queue.hpp"
#include "engine/hazards.hpp"
#include "engine/layout.hpp"
#include "engine/matching.hpp"
#include "engine/memory.hpp"
#include "engine/mpi_progress.hpp"
#include "engine/nccl_progress.hpp"
#include "engine/network.hpp"
#include "engine/state.hpp"
#include "engine/step_channel.hpp"
#include "engine/streams.hpp"
#include "ppsim/base/huge_pages.hpp"
#include "ppsim/model/op_duration.hpp"
#include "ppsim/schedules/semantics.hpp"

// The orchestrator: issues each rank's ops in program order, wakes ranks, and calls the parts in
// engine/ (event queue, network, matching, memory, hazards) for everything else. The
// point-to-point progress rule is a type, MpiProgress or NcclProgress (engine/*_progress.hpp),
// so each is compiled into an engine of its own with no test of the mode on the way.

namespace ppsim::sim {

namespace {

using engine::assign_huge;
using engine::Block;
using engine::done_time;
using engine::Endpoint;
using engine::EventQueue;
using engine::kNever;
using engine::kNoEndpoint;
using engine::kRetired;
using engine::RankState;
using record::Observer;
using schedules::Diagnostic;
using schedules::Op;
using schedules::OpKind;
using schedules::Program;
using schedules::Semantics;

template <class Progress>
class Engine {
 public:
  Engine(const Program& p, const SimOptions& o, Observer* obs)
      : p_(p),
        sem_(p),
        o_(o),
        obs_(obs),
        S_(p.stages()),
        M_(p.microbatches()),
        R_(p.ranks()),
        match_(p_, eps_, tensors_),
        mem_(
            eps_, obs,
            [](void* engine, std::int32_t id) {
              auto* e = static_cast<Engine*>(engine);
              e->progress_.try_free(*e, id);
            },
            this),
        hazards_(p_, sem_),
        progress_(sem_, o.network),
        step_(o.step, p.stages()) {}

  SimResult run() {
    setup();
    if (obs_) obs_->on_begin(R_, /*concurrent=*/false);
    // A rank starts at 0 and issues its first op start_offset later.
    for (int r = 0; r < R_; ++r) wake(r, o_.costs.start_offset);
    while (true) {
      if (net_.has_ready() && (queue_.empty() || queue_.top_time() > net_.ready_time()))
        start_ready();
      if (queue_.empty()) break;
      const auto e = queue_.pop();
      const auto code = EventQueue::code_of(e);
      if (!queue_.empty()) prefetch_rank(queue_.top_code());
      if (code < static_cast<std::uint32_t>(R_))
        resume(static_cast<int>(code), EventQueue::time_of(e));
      else
        progress_.stream_done(*this,
                              static_cast<std::int32_t>(code - static_cast<std::uint32_t>(R_)),
                              EventQueue::time_of(e));
    }
    return finish();
  }

 private:
  friend Progress;

  // ---- setup -------------------------------------------------------------------------------
  std::size_t tensor_index(const Op& comm_op) const {
    return sem_.tensor_index(sem_.tensor_of(comm_op));
  }
  // The receive endpoint that brought the input a compute op reads; kNoEndpoint when it came
  // from this rank or from nowhere.
  std::int32_t input_endpoint(const Op& op) const {
    const auto t = sem_.input_tensor(op);
    return t ? tensors_[sem_.tensor_index(*t)].recv : kNoEndpoint;
  }

  void setup() {
    if (static_cast<int>(o_.costs.stages.size()) != S_)
      throw SimulationError(
          fmt::format("cost model has {} stages, program has {}", o_.costs.stages.size(), S_));
    for (int s = 0; s < S_; ++s) {
      const StageCost& c = o_.costs.stages[static_cast<std::size_t>(s)];
      if (c.forward < 0 || c.backward < 0 || c.backward_input < 0 || c.backward_weight < 0)
        throw SimulationError(fmt::format("stage {} has a negative cost", s));
    }
    if (o_.network.latency < 0 || o_.network.bandwidth < 0)
      throw SimulationError("latency and bandwidth must be >= 0");
    if (!(o_.costs.launch_overhead >= 0) || !(o_.costs.start_offset >= 0))
      throw SimulationError("launch_overhead and start_offset must be >= 0");
    const std::size_t tensors = sem_.tensor_count();
    if (tensors > std::numeric_limits<std::uint32_t>::max())
      throw SimulationError("too many tensors");
    match_.setup(o_.network.matching);
    base::assign_huge(tensors_, tensors, engine::TensorSlots{});
    dense_ = sem_.dense();
    mem_.setup(R_, M_, o_.network.boundary_bytes, dense_);
    net_.setup(o_.network, R_);
    const std::size_t n_eps = engine::lay_out_ranks(p_, ranks_, request_table_);
    cursor_.resize(static_cast<std::size_t>(R_));
    for (int r = 0; r < R_; ++r)
      cursor_[static_cast<std::size_t>(r)] = ranks_[static_cast<std::size_t>(r)].ops;
    progress_.setup(*this, n_eps);
  }

  // An endpoint's fields, filled when its op is posted.
  void init_endpoint(std::int32_t id, int r, int pos, const Op& op) {
    RankState& rs = ranks_[static_cast<std::size_t>(r)];
    const bool send = schedules::is_send(op.kind), send_f = op.kind == OpKind::SEND_F;
    const int peer = sem_.peer_of(op);
    if (peer < 0 || peer == r)
      throw SimulationError(
          fmt::format("rank {} op {}: {} has no peer on another rank", r, pos, p_.op_text(r, op)));
    const int link = net_.link_of(rs, r, peer, send);
    if (op.async) {
      if (op.request >= 0 && op.request < rs.dense_limit)
        rs.request_ep[static_cast<std::size_t>(op.request)] = id;
      else
        rs.sparse_request_ep[op.request] = id;
    }
    const std::size_t t = tensor_index(op);
    // One store of the whole record: setting fields of a zeroed record one by one read back
    // partly written bytes, and the stalls cost more than the rest of this function.
    eps_[static_cast<std::size_t>(id)] = Endpoint{
        .rank = r,
        .pos = pos,
        .link = link,
        .tensor = static_cast<std::uint32_t>(t),
        .send = send,
        .async = op.async,
        .frees_when_sent = send && (op.kind == OpKind::SEND_B || o_.memory.deallocate_outputs),
        .held = 1,
        .send_f = send_f,
    };
    if (!send)
      tensors_[t].recv = id;
    else if (send_f)
      tensors_[t].send_f = id;
  }

  // ---- events ------------------------------------------------------------------------------
  // The next event's rank: its state and the op it resumes at are loaded while this event runs
  // (with hundreds of ranks both are usually out of cache, and the wait for them was a third
  // of resume's time).
  void prefetch_rank(std::uint32_t code) const {
    if (code >= static_cast<std::uint32_t>(R_)) return;
    const char* rs = reinterpret_cast<const char*>(&ranks_[code]);
    for (int line = 0; line < 3; ++line) __builtin_prefetch(rs + 64 * line);
    // The rank usually runs past the op at its pc (a WAIT, a compute op, its posts): its next
    // line of ops too (an address, maybe past the ops' end: prefetching it is harmless).
    const auto op = reinterpret_cast<std::uintptr_t>(cursor_[code]);
    __builtin_prefetch(reinterpret_cast<const void*>(op));
    __builtin_prefetch(reinterpret_cast<const void*>(op + 64));
  }
  void wake(int rank, double time) { queue_.push(time, static_cast<std::uint32_t>(rank)); }

  // When all requests of the WAIT at rank r's pc are complete (kNever if one is not matched yet),
  // going on from where the last call stopped.
  [[gnu::always_inline]] double wait_time(int r, RankState& rs, const Op& op) const {
    const auto ids = p_.wait_ids(r, op);
    for (; rs.wait_next < ids.size(); ++rs.wait_next) {
      const double done =
          progress_.waited_time(*this, engine::request_endpoint(rs, r, ids[rs.wait_next]));
      if (done == kNever) return kNever;
      rs.wait_ready = std::max(rs.wait_ready, done);
    }
    return rs.wait_ready;
  }

  // The part of a block on [from, to) in which the rank was held by its own sends, waiting for
  // their receivers to post, while the compute op behind the blocking op had its data: every
  // receive the block and the WAITs up to that op wait for had arrived (one not yet posted: not
  // ready). Time a ready transfer waits for its link is not counted: no lowering avoids it. Looks
  // at most kStallScan ops ahead, so a run stays linear.
  double held_by_sends(int r, const RankState& rs, std::size_t pos, double from, double to) const {
    constexpr std::size_t kStallScan = 64;
    const double until = std::min(to, rs.sends_ready_at);  // its last send's receiver posted
    if (until <= from) return 0;
    double ready = from;
    auto waits_for = [&](const Op& wait) {  // false: a request not yet posted
      for (const std::int32_t request : p_.wait_ids(r, wait)) {
        const std::int32_t id = engine::posted_endpoint(rs, request);
        if (id == kNoEndpoint) return false;
        if (id >= 0 && !eps_[static_cast<std::size_t>(id)].send)
          ready = std::max(ready, progress_.waited_time(*this, id));
      }
      return true;
    };
    const Op& op = rs.ops[pos];
    if (op.kind == OpKind::WAIT)
      waits_for(op);
    else if (!schedules::is_send(op.kind))
      return 0;
    const std::size_t end = std::min(rs.n_ops, pos + 1 + kStallScan);
    for (std::size_t k = pos + 1; ready < until; ++k) {
      if (k == end) return 0;
      const Op& next = rs.ops[k];
      if (schedules::is_compute(next.kind)) break;
      if (next.kind == OpKind::WAIT ? !waits_for(next)
                                    : schedules::is_recv(next.kind) && !next.async)
        return 0;
    }
    return std::max(0.0, until - ready);
  }

  // Weights and optimizer state of the stages `r` runs.
  std::int64_t static_bytes_on(int r) const {
    if (o_.memory.per_stage.empty()) return o_.memory.static_bytes * p_.chunks_on(r);
    std::int64_t sum = 0;
    for (int s = 0; s < p_.stages(); ++s)
      if (p_.rank_of(s) == r) sum += o_.memory.per_stage[static_cast<std::size_t>(s)].static_bytes;
    return sum;
  }

  double duration(int r, const Op& op) const {
    if (const auto d = model::op_duration(o_.costs, p_, r, op)) return *d;
    throw SimulationError(
        fmt::format("rank {}: {} needs backward_input and backward_weight costs, only backward "
                    "was given",
                    r, p_.op_text(r, op)));
  }

  // Effects at the start and at the end of a compute op, for each part of a composite.
  void start_compute(int r, RankState& rs, const Op& op, double t) {
    sem_.for_each_part(r, op, [&](const Op& part) {
      if (Semantics::stash_effect(part.kind) != Semantics::Stash::take) return;
      mem_.stash(rs, r, part.microbatch, +1, t);
      mem_.add(rs, r, o_.memory.stage(part.stage).activation_bytes, t, true);
    });
  }

  // The ops that produce weight gradients, for the data-parallel channel.
  void gradients(int r, const Op& op, double begin, double end) {
    sem_.for_each_part(r, op, [&](const Op& part) {
      if (part.kind == OpKind::W || part.kind == OpKind::B) step_.gradient(part.stage, begin, end);
    });
  }

  void end_compute(int r, RankState& rs, const Op& op, double t) {
    sem_.for_each_part(r, op, [&](const Op& part) { end_part(r, rs, part, t); });
  }
  void end_part(int r, RankState& rs, const Op& op, double t) {
    const model::StageMemory sm = o_.memory.stage(op.stage);
    const std::int64_t act = sm.activation_bytes, ws = sm.weight_stash_bytes;
    release_recv(input_endpoint(op), r, rs, t);
    if (const auto out = sem_.released_output(op)) {
      const std::int32_t se = tensors_[sem_.tensor_index(*out)].send_f;
      if (se != kNoEndpoint && eps_[static_cast<std::size_t>(se)].rank == r)
        mem_.release_buffer(rs, se, t);
    }
    switch (Semantics::stash_effect(op.kind)) {
      case Semantics::Stash::release:
        mem_.add(rs, r, -act, t, true);
        mem_.stash(rs, r, op.microbatch, -1, t);
        break;
      case Semantics::Stash::keep_weights:
        mem_.add(rs, r, -(act - ws), t, true);
        break;
      case Semantics::Stash::release_weights:
        mem_.add(rs, r, -ws, t, true);
        mem_.stash(rs, r, op.microbatch, -1, t);
        break;
      default:
        break;
    }
  }
  void release_recv(std::int32_t ep, int r, RankState& rs, double t) {
    if (ep == kNoEndpoint) return;
    Endpoint& e = eps_[static_cast<std::size_t>(ep)];
    if (e.rank == r && done_time(e) <= t) mem_.release_buffer(rs, ep, t);
  }

  const Op& op_at(int rank, std::size_t pos) const {
    return ranks_[static_cast<std::size_t>(rank)].ops[pos];
  }

  void resume(int r, double t) {
    issue(r, t);
    const RankState& rs = ranks_[static_cast<std::size_t>(r)];
    cursor_[static_cast<std::size_t>(r)] = rs.ops + rs.pc;  // past the end once done: harmless
    // The ops it resumes at, towards L2 now: the other ranks' events (hundreds at P=256) usually
    // pass before it resumes, and prefetch_rank, one event ahead, is often too late on its own.
    const auto next = reinterpret_cast<std::uintptr_t>(rs.ops + rs.pc);
    __builtin_prefetch(reinterpret_cast<const void*>(next), 0, 2);
    __builtin_prefetch(reinterpret_cast<const void*>(next + 64), 0, 2);
  }
  // A rank resuming after a compute op posts a few comm ops, each writing its tensor's slot, and
  // reaches a WAIT that usually awaits a send posted hundreds of events ago. Both are out of
  // cache by now: their loads start here, while the compute op's end is applied.
  void prefetch_ahead(int r, const RankState& rs) const {
    constexpr std::size_t kAhead = 4;
    const std::size_t end = std::min(rs.n_ops, rs.pc + kAhead);
    for (std::size_t k = rs.pc; k < end; ++k) {
      const Op& op = rs.ops[k];
      if (op.kind == OpKind::WAIT) {
        for (const std::int32_t request : p_.wait_ids(r, op)) {
          if (request < 0 || request >= rs.dense_limit) continue;
          const std::int32_t ep = rs.request_ep[static_cast<std::size_t>(request)];
          if (ep >= 0) __builtin_prefetch(&eps_[static_cast<std::size_t>(ep)]);
        }
        return;
      }
      // Only what init_endpoint would index: a program that was not validated may have a comm
      // op without a peer (init_endpoint says so) or out of range.
      if (dense_ && schedules::is_comm(op.kind) && sem_.peer_stage(op) >= 0)
        if (const std::size_t t = tensor_index(op); t < tensors_.size())
          __builtin_prefetch(tensors_.data() + t);
    }
  }
  // Rank r runs from its pc at time t until it blocks, waits for a compute op's end, or is done.
  void issue(int r, double t) {
    RankState& rs = ranks_[static_cast<std::size_t>(r)];
    const Op* ops = rs.ops;
    if (rs.pending_end >= 0) {
      prefetch_ahead(r, rs);
      end_compute(r, rs, ops[static_cast<std::size_t>(rs.pending_end)], t);
      rs.pending_end = -1;
    }
    if (rs.block == Block::waking) {
      const std::size_t pos = rs.pc;
      if (obs_) obs_->on_blocked(r, static_cast<int>(pos), rs.blocked_since, t);
      rs.exposed += t - rs.blocked_since;
      rs.send_held += held_by_sends(r, rs, pos, rs.blocked_since, t);
      rs.sends_ready_at = 0;
      rs.block = Block::none;
      if (ops[pos].kind == OpKind::WAIT)
        progress_.retire_wait(*this, r, ops[pos]);
      else
        progress_.release_held(*this, rs.blocked_ep);
      ++rs.pc;
    }
    if (rs.start < 0 && rs.n_ops > 0) rs.start = t - o_.costs.start_offset;  // its first issue
    while (rs.pc < rs.n_ops) {
      const Op& op = ops[rs.pc];
      const int pos = static_cast<int>(rs.pc);
      if (schedules::is_group_marker(op.kind)) {
        ++rs.markers;  // no span of its own: not an op done
        progress_.marker(*this, r, op, t);
        ++rs.pc;
        continue;
      }
      if (schedules::is_compute(op.kind) ||
          schedules::info(op.kind).cls == schedules::OpClass::resource) {  // local work
        // The host launches it first: the rank idles, then the op runs.
        const double begin = t + o_.costs.launch_overhead;
        const double end = begin + duration(r, op);
        start_compute(r, rs, op, begin);
        if (step_.enabled()) gradients(r, op, begin, end);
        if (obs_) obs_->on_compute(r, pos, begin, end);
        rs.busy += end - begin;  // as a trace's spans sum it, so both give identical metrics
        ++rs.pc;
        // This rank posts nothing more at t; if no other rank has anything left at t either, the
        // instant is over and its transfers may take their links.
        if (net_.has_ready() && (queue_.empty() || queue_.top_time() > t)) start_ready();
        // No other event can happen before `end`: keep going without the heap.
        if (!net_.has_ready() && (queue_.empty() || end < queue_.top_time())) {
          end_compute(r, rs, op, end);
          t = end;
          continue;
        }
        rs.pending_end = pos;
        wake(r, end);
        return;
      }
      if (op.kind == OpKind::WAIT) {
        rs.wait_next = 0;
        rs.wait_ready = 0;
        const double ready = wait_time(r, rs, op);
        if (ready <= t) {
          if (obs_) obs_->on_blocked(r, pos, t, t);
          progress_.retire_wait(*this, r, op);
          ++rs.pc;
          continue;
        }
        rs.blocked_since = t;
        if (ready == kNever) {
          rs.block = Block::wait;
          return;
        }
        rs.block = Block::waking;
        wake(r, ready);
        return;
      }
      const std::int32_t id = progress_.new_endpoint(*this, rs);
      init_endpoint(id, r, pos, op);
      post(id, rs, op, t);
      Endpoint& e = eps_[static_cast<std::size_t>(id)];
      if (e.async) {
        if (obs_) obs_->on_post(r, pos, t);
        ++rs.pc;
        continue;
      }
      const double ready = done_time(e);
      if (ready <= t) {
        if (obs_) obs_->on_blocked(r, pos, t, t);
        progress_.release_held(*this, id);
        ++rs.pc;
        continue;
      }
      rs.blocked_since = t;
      rs.blocked_ep = id;
      if (ready == kNever) {
        rs.block = Block::endpoint;
        return;
      }
      rs.block = Block::waking;
      wake(r, ready);
      return;
    }
    rs.end = t;
    rs.block = Block::done;
  }

  // ---- communication -------------------------------------------------------------------------
  void post(std::int32_t id, RankState& rs, const Op& op, double t) {
    Endpoint& e = eps_[static_cast<std::size_t>(id)];
    if (mem_.buffer_bytes() > 0) {
      e.buffer_live = 1;
      mem_.add(rs, e.rank, mem_.buffer_bytes(), t);
    }
    if (e.send && net_.eager()) {  // the data is copied out at once: the buffer is free again
      e.eager = 1;
      net_.make_ready(id, t);
      if (e.frees_when_sent) mem_.release_buffer(rs, id, t);
    }
    const std::int32_t other = match_.post(id, op);
    if (other != kNoEndpoint) {
      const std::int32_t send_id = e.send ? id : other, recv_id = e.send ? other : id;
      match(send_id, recv_id, t);
    }
    progress_.posted(*this, e.rank, id, op, t);
  }

  void match(std::int32_t send_id, std::int32_t recv_id, double t) {
    eps_[static_cast<std::size_t>(send_id)].partner = recv_id;
    eps_[static_cast<std::size_t>(recv_id)].partner = send_id;
    progress_.matched(*this, send_id, recv_id, t);
  }
  void message_order(const Endpoint& s, const Endpoint& r, double t) {
    hazards_.message_order(s, op_at(s.rank, static_cast<std::size_t>(s.pos)), r,
                           op_at(r.rank, static_cast<std::size_t>(r.pos)), t);
  }

  // The instant is over: its ready transfers take their links (in the network's order).
  void start_ready() {
    const double t = net_.ready_time();
    net_.start_ready(
        eps_,
        [&](std::int32_t id, Endpoint& s) {
          // A blocked sender waited for this receiver until now (Engine::held_by_sends).
          RankState& sender = ranks_[static_cast<std::size_t>(s.rank)];
          if (sender.block != Block::none) sender.sends_ready_at = t;
          if (!s.eager && s.frees_when_sent && s.buffer_live)
            mem_.release_when_sent(ranks_[static_cast<std::size_t>(s.rank)], s, id);
          progress_.sent(*this, id, s);
        },
        // Ranks blocked on these transfers resume when they complete.
        [&](std::int32_t id, const Endpoint& s) {
          const std::int32_t partner = s.partner;
          wake_if_waiting(id, t);
          if (partner == kNoEndpoint) return;
          wake_if_waiting(partner, t);
          progress_.try_free(*this, partner);
          progress_.try_free(*this, id);
        });
  }
  void count_bytes(const Endpoint& s, const Endpoint& r) {
    const std::int64_t bytes = o_.network.boundary_bytes;
    ranks_[static_cast<std::size_t>(s.rank)].sent += bytes;
    ranks_[static_cast<std::size_t>(r.rank)].recv += bytes;
    comm_bytes_ += bytes;
  }
  void transferred(const Endpoint& s, const Endpoint& r) {
    progress_.delivered(*this, s, r);
    if (obs_)
      obs_->on_transfer(
          {s.rank, s.pos, r.rank, r.pos, s.at - net_.xfer_time(), s.at, o_.network.boundary_bytes});
  }

  // A rank blocked on this endpoint (or in a WAIT that now has all its partners) resumes when
  // its op completes.
  void wake_if_waiting(std::int32_t id, double now) {
    const Endpoint& e = eps_[static_cast<std::size_t>(id)];
    RankState& rs = ranks_[static_cast<std::size_t>(e.rank)];
    double ready = kNever;
    if (rs.block == Block::endpoint && rs.blocked_ep == id)
      ready = done_time(e);
    else if (rs.block == Block::wait)
      ready = wait_time(e.rank, rs, op_at(e.rank, rs.pc));
    if (ready == kNever) return;
    rs.block = Block::waking;
    wake(e.rank, std::max(ready, now));
  }

  // ---- the end -----------------------------------------------------------------------------
  SimResult finish() {
    SimResult res;
    res.per_rank.resize(static_cast<std::size_t>(R_));
    bool stuck = false;
    for (int r = 0; r < R_; ++r) {
      RankState& rs = ranks_[static_cast<std::size_t>(r)];
      mem_.flush_releases(rs, kNever);
      const bool finished = rs.block == Block::done;
      if (!finished) {
        stuck = true;
        rs.end = rs.block == Block::none ? rs.end : rs.blocked_since;
      }
      if (rs.start < 0) rs.start = 0;
      const std::int64_t fixed = static_bytes_on(r);
      record::RankMetrics& m = res.per_rank[static_cast<std::size_t>(r)];
      m.rank = r;
      m.start = rs.start;
      m.end = rs.end;
      m.busy = rs.busy;
      m.comm_exposed = rs.exposed;
      if (rs.send_held > res.send_held) {
        res.send_held = rs.send_held;
        res.send_held_rank = r;
      }
      m.peak_inflight = rs.peak_inflight;
      m.peak_memory_bytes = rs.peak_memory + fixed;
      m.peak_static_bytes = fixed;
      m.peak_activation_bytes = rs.stashed_at_peak;
      m.sent_bytes = rs.sent;
      m.recv_bytes = rs.recv;
      m.ops_done = rs.pc - rs.markers;
      if (obs_)
        obs_->on_rank_end(
            r, {rs.start, rs.end, finished, finished ? -1 : static_cast<int>(rs.pc), fixed});
    }
    res.summarize();
    res.comm_bytes = comm_bytes_;
    res.endpoint_records = eps_.size();
    if (step_.enabled() && !stuck) {
      std::vector<double> ends(static_cast<std::size_t>(R_));
      for (int r = 0; r < R_; ++r)
        ends[static_cast<std::size_t>(r)] = res.per_rank[static_cast<std::size_t>(r)].end;
      res.step = step_.finish(p_, ends);
    }
    if (stuck)
      res.deadlock = engine::analyze_deadlock({p_, sem_, ranks_, eps_, progress_.streams()});
    res.errors = hazards_.take();
    if (obs_) obs_->on_end();
    return res;
  }

  const Program& p_;
  schedules::Semantics sem_;
  const SimOptions& o_;
  Observer* obs_;
  int S_, M_, R_;
  bool dense_ = false;  // Semantics::dense(): a tensor's index is arithmetic, never a lookup
  std::int64_t comm_bytes_ = 0;
  EventQueue queue_;
  std::vector<RankState> ranks_;
  std::vector<const Op*> cursor_;  // rank -> the op at its pc (read by prefetch_rank only)
  std::vector<std::int32_t> request_table_;  // the ranks' request_ep slices
  std::vector<Endpoint> eps_;
  engine::Network net_;
  engine::MpiMatching match_;
  engine::Memory mem_;
  engine::Hazards hazards_;
  Progress progress_;
  std::vector<engine::TensorSlots> tensors_;
  engine::StepChannel step_;
};

}  // namespace

SimResult simulate(const Program& program, const SimOptions& options, Observer* observer) {
  if (options.network.semantics == model::P2pSemantics::nccl)
    return Engine<engine::NcclProgress>(program, options, observer).run();
  return Engine<engine::MpiProgress>(program, options, observer).run();
}

}  // namespace ppsim::sim
