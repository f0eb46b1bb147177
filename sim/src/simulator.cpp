#include "ppsim/sim/simulator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <deque>
#include <limits>
#include <unordered_map>

#include <sys/mman.h>

#include "deadlock.hpp"
#include "ppsim/schedules/semantics.hpp"

namespace ppsim::sim {

namespace {

using record::Observer;
using schedules::Diagnostic;
using schedules::Op;
using schedules::OpKind;
using schedules::Program;

constexpr std::int32_t kNoEndpoint = -1;

// Sizes `v` to n copies of `value`, asking the kernel for transparent huge pages before the memory
// is first touched: with hundreds of ranks the engine walks as many streams through these arrays,
// and 4 KiB pages make that TLB-bound (40% slower at P=256).
template <typename T>
void assign_huge(std::vector<T>& v, std::size_t n, const T& value) {
  v.clear();
  v.shrink_to_fit();
  v.reserve(n);
#ifdef MADV_HUGEPAGE
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  std::uintptr_t begin = reinterpret_cast<std::uintptr_t>(v.data());
  std::uintptr_t end = begin + n * sizeof(T);
  begin = (begin + kHuge - 1) & ~(kHuge - 1);
  end &= ~(kHuge - 1);
  if (end > begin)
    madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // advice only
#endif
  v.assign(n, value);
}

// One per comm op, filled when the op is posted. Ids are assigned up front (rank r's k-th comm op
// is endpoint base[r] + k) so the array is allocated once. 32 bytes: tens of millions of these.
// A transfer's end is known when its two sides match, so completions need no events of their own:
// a rank that has to wait for one is woken at that time, and the others just compare times.
struct Endpoint {
  double at = std::numeric_limits<double>::infinity();  // send: transfer end; recv: data there
  std::int32_t rank = 0;
  std::int32_t pos = 0;
  std::int32_t partner = kNoEndpoint;
  std::int32_t link = 0;
  // frees_when_sent: a gradient, or a forward output under deallocate_outputs.
  std::uint8_t send : 1 = 0, async : 1 = 0, posted : 1 = 0, buffer_live : 1 = 0, eager : 1 = 0,
                      frees_when_sent : 1 = 0;
};

struct Link {
  double free_at = 0;
  std::deque<std::int32_t> sends, recvs;  // fifo matching: posted, not yet matched
};

// Min-heap of rank wake-ups with four children per node: shallower than a binary heap, and a
// node's children share a cache line. An event is one 128-bit integer: the bits of its
// (non-negative) time, which order like the value, then a sequence number so equal times pop in
// push order, then the rank.

class EventQueue {
 public:
  using Event = unsigned __int128;
  bool empty() const { return h_.empty(); }
  double top_time() const { return time_of(h_.front()); }
  static double time_of(Event e) {
    return std::bit_cast<double>(static_cast<std::uint64_t>(e >> 64));
  }
  static std::uint32_t code_of(Event e) { return static_cast<std::uint32_t>(e); }

  void push(double time, std::uint32_t code) {
    if (seq_ == 0xffffffffu) throw SimulationError("more than 4 billion events in one run");
    const Event e = (static_cast<Event>(std::bit_cast<std::uint64_t>(time + 0.0)) << 64) |
                    (static_cast<Event>(seq_++) << 32) | code;
    std::size_t i = h_.size();
    h_.push_back(e);
    while (i > 0) {
      const std::size_t parent = (i - 1) / 4;
      if (e >= h_[parent]) break;
      h_[i] = h_[parent];
      i = parent;
    }
    h_[i] = e;
  }
  Event pop() {
    const Event top = h_.front();
    const Event last = h_.back();
    h_.pop_back();
    const std::size_t n = h_.size();
    std::size_t i = 0;
    while (true) {
      const std::size_t first = 4 * i + 1;
      if (first >= n) break;
      std::size_t best = first;
      const std::size_t end = std::min(first + 4, n);
      for (std::size_t c = first + 1; c < end; ++c)
        if (h_[c] < h_[best]) best = c;
      if (h_[best] >= last) break;
      h_[i] = h_[best];
      i = best;
    }
    if (n > 0) h_[i] = last;
    return top;
  }

 private:
  std::vector<Event> h_;
  std::uint32_t seq_ = 0;
};

// `waking`: its wake-up is queued (so later matches do not queue a second one).
enum class Block : std::uint8_t { none, endpoint, wait, waking, done };

struct RankState {
  const Op* ops = nullptr;  // this rank's ops in the engine's contiguous copy
  std::size_t n_ops = 0;
  std::size_t pc = 0;
  std::int32_t next_ep = 0;
  std::int32_t ep_base = 0;
  std::int32_t pending_end = -1;  // compute op whose end effects apply when the rank resumes
  Block block = Block::none;
  std::int32_t blocked_ep = kNoEndpoint;
  double blocked_since = 0;
  double start = -1, end = 0;
  double busy = 0, exposed = 0;
  std::int64_t memory = 0, peak_memory = 0;
  std::int64_t sent = 0, recv = 0;
  int inflight = 0, peak_inflight = 0;
  // request id -> endpoint: a vector for the dense ids lowering makes, a map for the others
  std::vector<std::int32_t> request_ep;
  std::unordered_map<std::int32_t, std::int32_t> sparse_request_ep;
  std::int32_t dense_limit = 0;
  std::vector<std::pair<int, int>> links;  // (peer, link id), negative peer = incoming
  // Sent buffers that free themselves when their transfer ends: (time, endpoint), a min-heap.
  std::vector<std::pair<double, std::int32_t>> releases;
};

class Engine {
 public:
  Engine(const Program& p, const SimOptions& o, Observer* obs)
      : p_(p),
        sem_(p),
        o_(o),
        obs_(obs),
        S_(p.stages()),
        M_(p.microbatches()),
        R_(p.ranks()) {}

  SimResult run() {
    setup();
    if (obs_) obs_->on_begin(R_, /*concurrent=*/false);
    for (int r = 0; r < R_; ++r) wake(r, 0.0);
    while (true) {
      if (!ready_.empty() && (queue_.empty() || queue_.top_time() > ready_time_)) start_ready();
      if (queue_.empty()) break;
      const auto e = queue_.pop();
      resume(static_cast<int>(EventQueue::code_of(e)), EventQueue::time_of(e));
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
    return t ? recv_ep_[sem_.tensor_index(*t)] : kNoEndpoint;
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
    assign_huge(slot_, tensors, kNoEndpoint);
    assign_huge(recv_ep_, tensors, kNoEndpoint);
    assign_huge(send_f_ep_, tensors / 2, kNoEndpoint);  // forward tensors come first
    assign_huge(inflight_, static_cast<std::size_t>(R_) * static_cast<std::size_t>(M_),
                std::uint16_t{0});
    ranks_.resize(static_cast<std::size_t>(R_));
    xfer_time_ = o_.network.latency +
                 (o_.network.bandwidth > 0
                      ? static_cast<double>(o_.network.boundary_bytes) / o_.network.bandwidth
                      : 0);
    eager_ = o_.network.eager_limit > 0 && o_.network.boundary_bytes <= o_.network.eager_limit;

    // All ranks' ops in one huge-page array: the engine hops between ranks at every event, and
    // per-rank vectors on 4 KiB pages cost a TLB miss per hop at P=256.
    assign_huge(ops_, p_.total_ops(), Op{});
    std::size_t n_eps = 0, n_ops = 0;
    for (int r = 0; r < R_; ++r) {
      RankState& rs = ranks_[static_cast<std::size_t>(r)];
      rs.ep_base = static_cast<std::int32_t>(n_eps);
      const auto& ops = p_.ops(r);
      rs.ops = ops_.data() + n_ops;
      rs.n_ops = ops.size();
      for (const Op& op : ops) {
        n_eps += schedules::is_comm(op.kind);
        ops_[n_ops++] = op;
      }
      if (n_eps >= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
        throw SimulationError("too many communication ops");
      rs.dense_limit = static_cast<std::int32_t>(
          std::min<std::size_t>(4 * ops.size() + 64, std::numeric_limits<std::int32_t>::max()));
    }
    assign_huge(eps_, n_eps, Endpoint{});
  }

  // An endpoint's fields, filled when its op is posted.
  void init_endpoint(std::int32_t id, int r, int pos, const Op& op) {
    Endpoint& e = eps_[static_cast<std::size_t>(id)];
    RankState& rs = ranks_[static_cast<std::size_t>(r)];
    e.rank = r;
    e.pos = pos;
    e.send = schedules::is_send(op.kind);
    e.async = op.async;
    e.frees_when_sent = e.send && (op.kind == OpKind::SEND_B || o_.memory.deallocate_outputs);
    const int peer = sem_.peer_of(op);
    if (peer < 0 || peer == r)
      throw SimulationError(
          fmt::format("rank {} op {}: {} has no peer on another rank", r, pos, p_.op_text(r, op)));
    const int key = e.send ? peer : -peer - 1;
    e.link = -1;
    for (const auto& [k, l] : rs.links)
      if (k == key) e.link = l;
    if (e.link < 0) {
      const long long pair =
          e.send ? static_cast<long long>(r) * R_ + peer : static_cast<long long>(peer) * R_ + r;
      auto [it, inserted] = link_ids_.emplace(pair, static_cast<int>(links_.size()));
      if (inserted) links_.emplace_back();
      e.link = it->second;
      rs.links.emplace_back(key, e.link);
    }
    if (op.async) {
      if (op.request < rs.dense_limit) {
        if (static_cast<std::size_t>(op.request) >= rs.request_ep.size())
          rs.request_ep.resize(std::max<std::size_t>(static_cast<std::size_t>(op.request) + 1,
                                                     2 * rs.request_ep.size()),
                               kNoEndpoint);
        rs.request_ep[static_cast<std::size_t>(op.request)] = id;
      } else {
        rs.sparse_request_ep[op.request] = id;
      }
    }
    const std::size_t t = tensor_index(op);
    if (!e.send)
      recv_ep_[t] = id;
    else if (op.kind == OpKind::SEND_F)
      send_f_ep_[t] = id;
  }

  std::int32_t request_endpoint(int r, std::int32_t request) const {
    const RankState& rs = ranks_[static_cast<std::size_t>(r)];
    if (request >= 0 && request < rs.dense_limit) {
      if (static_cast<std::size_t>(request) < rs.request_ep.size()) {
        const std::int32_t ep = rs.request_ep[static_cast<std::size_t>(request)];
        if (ep != kNoEndpoint) return ep;
      }
    } else if (auto it = rs.sparse_request_ep.find(request); it != rs.sparse_request_ep.end()) {
      return it->second;
    }
    throw SimulationError(
        fmt::format("rank {}: WAIT on request #{} that was never posted", r, request));
  }

  // ---- events ------------------------------------------------------------------------------
  void wake(int rank, double time) { queue_.push(time, static_cast<std::uint32_t>(rank)); }

  static constexpr double kNever = std::numeric_limits<double>::infinity();
  // When the endpoint's op completes; kNever while its partner has not posted. An eager send
  // completes when posted.
  static double done_time(const Endpoint& e) { return e.send && e.eager ? 0.0 : e.at; }
  // When all requests of a WAIT are complete (kNever if one is not matched yet).
  double wait_time(int r, const Op& op) const {
    double t = 0;
    for (std::int32_t request : p_.wait_ids(r, op))
      t = std::max(t, done_time(eps_[static_cast<std::size_t>(request_endpoint(r, request))]));
    return t;
  }

  double duration(int r, const Op& op) const {
    if (schedules::is_composite(op.kind)) {  // parts run together; costs.overlapped_fb comes later
      double d = 0;
      for (const Op& part : p_.parts(r, op)) d += duration(r, part);
      return d;
    }
    if (schedules::info(op.kind).cls == schedules::OpClass::resource) return 0;
    const StageCost& c = o_.costs.stages[static_cast<std::size_t>(op.stage)];
    switch (op.kind) {
      case OpKind::F:
        return c.forward;
      case OpKind::B:
        return c.backward;
      case OpKind::I:
      case OpKind::W:
        if (!c.split)
          throw SimulationError(fmt::format(
              "rank {}: {} needs backward_input and backward_weight costs for stage {}, "
              "only backward was given",
              r, schedules::op_text(op), op.stage));
        return op.kind == OpKind::I ? c.backward_input : c.backward_weight;
      default:
        return 0;
    }
  }

  // `time` < 0: the problem is not tied to a moment (found after the run).
  void error(std::string kind, int rank, int pos, double time, std::string message) {
    if (errors_.size() >= 1000) return;
    std::string text = pos >= 0 ? p_.op_text(rank, op_at(rank, static_cast<std::size_t>(pos))) : "";
    std::string when = time >= 0 ? fmt::format(" at t={}", time) : "";
    errors_.push_back({std::move(kind), rank, pos, text,
                       fmt::format("rank {} op {} ({}){}: {}", rank, pos, text, when, message),
                       false});
  }

  void memory(RankState& rs, int rank, std::int64_t delta, double time) {
    if (delta == 0) return;
    if (!rs.releases.empty() && rs.releases.front().first <= time) flush_releases(rs, time);
    rs.memory += delta;
    rs.peak_memory = std::max(rs.peak_memory, rs.memory);
    if (obs_) obs_->on_counter(rank, time, rs.memory, rs.inflight);
  }
  void stash(RankState& rs, int rank, int mb, int delta, double time) {
    auto& n = inflight_[static_cast<std::size_t>(rank) * static_cast<std::size_t>(M_) +
                        static_cast<std::size_t>(mb)];
    const bool was = n > 0;
    n = static_cast<std::uint16_t>(n + delta);
    if (was != (n > 0)) {
      rs.inflight += n > 0 ? 1 : -1;
      rs.peak_inflight = std::max(rs.peak_inflight, rs.inflight);
      if (obs_) obs_->on_counter(rank, time, rs.memory, rs.inflight);
    }
  }
  // Applies, in time order, the releases of sent buffers whose transfers ended by `time`.
  void flush_releases(RankState& rs, double time) {
    auto later = [](const auto& a, const auto& b) { return a.first > b.first; };
    while (!rs.releases.empty() && rs.releases.front().first <= time) {
      std::pop_heap(rs.releases.begin(), rs.releases.end(), later);
      const auto [when, id] = rs.releases.back();
      rs.releases.pop_back();
      release_buffer(eps_[static_cast<std::size_t>(id)], when);
    }
  }
  void release_when_sent(Endpoint& e, std::int32_t id) {
    auto& q = ranks_[static_cast<std::size_t>(e.rank)].releases;
    q.emplace_back(e.at, id);
    std::push_heap(q.begin(), q.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  }
  void release_buffer(Endpoint& e, double time) {
    if (!e.buffer_live) return;
    e.buffer_live = 0;
    memory(ranks_[static_cast<std::size_t>(e.rank)], e.rank, -o_.network.boundary_bytes, time);
  }

  // Effects at the start and at the end of a compute op, for each part of a composite.
  void start_compute(int r, RankState& rs, const Op& op, double t) {
    sem_.for_each_part(r, op, [&](const Op& part) {
      if (part.kind != OpKind::F) return;
      stash(rs, r, part.microbatch, +1, t);
      memory(rs, r, o_.memory.activation_bytes, t);
    });
  }

  void end_compute(int r, RankState& rs, const Op& op, double t) {
    sem_.for_each_part(r, op, [&](const Op& part) { end_part(r, rs, part, t); });
  }
  void end_part(int r, RankState& rs, const Op& op, double t) {
    const std::int64_t act = o_.memory.activation_bytes, ws = o_.memory.weight_stash_bytes;
    switch (op.kind) {
      case OpKind::F:
        release_recv(input_endpoint(op), r, t);
        break;
      case OpKind::B:
      case OpKind::I:
        release_recv(input_endpoint(op), r, t);
        if (const auto out = sem_.released_output(op)) {
          const std::int32_t se = send_f_ep_[sem_.tensor_index(*out)];
          if (se != kNoEndpoint && eps_[static_cast<std::size_t>(se)].rank == r)
            release_buffer(eps_[static_cast<std::size_t>(se)], t);
        }
        if (op.kind == OpKind::B) {
          memory(rs, r, -act, t);
          stash(rs, r, op.microbatch, -1, t);
        } else {
          memory(rs, r, -(act - ws), t);
        }
        break;
      case OpKind::W:
        memory(rs, r, -ws, t);
        stash(rs, r, op.microbatch, -1, t);
        break;
      default:
        break;
    }
  }
  void release_recv(std::int32_t ep, int r, double t) {
    if (ep == kNoEndpoint) return;
    Endpoint& e = eps_[static_cast<std::size_t>(ep)];
    if (e.rank == r && done_time(e) <= t) release_buffer(e, t);
  }

  const Op& op_at(int rank, std::size_t pos) const {
    return ranks_[static_cast<std::size_t>(rank)].ops[pos];
  }

  void resume(int r, double t) {
    RankState& rs = ranks_[static_cast<std::size_t>(r)];
    const Op* ops = rs.ops;
    if (rs.pending_end >= 0) {
      end_compute(r, rs, ops[static_cast<std::size_t>(rs.pending_end)], t);
      rs.pending_end = -1;
    }
    if (rs.block == Block::waking) {
      const std::size_t pos = rs.pc;
      if (obs_) obs_->on_blocked(r, static_cast<int>(pos), rs.blocked_since, t);
      rs.exposed += t - rs.blocked_since;
      rs.block = Block::none;
      ++rs.pc;
    }
    if (rs.start < 0 && rs.n_ops > 0) rs.start = t;
    while (rs.pc < rs.n_ops) {
      const Op& op = ops[rs.pc];
      const int pos = static_cast<int>(rs.pc);
      if (schedules::is_compute(op.kind) ||
          schedules::info(op.kind).cls == schedules::OpClass::resource) {  // local work
        const double end = t + duration(r, op);
        start_compute(r, rs, op, t);
        if (obs_) obs_->on_compute(r, pos, t, end);
        rs.busy += end - t;  // as a trace's spans sum it, so both give identical metrics
        ++rs.pc;
        // This rank posts nothing more at t; if no other rank has anything left at t either, the
        // instant is over and its transfers may take their links.
        if (!ready_.empty() && (queue_.empty() || queue_.top_time() > t)) start_ready();
        // No other event can happen before `end`: keep going without the heap.
        if (ready_.empty() && (queue_.empty() || end < queue_.top_time())) {
          end_compute(r, rs, op, end);
          t = end;
          continue;
        }
        rs.pending_end = pos;
        wake(r, end);
        return;
      }
      if (op.kind == OpKind::WAIT) {
        const double ready = wait_time(r, op);
        if (ready <= t) {
          if (obs_) obs_->on_blocked(r, pos, t, t);
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
      const std::int32_t id = rs.ep_base + rs.next_ep++;
      init_endpoint(id, r, pos, op);
      post(id, op, t);
      Endpoint& e = eps_[static_cast<std::size_t>(id)];
      if (e.async) {
        if (obs_) obs_->on_post(r, pos, t);
        ++rs.pc;
        continue;
      }
      const double ready = done_time(e);
      if (ready <= t) {
        if (obs_) obs_->on_blocked(r, pos, t, t);
        ++rs.pc;
        continue;
      }
      rs.blocked_since = t;
      if (ready == kNever) {
        rs.block = Block::endpoint;
        rs.blocked_ep = id;
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
  void post(std::int32_t id, const Op& op, double t) {
    Endpoint& e = eps_[static_cast<std::size_t>(id)];
    e.posted = 1;
    if (o_.network.boundary_bytes > 0) {
      e.buffer_live = 1;
      memory(ranks_[static_cast<std::size_t>(e.rank)], e.rank, o_.network.boundary_bytes, t);
    }
    if (e.send && eager_) {  // the data is copied out at once: the buffer is free again
      e.eager = 1;
      make_ready(id, t);
      if (e.frees_when_sent) release_buffer(e, t);
    }
    std::int32_t other = kNoEndpoint;
    if (o_.network.matching == Matching::tag) {
      std::int32_t& slot = slot_[tensor_index(op)];
      if (slot == kNoEndpoint) {
        slot = id;
        return;
      }
      if (eps_[static_cast<std::size_t>(slot)].send == e.send)
        throw SimulationError(
            fmt::format("rank {} op {}: {} duplicates an earlier op on the same tensor", e.rank,
                        e.pos, p_.op_text(e.rank, op)));
      other = slot;
      slot = kNoEndpoint;
    } else {
      Link& l = links_[static_cast<std::size_t>(e.link)];
      auto& mine = e.send ? l.sends : l.recvs;
      auto& theirs = e.send ? l.recvs : l.sends;
      if (theirs.empty()) {
        mine.push_back(id);
        return;
      }
      other = theirs.front();
      theirs.pop_front();
    }
    const std::int32_t send_id = e.send ? id : other, recv_id = e.send ? other : id;
    match(send_id, recv_id, t);
  }

  void match(std::int32_t send_id, std::int32_t recv_id, double t) {
    Endpoint& s = eps_[static_cast<std::size_t>(send_id)];
    Endpoint& r = eps_[static_cast<std::size_t>(recv_id)];
    s.partner = recv_id;
    r.partner = send_id;
    if (o_.network.matching == Matching::fifo) {
      const Op& so = op_at(s.rank, static_cast<std::size_t>(s.pos));
      const Op& ro = op_at(r.rank, static_cast<std::size_t>(r.pos));
      if (!(sem_.tensor_of(so) == sem_.tensor_of(ro)))
        error("message_order_mismatch", r.rank, r.pos, t,
              fmt::format(
                  "receives the message of {} on rank {}: under fifo matching (NCCL) the wrong "
                  "tensor would be delivered silently",
                  p_.op_text(s.rank, so), s.rank));
    }
    // Bytes are counted once per transfer, here where both ends are known.
    const std::int64_t bytes = o_.network.boundary_bytes;
    ranks_[static_cast<std::size_t>(s.rank)].sent += bytes;
    ranks_[static_cast<std::size_t>(r.rank)].recv += bytes;
    comm_bytes_ += bytes;
    if (!s.eager) {
      make_ready(send_id, t);
      return;
    }
    if (s.at == kNever) return;  // an eager send posted this instant: its start is not yet known
    // An eager message that already left: the receive is done when it has arrived.
    r.at = s.at;
    transferred(s, r);
    wake_if_waiting(recv_id, t);
  }

  // Transfers that become ready at one instant take their links once the instant is over, in the
  // order their senders posted them (DESIGN.md's tie rule): endpoint ids follow each rank's post
  // order, and a link has one sender.
  void make_ready(std::int32_t send_id, double t) {
    ready_time_ = t;
    ready_.push_back(send_id);
  }
  void start_ready() {
    std::sort(ready_.begin(), ready_.end());
    for (const std::int32_t id : ready_) {
      Endpoint& s = eps_[static_cast<std::size_t>(id)];
      start_transfer(id, ready_time_);
      if (!s.eager && s.frees_when_sent && s.buffer_live) release_when_sent(s, id);
      if (s.partner != kNoEndpoint) {
        Endpoint& r = eps_[static_cast<std::size_t>(s.partner)];
        r.at = s.at;
        transferred(s, r);
      }
    }
    // Ranks blocked on these transfers resume when they complete.
    for (const std::int32_t id : ready_) {
      const Endpoint& s = eps_[static_cast<std::size_t>(id)];
      wake_if_waiting(id, ready_time_);
      if (s.partner != kNoEndpoint) wake_if_waiting(s.partner, ready_time_);
    }
    ready_.clear();
  }
  void transferred(const Endpoint& s, const Endpoint& r) {
    if (obs_)
      obs_->on_transfer({s.rank, s.pos, r.rank, r.pos, s.at - xfer_time_, s.at,
                         o_.network.boundary_bytes});
  }

  void start_transfer(std::int32_t send_id, double t) {
    Endpoint& s = eps_[static_cast<std::size_t>(send_id)];
    Link& l = links_[static_cast<std::size_t>(s.link)];
    s.at = std::max(t, l.free_at) + xfer_time_;
    l.free_at = s.at;
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
      ready = wait_time(e.rank, op_at(e.rank, rs.pc));
    if (ready == kNever) return;
    rs.block = Block::waking;
    wake(e.rank, std::max(ready, now));
  }

  // ---- the end -----------------------------------------------------------------------------
  SimResult finish() {
    SimResult res;
    res.per_rank.resize(static_cast<std::size_t>(R_));
    bool stuck = false;
    std::vector<int> chunks(static_cast<std::size_t>(R_), 0);
    for (const auto& pl : p_.placement()) ++chunks[static_cast<std::size_t>(pl.rank)];
    for (int r = 0; r < R_; ++r) {
      RankState& rs = ranks_[static_cast<std::size_t>(r)];
      flush_releases(rs, kNever);
      const bool finished = rs.block == Block::done;
      if (!finished) {
        stuck = true;
        rs.end = rs.block == Block::none ? rs.end : rs.blocked_since;
      }
      if (rs.start < 0) rs.start = 0;
      const std::int64_t fixed = o_.memory.static_bytes * chunks[static_cast<std::size_t>(r)];
      record::RankMetrics& m = res.per_rank[static_cast<std::size_t>(r)];
      m.rank = r;
      m.start = rs.start;
      m.end = rs.end;
      m.busy = rs.busy;
      m.comm_exposed = rs.exposed;
      m.peak_inflight = rs.peak_inflight;
      m.peak_memory_bytes = rs.peak_memory + fixed;
      m.sent_bytes = rs.sent;
      m.recv_bytes = rs.recv;
      m.ops_done = rs.pc;
      if (obs_)
        obs_->on_rank_end(r, {rs.start, rs.end, finished,
                              finished ? -1 : static_cast<int>(rs.pc), fixed});
    }
    res.summarize();
    res.comm_bytes = comm_bytes_;
    if (stuck) res.deadlock = analyze_deadlock();
    res.errors = std::move(errors_);
    if (obs_) obs_->on_end();
    return res;
  }

  record::Deadlock analyze_deadlock() const {
    std::vector<WaitEdge> edges;
    std::vector<bool> finished(static_cast<std::size_t>(R_));
    for (int r = 0; r < R_; ++r) {
      const RankState& rs = ranks_[static_cast<std::size_t>(r)];
      finished[static_cast<std::size_t>(r)] = rs.block == Block::done;
      if (rs.block != Block::endpoint && rs.block != Block::wait) continue;
      const Op& op = op_at(r, rs.pc);
      const std::string text = p_.op_text(r, op);
      if (rs.block == Block::endpoint) {
        edges.push_back({r, static_cast<int>(rs.pc), text, sem_.peer_of(op), ""});
        continue;
      }
      for (std::int32_t request : p_.wait_ids(r, op)) {
        const Endpoint& e = eps_[static_cast<std::size_t>(request_endpoint(r, request))];
        if (done_time(e) != kNever) continue;
        const Op& pending = op_at(r, static_cast<std::size_t>(e.pos));
        edges.push_back(
            {r, static_cast<int>(rs.pc), text, sem_.peer_of(pending), p_.op_text(r, pending)});
      }
    }
    return find_deadlock(R_, edges, finished);
  }

  const Program& p_;
  schedules::Semantics sem_;
  const SimOptions& o_;
  Observer* obs_;
  int S_, M_, R_;
  double xfer_time_ = 0;
  bool eager_ = false;
  std::int64_t comm_bytes_ = 0;
  EventQueue queue_;
  std::vector<RankState> ranks_;
  std::vector<Op> ops_;  // all ranks' ops, contiguous
  std::vector<Endpoint> eps_;
  std::vector<std::int32_t> ready_;  // sends whose transfers became ready at ready_time_
  double ready_time_ = 0;
  std::vector<Link> links_;
  std::unordered_map<long long, int> link_ids_;
  std::vector<std::int32_t> slot_;     // tag matching: endpoint posted first for each tensor
  std::vector<std::int32_t> recv_ep_;  // tensor -> receiving endpoint
  std::vector<std::int32_t>
      send_f_ep_;  // forward tensor -> sending endpoint (its buffer lives until B)
  std::vector<std::uint16_t> inflight_;  // (rank, mb) -> live stashes
  std::vector<Diagnostic> errors_;
};

}  // namespace

SimResult simulate(const Program& program, const SimOptions& options, Observer* observer) {
  return Engine(program, options, observer).run();
}

}  // namespace ppsim::sim
