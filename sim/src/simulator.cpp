#include "ppsim/sim/simulator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "engine/event_queue.hpp"
#include "engine/hazards.hpp"
#include "engine/matching.hpp"
#include "engine/memory.hpp"
#include "engine/network.hpp"
#include "engine/state.hpp"
#include "engine/streams.hpp"
#include "ppsim/base/huge_pages.hpp"
#include "ppsim/model/op_duration.hpp"
#include "ppsim/record/wait_graph.hpp"
#include "ppsim/schedules/rank_blocks.hpp"
#include "ppsim/schedules/semantics.hpp"

// The orchestrator: issues each rank's ops in program order, wakes ranks, and calls the parts in
// engine/ (event queue, network, matching, memory, hazards) for everything else.

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
        nccl_(o.network.semantics == model::P2pSemantics::nccl),
        match_(p_, eps_, tensors_),
        mem_(
            eps_, obs,
            [](void* engine, std::int32_t id) { static_cast<Engine*>(engine)->try_free(id); },
            this),
        hazards_(p_, sem_),
        streams_(sem_, model::stream_options(o.network)) {}

  SimResult run() {
    setup();
    if (obs_) obs_->on_begin(R_, /*concurrent=*/false);
    for (int r = 0; r < R_; ++r) wake(r, 0.0);
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
        stream_done(static_cast<std::int32_t>(code - static_cast<std::uint32_t>(R_)),
                    EventQueue::time_of(e));
    }
    return finish();
  }

 private:
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
    const std::size_t tensors = sem_.tensor_count();
    if (tensors > std::numeric_limits<std::uint32_t>::max())
      throw SimulationError("too many tensors");
    match_.setup(o_.network.matching);
    base::assign_huge(tensors_, tensors, engine::TensorSlots{});
    dense_ = sem_.dense();
    mem_.setup(R_, M_, o_.network.boundary_bytes, dense_);
    ranks_.resize(static_cast<std::size_t>(R_));
    cursor_.assign(static_cast<std::size_t>(R_), nullptr);
    net_.setup(o_.network, R_);

    // The engine reads the Program's ops in place: a copy (kept once for its locality) cost a
    // quarter of the run's memory and more time in page faults than it saved in TLB misses.
    // Request ids up to a small multiple of the rank's ops (lowering numbers them 0..n-1) are
    // looked up in one table, each rank a slice of it on huge pages: per-rank tables grown by
    // doubling cost a copy and twice the page faults, and TLB misses on every lookup.
    // Each rank's comm ops and request ids are counted on several threads (a pass over every op),
    // then laid out in rank order.
    std::vector<std::size_t> comm_ops(static_cast<std::size_t>(R_));
    std::vector<std::int32_t> dense_ids(static_cast<std::size_t>(R_));
    base::for_rank_blocks(schedules::rank_blocks(p_, 0), [&](std::size_t, int first, int end) {
      for (int r = first; r < end; ++r) {
        const auto& ops = p_.ops(r);
        const auto limit = static_cast<std::int32_t>(
            std::min<std::size_t>(4 * ops.size() + 64, std::numeric_limits<std::int32_t>::max()));
        std::size_t comm = 0;
        std::int32_t dense = 0;  // one more than the largest request id below the limit
        for (const Op& op : ops) {
          if (!schedules::is_comm(op.kind)) continue;
          ++comm;
          if (op.async && op.request >= 0 && op.request < limit)
            dense = std::max(dense, op.request + 1);
        }
        comm_ops[static_cast<std::size_t>(r)] = comm;
        dense_ids[static_cast<std::size_t>(r)] = dense;
      }
    });
    std::size_t n_eps = 0, n_requests = 0;
    std::vector<std::size_t> request_base(static_cast<std::size_t>(R_));
    for (int r = 0; r < R_; ++r) {
      RankState& rs = ranks_[static_cast<std::size_t>(r)];
      rs.ep_base = static_cast<std::int32_t>(n_eps);
      const auto& ops = p_.ops(r);
      rs.ops = ops.data();
      cursor_[static_cast<std::size_t>(r)] = rs.ops;
      rs.n_ops = ops.size();
      n_eps += comm_ops[static_cast<std::size_t>(r)];
      if (n_eps >= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
        throw SimulationError("too many communication ops");
      // Ids in [dense, limit) are never posted: a WAIT on one finds it in neither place.
      rs.dense_limit = dense_ids[static_cast<std::size_t>(r)];
      request_base[static_cast<std::size_t>(r)] = n_requests;
      n_requests += static_cast<std::size_t>(rs.dense_limit);
    }
    base::assign_huge(request_table_, n_requests, kNoEndpoint);
    for (int r = 0; r < R_; ++r)
      ranks_[static_cast<std::size_t>(r)].request_ep =
          request_table_.data() + request_base[static_cast<std::size_t>(r)];
    eps_.clear();
    eps_faulted_ = 0;
    free_eps_.clear();
    if (nccl_) {
      base::assign_huge(eps_, n_eps, Endpoint{});
      streams_.setup(R_, n_eps);
      link_buffered_.clear();
      link_stalled_.clear();
    }
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

  // The endpoint of rank r's request, or kRetired once a WAIT on it has returned.
  // The endpoint of a rank's request (kRetired once waited), kNoEndpoint if never posted.
  static std::int32_t posted_endpoint(const RankState& rs, std::int32_t request) {
    if (request >= 0 && request < rs.dense_limit)
      return rs.request_ep[static_cast<std::size_t>(request)];
    const auto it = rs.sparse_request_ep.find(request);
    return it == rs.sparse_request_ep.end() ? kNoEndpoint : it->second;
  }
  std::int32_t request_endpoint(int r, std::int32_t request) const {
    const std::int32_t ep = posted_endpoint(ranks_[static_cast<std::size_t>(r)], request);
    if (ep != kNoEndpoint) return ep;
    throw SimulationError(
        fmt::format("rank {}: WAIT on request #{} that was never posted", r, request));
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
  double wait_time(int r, RankState& rs, const Op& op) const {
    const auto ids = p_.wait_ids(r, op);
    for (; rs.wait_next < ids.size(); ++rs.wait_next) {
      const double done = waited_time(request_endpoint(r, ids[rs.wait_next]));
      if (done == kNever) return kNever;
      rs.wait_ready = std::max(rs.wait_ready, done);
    }
    return rs.wait_ready;
  }

  // When a WAIT on endpoint `id` can return: its op's completion, or under nccl its kernel's
  // (a group's requests complete together, as PyTorch's coalesced works do); kNever until known.
  double waited_time(std::int32_t id) const {
    if (id == kRetired) return 0;
    if (!nccl_) return done_time(eps_[static_cast<std::size_t>(id)]);
    // No kernel yet: its group is still open (only in a program validation refuses).
    const std::int32_t kernel = streams_.kernel_of(id);
    if (kernel < 0) return kNever;
    const auto& k = streams_.kernel(kernel);
    return k.remaining == 0 ? k.done : kNever;
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
        const std::int32_t id = posted_endpoint(rs, request);
        if (id == kNoEndpoint) return false;
        if (id >= 0 && !eps_[static_cast<std::size_t>(id)].send)
          ready = std::max(ready, waited_time(id));
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
        release_wait(r, ops[pos]);
      else
        release_held(rs.blocked_ep);
      ++rs.pc;
    }
    if (rs.start < 0 && rs.n_ops > 0) rs.start = t;
    while (rs.pc < rs.n_ops) {
      const Op& op = ops[rs.pc];
      const int pos = static_cast<int>(rs.pc);
      if (schedules::is_group_marker(op.kind)) {  // groups change nothing under mpi
        ++rs.markers;                             // no span of its own: not an op done
        if (nccl_ && op.kind == OpKind::GROUP_START)
          streams_.group_start(r);
        else if (nccl_)
          streams_.group_end(r, [&](std::int32_t k) { start_kernel(k, t); });
        ++rs.pc;
        continue;
      }
      if (schedules::is_compute(op.kind) ||
          schedules::info(op.kind).cls == schedules::OpClass::resource) {  // local work
        const double end = t + duration(r, op);
        start_compute(r, rs, op, t);
        if (obs_) obs_->on_compute(r, pos, t, end);
        rs.busy += end - t;  // as a trace's spans sum it, so both give identical metrics
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
          release_wait(r, op);
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
      const std::int32_t id = new_endpoint(rs);
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
        release_held(id);
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

  // ---- endpoint records ----------------------------------------------------------------------
  std::int32_t new_endpoint(RankState& rs) {
    if (nccl_) return rs.ep_base + rs.next_ep++;
    if (!free_eps_.empty()) {
      const std::int32_t id = free_eps_.back();
      free_eps_.pop_back();
      return id;
    }
    if (eps_.size() == eps_faulted_) fault_endpoints_ahead();
    eps_.emplace_back();
    return static_cast<std::int32_t>(eps_.size() - 1);
  }
  // mpi: the records grow as ops are posted (to 12 MiB at P=256). Their fresh pages are faulted
  // in kAhead records at a time by one call (base::prefault), not one fault per page; the table
  // grows by doubling as a vector does, into memory faulted in before the records are copied there.
  void fault_endpoints_ahead() {
    constexpr std::size_t kAhead = (std::size_t{64} << 10) / sizeof(Endpoint);
    const std::size_t n = eps_.size();
    if (n == eps_.capacity()) {
      std::vector<Endpoint> grown;
      grown.reserve(std::max(2 * n, kAhead));
      eps_faulted_ = std::min(grown.capacity(), n + kAhead);
      base::prefault(grown.data(), eps_faulted_ * sizeof(Endpoint));
      grown.assign(eps_.begin(), eps_.end());
      eps_.swap(grown);
      return;
    }
    eps_faulted_ = std::min(eps_.capacity(), n + kAhead);
    base::prefault(eps_.data() + n, (eps_faulted_ - n) * sizeof(Endpoint));
  }
  // The rank has passed the WAIT `op`: its requests are complete (a later WAIT on one returns at
  // once) and nothing waits on their endpoints any more.
  void release_wait(int r, const Op& op) {
    if (nccl_) return;
    RankState& rs = ranks_[static_cast<std::size_t>(r)];
    for (const std::int32_t request : p_.wait_ids(r, op)) {
      std::int32_t* slot = nullptr;
      if (request >= 0 && request < rs.dense_limit)
        slot = &rs.request_ep[static_cast<std::size_t>(request)];
      else
        slot = &rs.sparse_request_ep.find(request)->second;  // found by wait_time
      const std::int32_t id = *slot;
      *slot = kRetired;
      release_held(id);
    }
  }
  void release_held(std::int32_t id) {
    if (nccl_ || id < 0) return;
    eps_[static_cast<std::size_t>(id)].held = 0;
    try_free(id);
  }
  // Frees endpoint `id` once nothing can read it again: its rank is past it (and its request
  // was retired then), its buffer is released, it is matched and its completion time is known
  // (the partner has nothing more to tell it). Its tensor's slot forgets it.
  void try_free(std::int32_t id) {
    if (nccl_) return;  // the streams index kernels by endpoint id
    Endpoint& e = eps_[static_cast<std::size_t>(id)];
    if (e.held || e.buffer_live || e.freed || e.partner == kNoEndpoint || e.at == kNever) return;
    if (!e.send) {
      if (tensors_[e.tensor].recv == id) tensors_[e.tensor].recv = kNoEndpoint;
    } else if (e.send_f && tensors_[e.tensor].send_f == id) {
      tensors_[e.tensor].send_f = kNoEndpoint;
    }
    e.freed = 1;
    free_eps_.push_back(id);
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
    // nccl: the op is a kernel on its stream (or waits for its group's end); what it does once
    // it runs is decided in run_op.
    if (nccl_) streams_.issue(e.rank, id, op, [&](std::int32_t k) { start_kernel(k, t); });
  }

  void match(std::int32_t send_id, std::int32_t recv_id, double t) {
    Endpoint& s = eps_[static_cast<std::size_t>(send_id)];
    Endpoint& r = eps_[static_cast<std::size_t>(recv_id)];
    s.partner = recv_id;
    r.partner = send_id;
    if (match_.by_order() && !nccl_)  // (nccl: when the message is delivered, transferred())
      hazards_.message_order(s, op_at(s.rank, static_cast<std::size_t>(s.pos)), r,
                             op_at(r.rank, static_cast<std::size_t>(r.pos)), t);
    // Bytes are counted once per transfer, here where both ends are known (under nccl, when the
    // message reaches its receive: a matched pair may never run).
    if (nccl_) return;  // transfers start when the ops run (run_op)
    count_bytes(s, r);
    if (!s.eager) {
      net_.make_ready(send_id, t);
      return;
    }
    if (s.at == kNever) return;  // an eager send posted this instant: its start is not yet known
    // An eager message that already left: the receive is done when it has arrived.
    r.at = s.at;
    transferred(s, r);
    wake_if_waiting(recv_id, t);
    try_free(send_id);
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
          if (nccl_) member_done(id);
          if (s.partner != kNoEndpoint &&
              (!nccl_ || eps_[static_cast<std::size_t>(s.partner)].running)) {
            Endpoint& r = eps_[static_cast<std::size_t>(s.partner)];
            r.at = s.at;
            transferred(s, r);
            if (nccl_) member_done(s.partner);
          }
        },
        // Ranks blocked on these transfers resume when they complete.
        [&](std::int32_t id, const Endpoint& s) {
          const std::int32_t partner = s.partner;
          wake_if_waiting(id, t);
          if (partner == kNoEndpoint) return;
          wake_if_waiting(partner, t);
          try_free(partner);
          try_free(id);
        });
  }
  void count_bytes(const Endpoint& s, const Endpoint& r) {
    const std::int64_t bytes = o_.network.boundary_bytes;
    ranks_[static_cast<std::size_t>(s.rank)].sent += bytes;
    ranks_[static_cast<std::size_t>(r.rank)].recv += bytes;
    comm_bytes_ += bytes;
  }
  void transferred(const Endpoint& s, const Endpoint& r) {
    if (nccl_) {
      count_bytes(s, r);
      hazards_.message_order(s, op_at(s.rank, static_cast<std::size_t>(s.pos)), r,
                             op_at(r.rank, static_cast<std::size_t>(r.pos)), r.at);
    }
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

  // ---- nccl: streams and kernels (docs/SEMANTICS.md) --------------------------------------
  void start_kernel(std::int32_t k, double t) {
    for (const std::int32_t id : streams_.members(streams_.kernel(k))) run_op(id, t);
  }
  // Op `id` starts running at t (its kernel reached the head of its stream).
  void run_op(std::int32_t id, double t) {
    Endpoint& e = eps_[static_cast<std::size_t>(id)];
    e.running = 1;
    Endpoint* partner =
        e.partner != kNoEndpoint ? &eps_[static_cast<std::size_t>(e.partner)] : nullptr;
    if (e.send) {
      if (partner && partner->running)
        ready(id, t);  // rendezvous
      else if (!try_buffer(id, t))
        stalled(e.link).push_back(id);  // waits for its receive, or for room in the buffer
      return;
    }
    if (!partner || !partner->running) return;  // its send will find it running
    if (!partner->buffered) {                   // a send waiting for this receive
      std::erase(stalled(e.link), e.partner);
      ready(e.partner, t);
      return;
    }
    // The message went into the buffer: it is received when it has arrived, freeing its room.
    consume(e.link, t);
    if (partner->at == kNever) return;  // its transfer starts this instant (start_ready)
    e.at = std::max(t, partner->at);
    transferred(*partner, e);
    member_done(id);
    wake_if_waiting(id, t);
  }
  void ready(std::int32_t send_id, double t) {
    eps_[static_cast<std::size_t>(send_id)].ready = 1;
    net_.make_ready(send_id, t);
  }
  // A running send whose receive is not running goes into the pair's buffer if it fits.
  bool try_buffer(std::int32_t id, double t) {
    Endpoint& e = eps_[static_cast<std::size_t>(id)];
    const std::int64_t cap = o_.network.nccl_buffer_bytes, bytes = o_.network.boundary_bytes;
    std::int64_t& used = buffered(e.link);
    if (cap <= 0 || used + bytes > cap) return false;
    used += bytes;
    e.buffered = 1;
    ready(id, t);
    return true;
  }
  // A receive takes its message out of the buffer: sends waiting for room go in, in order.
  void consume(int link, double t) {
    buffered(link) -= o_.network.boundary_bytes;
    auto& waiting = stalled(link);
    std::size_t n = 0;
    while (n < waiting.size() && try_buffer(waiting[n], t)) ++n;
    waiting.erase(waiting.begin(), waiting.begin() + static_cast<std::ptrdiff_t>(n));
  }
  std::int64_t& buffered(int link) {
    if (static_cast<std::size_t>(link) >= link_buffered_.size())
      link_buffered_.resize(static_cast<std::size_t>(link) + 1, 0);
    return link_buffered_[static_cast<std::size_t>(link)];
  }
  std::vector<std::int32_t>& stalled(int link) {
    if (static_cast<std::size_t>(link) >= link_stalled_.size())
      link_stalled_.resize(static_cast<std::size_t>(link) + 1);
    return link_stalled_[static_cast<std::size_t>(link)];
  }
  // An op's completion time is known: its kernel ends once all of its ops are.
  void member_done(std::int32_t id) {
    if (!streams_.member_done(id, eps_[static_cast<std::size_t>(id)].at)) return;
    const auto& k = streams_.kernel(streams_.kernel_of(id));
    queue_.push(k.done, static_cast<std::uint32_t>(R_) + static_cast<std::uint32_t>(k.stream));
  }
  void stream_done(std::int32_t stream, double t) {
    streams_.advance(stream, [&](std::int32_t k) { start_kernel(k, t); });
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
    if (stuck) res.deadlock = analyze_deadlock();
    res.errors = hazards_.take();
    if (obs_) obs_->on_end();
    return res;
  }

  record::Deadlock analyze_deadlock() const {
    std::vector<record::WaitEdge> edges;
    std::vector<bool> finished(static_cast<std::size_t>(R_));
    for (int r = 0; r < R_; ++r) {
      const RankState& rs = ranks_[static_cast<std::size_t>(r)];
      finished[static_cast<std::size_t>(r)] = rs.block == Block::done;
      if (rs.block != Block::endpoint && rs.block != Block::wait) continue;
      const Op& op = op_at(r, rs.pc);
      const std::string text = schedules::op_label(p_, r, op);
      const int pos = static_cast<int>(rs.pc);
      // Under nccl an op queued behind a kernel waits on what that kernel waits on.
      auto awaits = [&](std::int32_t id, std::string waiting_for) {
        const Endpoint& e = eps_[static_cast<std::size_t>(id)];
        const Op& pending = op_at(r, static_cast<std::size_t>(e.pos));
        if (!nccl_ || e.running || streams_.kernel_of(id) < 0) {
          edges.push_back({r, pos, text, sem_.peer_of(pending), std::move(waiting_for)});
          return;
        }
        const auto& head =
            streams_.kernel(streams_.head(streams_.kernel(streams_.kernel_of(id)).stream));
        for (const std::int32_t b : streams_.members(head)) {
          const Endpoint& be = eps_[static_cast<std::size_t>(b)];
          if (done_time(be) != kNever) continue;
          const Op& blocker = op_at(r, static_cast<std::size_t>(be.pos));
          edges.push_back({r, pos, text, sem_.peer_of(blocker),
                           streams_.model().queued_text(r, pending, blocker)});
        }
      };
      if (rs.block == Block::endpoint) {
        awaits(rs.blocked_ep, "");
        continue;
      }
      const auto requests = p_.wait_ids(r, op);
      // Under nccl a WAIT on a done op waits on the rest of its kernel; a partner the WAIT awaits
      // itself has its own edge.
      auto awaited_here = [&](std::int32_t ep) {
        return std::any_of(requests.begin(), requests.end(),
                           [&](std::int32_t q) { return request_endpoint(r, q) == ep; });
      };
      for (std::int32_t request : requests) {
        const std::int32_t id = request_endpoint(r, request);
        if (id == kRetired) continue;  // waited before, complete
        const Endpoint& e = eps_[static_cast<std::size_t>(id)];
        const Op& awaited = op_at(r, static_cast<std::size_t>(e.pos));
        if (done_time(e) != kNever) {
          // Done, but under nccl its kernel may not be: the WAIT waits on the kernel's other ops.
          if (!nccl_ || waited_time(id) != kNever || streams_.kernel_of(id) < 0) continue;
          const auto& k = streams_.kernel(streams_.kernel_of(id));
          for (const std::int32_t b : streams_.members(k)) {
            const Endpoint& be = eps_[static_cast<std::size_t>(b)];
            if (done_time(be) != kNever || awaited_here(b)) continue;
            const Op& partner = op_at(r, static_cast<std::size_t>(be.pos));
            edges.push_back({r, pos, text, sem_.peer_of(partner),
                             streams_.model().partner_text(r, awaited, partner)});
          }
          continue;
        }
        awaits(id, p_.op_text(r, awaited));
      }
    }
    return record::find_deadlock(R_, edges, finished);
  }

  const Program& p_;
  schedules::Semantics sem_;
  const SimOptions& o_;
  Observer* obs_;
  int S_, M_, R_;
  bool nccl_;
  bool dense_ = false;  // Semantics::dense(): a tensor's index is arithmetic, never a lookup
  std::int64_t comm_bytes_ = 0;
  EventQueue queue_;
  std::vector<RankState> ranks_;
  std::vector<const Op*> cursor_;  // rank -> the op at its pc (read by prefetch_rank only)
  std::vector<std::int32_t> request_table_;  // the ranks' request_ep slices
  std::vector<Endpoint> eps_;
  std::size_t eps_faulted_ = 0;         // mpi: records of eps_ whose pages are faulted in
  std::vector<std::int32_t> free_eps_;  // mpi: endpoint slots to reuse
  engine::Network net_;
  engine::MpiMatching match_;
  engine::Memory mem_;
  engine::Hazards hazards_;
  engine::Streams streams_;
  std::vector<std::int64_t> link_buffered_;  // nccl: bytes sent on a link and not yet received
  // nccl: running sends waiting for their receive or for room, by link, in the order they ran
  std::vector<std::vector<std::int32_t>> link_stalled_;
  std::vector<engine::TensorSlots> tensors_;
};

}  // namespace

SimResult simulate(const Program& program, const SimOptions& options, Observer* observer) {
  return Engine(program, options, observer).run();
}

}  // namespace ppsim::sim
