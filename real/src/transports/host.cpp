// `host`: ranks are threads of this process. A send and its receive meet by tag (the tensor) or in
// fifo order per directed link; a transfer starts once both are posted and its link is free, takes
// the modelled latency + bytes / bandwidth of wall clock, then copies the bytes and completes both
// requests. Eager sends complete when posted; their message travels at once and waits at the
// receiver. One transfer at a time per directed link, in the order they became ready.
//
// Under comm.semantics "nccl" (docs/SEMANTICS.md) the same links carry NCCL's model: each op is
// (part of) a kernel on a p2p stream of its rank, a kernel runs once the one before it on its
// stream has completed, a transfer starts when both ops run (or, for a send whose receive does
// not run, when the message fits in the pair's buffer); a request completes with its op, and a
// wait returns once the kernels of its requests have completed.
// Everything is decided under the mutex as events happen, through a worklist: with no modelled
// time, one completion may start the next kernel, whose transfer ends at once, and so on.
#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <queue>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ppsim/real/transport.hpp"
#include "ppsim/real/waiters.hpp"
#include "ppsim/schedules/p2p_streams.hpp"

namespace ppsim::real::transports {

namespace {

using schedules::Op;

struct Message;
using MessagePtr = std::shared_ptr<Message>;
struct Kernel;

// nccl: one op, what it sends or receives, and the kernel it runs in.
struct NcclOp {
  RequestPtr request;
  MessagePtr message;        // a send's from its post, a receive's once matched
  Kernel* kernel = nullptr;  // none while its group is open
  bool running = false, done = false;
};

// nccl: ops launched together on one stream; it runs when it is the head of its stream.
struct Kernel {
  int rank = 0, stream = 0;
  std::vector<NcclOp*> ops;  // in issue order
  std::size_t left = 0;      // ops not done
  bool running = false;
  Kernel* next = nullptr;  // the kernel enqueued after it on its stream
};

struct Stream {
  Kernel* head = nullptr;  // running (or about to run: in the worklist)
  Kernel* tail = nullptr;
};

// One message: a send and, once matched, its receive.
struct Message {
  RequestPtr send, recv;
  bool eager = false;            // its bytes were copied out when the send was posted
  bool arrived = false;          // its transfer has ended
  double ready = 0;              // both sides posted (eager: the send), seconds on the run clock
  double start = 0, end = 0;     // the transfer
  std::vector<std::byte> bytes;  // an eager message's bytes
  std::string error;             // the send's storage was gone when the transfer read it
  // nccl
  NcclOp* send_op = nullptr;
  NcclOp* recv_op = nullptr;
  std::size_t link = 0;
  bool queued = false;       // its transfer became ready (or is in the worklist)
  bool buffered = false;     // it went without its receive, into the pair's buffer
  bool wants_space = false;  // its send runs and waits for the buffer (in Link::want_space)
  bool started = false;      // its transfer took the link
};

struct Link {
  std::deque<MessagePtr> ready;  // waiting for the link, in the order they became ready
  bool busy = false;
  double free_at = 0;  // seconds: when the transfer under way ends
  // fifo matching: posted and not yet matched, in post order
  std::deque<MessagePtr> sends;
  std::deque<RequestPtr> recvs;
  // nccl: bytes sent into the pair's buffer and not yet received; running sends waiting for room
  std::int64_t buffered = 0;
  std::deque<MessagePtr> want_space;
};

struct Pending {
  double end;  // seconds
  std::uint64_t seq;
  std::size_t link;
  MessagePtr message;
  bool operator>(const Pending& o) const { return end != o.end ? end > o.end : seq > o.seq; }
};

class HostTransport final : public Transport {
 public:
  ~HostTransport() override { stop_network(); }

  void begin(const TransportContext& c) override {
    stop_network();
    ctx_.emplace(c);
    R_ = c.program.ranks();
    nccl_ = c.network.semantics == model::P2pSemantics::nccl;
    // NCCL has no tags and no eager protocol: its buffer is nccl_buffer_bytes.
    fifo_ = nccl_ || c.network.matching == model::Matching::fifo;
    eager_ =
        !nccl_ && c.network.eager_limit > 0 && c.network.boundary_bytes <= c.network.eager_limit;
    message_bytes_ = c.network.boundary_bytes;
    buffer_bytes_ = c.network.nccl_buffer_bytes;
    p2p_.emplace(c.semantics, model::stream_options(c.network));
    const double units = c.network.latency +
                         (c.network.bandwidth > 0
                              ? static_cast<double>(c.network.boundary_bytes) / c.network.bandwidth
                              : 0.0);
    xfer_seconds_ = units * c.time_scale;
    links_.clear();
    tag_slot_.clear();
    waiters_.reset(R_);
    pending_ = {};
    clear_nccl();
    groups_.assign(static_cast<std::size_t>(R_), {});
    seq_ = 0;
    aborted_ = false;
    closing_ = false;
    if (xfer_seconds_ > 0) network_ = std::thread([this] { network_loop(); });
  }

  RequestPtr post(int rank, int pos, const Op& op, std::shared_ptr<Buffer> buffer) override {
    const auto& sem = ctx_->semantics;
    auto req = new_request(*ctx_, rank, pos, op, std::move(buffer));
    const int peer = sem.peer_of(op);
    const std::size_t link = req->send ? link_index(rank, peer) : link_index(peer, rank);
    std::lock_guard lock(mu_);
    if (nccl_) {
      post_nccl(rank, op, req, link);
      return req;
    }
    if (req->send) {
      auto m = std::make_shared<Message>();
      m->send = req;
      if (eager_) {
        // The bytes leave now: the send is done, and its message travels whether or not the
        // receive is posted.
        m->eager = true;
        read_send(*m, [&](std::span<const std::byte> b) { m->bytes.assign(b.begin(), b.end()); });
        req->error = m->error;
        complete(req);
        match_send(link, m);
        make_ready(link, m);
      } else if (match_send(link, m)) {
        make_ready(link, m);
      }
    } else if (MessagePtr m = match_recv(link, req)) {
      if (!m->eager)
        make_ready(link, m);
      else if (m->arrived)  // an eager message waiting here
        deliver(*m);
    }
    return req;
  }

  bool wait(int rank, std::span<const RequestPtr> requests) override {
    std::unique_lock lock(mu_);
    return waiters_.wait(
        lock, rank, requests, [&] { return aborted_; },
        [&](const Request& r) { return satisfied(r); });
  }

  bool quiescent() const override {
    std::lock_guard lock(mu_);
    if (!pending_.empty() || !work_.empty()) return false;
    for (const auto& [id, l] : links_)
      if (l.busy || !l.ready.empty()) return false;
    return !waiters_.any_about_to_move([&](const Request& r) { return satisfied(r); });
  }

  std::size_t stuck_waiters() const override {
    std::lock_guard lock(mu_);
    return waiters_.stuck([&](const Request& r) { return satisfied(r); });
  }

  void abort() override {
    std::lock_guard lock(mu_);
    aborted_ = true;
    waiters_.wake_all();
    network_cv_.notify_all();
  }

  void end() override {
    stop_network();
    // Messages still held (unmatched, or queued when the run stopped) let go of their buffers
    // now, while the ranks that own them still exist.
    std::lock_guard lock(mu_);
    links_.clear();
    tag_slot_.clear();
    pending_ = {};
    clear_nccl();
  }

  void group_start(int rank) override {
    std::lock_guard lock(mu_);
    if (nccl_) ++groups_[static_cast<std::size_t>(rank)].depth;
  }

  void group_end(int rank) override {
    std::lock_guard lock(mu_);
    if (!nccl_) return;
    Group& g = groups_[static_cast<std::size_t>(rank)];
    // (An unbalanced GROUP_END is refused by validation; the outermost one launches.)
    if (g.depth == 0 || --g.depth > 0) return;
    const std::vector<Op> ops = std::move(g.ops);
    const std::vector<NcclOp*> members = std::move(g.members);
    g.ops.clear();
    g.members.clear();
    launch(rank, ops, members);
  }

  std::vector<RequestPtr> blockers(const Request& r) const override {
    std::lock_guard lock(mu_);
    std::vector<RequestPtr> out;
    if (!nccl_) return out;
    const auto it = op_of_.find(&r);
    if (it == op_of_.end() || it->second->kernel == nullptr) return out;
    const Kernel& k = *it->second->kernel;
    if (r.complete.load(std::memory_order_relaxed)) {
      // Done, but its kernel is not: the ops of the kernel still running.
      for (const NcclOp* o : k.ops)
        if (!o->done) out.push_back(o->request);
      return out;
    }
    if (k.running) return out;
    const auto s = streams_.find(stream_key(k.rank, k.stream));
    if (s == streams_.end() || s->second.head == nullptr) return out;
    for (const NcclOp* o : s->second.head->ops)
      if (!o->done) out.push_back(o->request);
    return out;
  }

 private:
  double now() const { return ctx_->clock.now(); }
  // What wait() waits for: the request, and under nccl its kernel too (a WAIT blocks until its
  // kernels' ops complete, as a CUDA event after the kernel does).
  bool satisfied(const Request& r) const {
    if (!r.complete.load(std::memory_order_relaxed)) return false;
    if (!nccl_) return true;
    const auto it = op_of_.find(&r);
    return it == op_of_.end() || it->second->kernel->left == 0;
  }
  std::size_t link_index(int src, int dst) const {
    return static_cast<std::size_t>(src) * static_cast<std::size_t>(R_) +
           static_cast<std::size_t>(dst);
  }

  // A send is posted: true when it met its receive (or, eager, whether or not it did).
  bool match_send(std::size_t link, const MessagePtr& m) {
    Link& l = links_[link];
    if (fifo_) {
      if (l.recvs.empty()) {
        l.sends.push_back(m);
        return false;
      }
      m->recv = l.recvs.front();
      l.recvs.pop_front();
      record_match(*m);
      return true;
    }
    auto& slot = tag_slot_[tag_of(*m->send)];
    if (!slot.recv) {
      if (slot.send) duplicate(*m->send);
      slot.send = m;
      return false;
    }
    m->recv = std::move(slot.recv);
    slot = {};
    record_match(*m);
    return true;
  }
  // A receive is posted: the message it meets, if its send is there.
  MessagePtr match_recv(std::size_t link, const RequestPtr& req) {
    Link& l = links_[link];
    if (fifo_) {
      if (l.sends.empty()) {
        l.recvs.push_back(req);
        return nullptr;
      }
      MessagePtr m = l.sends.front();
      l.sends.pop_front();
      m->recv = req;
      record_match(*m);
      return m;
    }
    auto& slot = tag_slot_[tag_of(*req)];
    if (!slot.send) {
      if (slot.recv) duplicate(*req);
      slot.recv = req;
      return nullptr;
    }
    MessagePtr m = std::move(slot.send);
    slot = {};
    m->recv = req;
    record_match(*m);
    return m;
  }
  std::size_t tag_of(const Request& r) const { return real::tag_of(*ctx_, r); }
  [[noreturn]] void duplicate(const Request& r) const { throw_duplicate(*ctx_, r); }
  static void record_match(Message& m) {
    m.send->peer_rank = m.recv->rank;
    m.send->peer_pos = m.recv->pos;
    m.recv->peer_rank = m.send->rank;
    m.recv->peer_pos = m.send->pos;
  }

  // Both sides are posted (or an eager send left): the transfer takes its link when it is free.
  void make_ready(std::size_t link, const MessagePtr& m) {
    Link& l = links_[link];
    m->ready = now();
    if (l.busy || !l.ready.empty()) {
      l.ready.push_back(m);
      return;
    }
    start(link, m, m->ready);
  }
  void start(std::size_t link, const MessagePtr& m, double t) {
    m->start = t;
    if (xfer_seconds_ <= 0) {  // no modelled time: done at once, the link is free again
      finish(*m, t);
      return;
    }
    Link& l = links_[link];
    l.busy = true;
    l.free_at = t + xfer_seconds_;
    if (!nccl_) {
      m->send->ends_at.store(l.free_at, std::memory_order_relaxed);
    } else {
      m->started = true;
      if (m->send_op->kernel->left == 1) announce_end(*m->send_op->kernel);
    }
    pending_.push({l.free_at, seq_++, link, m});
    network_cv_.notify_one();
  }
  // The transfer ended at `t`: the data is at the receiver (if it is posted).
  void finish(Message& m, double t) {
    if (nccl_) {
      finish_nccl(m, t);
      return;
    }
    m.end = t;
    m.arrived = true;
    if (!m.eager) {
      read_send(m, [&](std::span<const std::byte> b) { m.recv->buffer->copy_from(b); });
      m.send->transfer_start = m.start;
      m.send->transfer_end = m.end;
      m.send->error = m.error;
      complete(m.send);
    }
    if (m.recv) deliver(m);
  }
  // The receive completes with the message's bytes.
  void deliver(Message& m) {
    m.recv->transfer_start = m.start;
    m.recv->transfer_end = m.end;
    m.recv->error = m.error;
    if (m.eager && m.error.empty()) m.recv->buffer->copy_from(m.bytes);
    complete(m.recv);
  }
  // A transfer reads the send's storage: when it has been released that is caught and reported,
  // never a read of freed memory.
  template <typename Fn>
  void read_send(Message& m, Fn&& take) {
    const Buffer& b = *m.send->buffer;
    if (b.has_storage()) {
      take(b.data());
      return;
    }
    m.error = released_error(*ctx_, *m.send);
  }
  void complete(const RequestPtr& r) {
    r->complete.store(true, std::memory_order_release);
    waiters_.wake(r->rank);
  }

  // The network: ends transfers at their deadlines (sleeping until the next one, spinning the
  // last stretch) and starts the next transfer on each link freed.
  void network_loop() {
    precise_timers();
    std::unique_lock lock(mu_);
    while (!closing_) {
      if (aborted_ || pending_.empty()) {
        network_cv_.wait(lock);
        continue;
      }
      const Pending next = pending_.top();
      const auto deadline = ctx_->clock.at(next.end);
      const auto spin_from = deadline - std::chrono::microseconds(100);
      if (RunClock::Clock::now() < spin_from) {
        network_cv_.wait_until(lock, spin_from);
        continue;  // something may have changed
      }
      lock.unlock();
      sleep_until(deadline);
      lock.lock();
      if (closing_ || pending_.empty() || pending_.top().seq != next.seq) continue;
      pending_.pop();
      Link& l = links_[next.link];
      l.busy = false;
      finish(*next.message, next.end);
      if (!l.ready.empty()) {
        MessagePtr m = l.ready.front();
        l.ready.pop_front();
        // When the previous one ended (or it became ready), not when this thread got round to it.
        start(next.link, m, std::max(next.end, m->ready));
      }
      drain();
    }
  }
  void stop_network() {
    if (!network_.joinable()) return;
    {
      std::lock_guard lock(mu_);
      closing_ = true;
      network_cv_.notify_all();
    }
    network_.join();
  }

  // ---- nccl (docs/SEMANTICS.md) -------------------------------------------------------------

  // Matched in fifo order at once; enqueued as a kernel of its own, or with its group at the
  // outermost GROUP_END.
  void post_nccl(int rank, const Op& op, const RequestPtr& req, std::size_t link) {
    NcclOp* o = &nccl_ops_.emplace_back();
    o->request = req;
    op_of_[req.get()] = o;
    if (req->send) {
      auto m = std::make_shared<Message>();
      m->send = req;
      m->send_op = o;
      m->link = link;
      o->message = m;
      if (match_send(link, m)) {
        m->recv_op = op_of_.at(m->recv.get());
        m->recv_op->message = m;
      }
    } else if (MessagePtr m = match_recv(link, req)) {
      m->recv_op = o;
      o->message = m;
    }
    Group& g = groups_[static_cast<std::size_t>(rank)];
    if (g.depth > 0) {
      g.ops.push_back(op);
      g.members.push_back(o);
      return;
    }
    launch(rank, std::span<const Op>(&op, 1), std::span<NcclOp* const>(&o, 1));
  }

  // The ops a rank issues at one moment become kernels (P2pStreams decides how), each enqueued
  // on its stream; a kernel that is the head of its stream runs.
  void launch(int rank, std::span<const Op> ops, std::span<NcclOp* const> members) {
    p2p_->for_each_kernel(ops, [&](int stream, std::span<const std::uint32_t> idx) {
      Kernel& k = kernels_.emplace_back();
      k.rank = rank;
      k.stream = stream;
      for (const std::uint32_t i : idx) {
        k.ops.push_back(members[i]);
        members[i]->kernel = &k;
      }
      k.left = k.ops.size();
      Stream& s = streams_[stream_key(rank, stream)];
      if (s.tail != nullptr) {
        s.tail->next = &k;
      } else {
        s.head = &k;
        work_.push_back({&k, nullptr});
      }
      s.tail = &k;
    });
    drain();
  }

  // Runs what became possible, in order, until nothing more is: never recursion, so that a
  // chain of thousands of kernels completing at once stays flat.
  void drain() {
    while (!work_.empty()) {
      Work w = std::move(work_.front());
      work_.pop_front();
      if (w.kernel != nullptr)
        run_kernel(*w.kernel);
      else
        make_ready(w.message->link, w.message);
    }
  }

  void run_kernel(Kernel& k) {
    k.running = true;
    for (NcclOp* o : k.ops) o->running = true;
    for (NcclOp* o : k.ops) {
      if (o->request->send)
        run_send(*o);
      else
        run_recv(*o);
    }
  }

  // Rule 4 (its receive runs: rendezvous) or rule 5 (it fits in the pair's buffer), else it
  // waits, for its receive to run or for room.
  void run_send(NcclOp& o) {
    Message& m = *o.message;
    if (o.done || m.queued || m.wants_space) return;
    Link& l = links_[m.link];
    if (m.recv_op != nullptr && m.recv_op->running) {
      transfer(o.message);
    } else if (l.want_space.empty() && fits(l)) {
      take_space(l, o.message);
    } else {
      m.wants_space = true;
      l.want_space.push_back(o.message);
    }
  }

  void run_recv(NcclOp& o) {
    if (o.done || !o.message) return;  // (its send is not posted yet: it matches then)
    Message& m = *o.message;
    if (m.buffered) {
      if (m.arrived) deliver_buffered(m);  // else when it arrives
      return;
    }
    if (m.queued || !m.send_op->running) return;
    if (m.wants_space) {  // no room was needed after all: rendezvous
      auto& w = links_[m.link].want_space;
      w.erase(std::find(w.begin(), w.end(), o.message));
      m.wants_space = false;
    }
    transfer(o.message);
  }

  bool fits(const Link& l) const { return message_bytes_ <= buffer_bytes_ - l.buffered; }
  void take_space(Link& l, const MessagePtr& m) {
    l.buffered += message_bytes_;
    m->buffered = true;
    transfer(m);
  }
  void transfer(const MessagePtr& m) {
    m->queued = true;
    work_.push_back({nullptr, m});
  }

  // The transfer ended: a rendezvous completes both ops; a buffered message completes its send
  // and waits in the buffer for its receive to run.
  void finish_nccl(Message& m, double t) {
    m.end = t;
    m.arrived = true;
    if (m.buffered)
      read_send(m, [&](std::span<const std::byte> b) { m.bytes.assign(b.begin(), b.end()); });
    else
      read_send(m, [&](std::span<const std::byte> b) { m.recv->buffer->copy_from(b); });
    m.send->transfer_start = m.start;
    m.send->transfer_end = m.end;
    m.send->error = m.error;
    op_done(*m.send_op);
    if (!m.buffered) {
      m.recv->transfer_start = m.start;
      m.recv->transfer_end = m.end;
      m.recv->error = m.error;
      op_done(*m.recv_op);
    } else if (m.recv_op != nullptr && m.recv_op->running) {
      deliver_buffered(m);
    }
  }

  // A running receive takes its message out of the buffer; the room it frees may let waiting
  // sends on the pair go.
  void deliver_buffered(Message& m) {
    Request& r = *m.recv;
    r.transfer_start = m.start;
    r.transfer_end = m.end;
    r.error = m.error;
    if (m.error.empty()) r.buffer->copy_from(m.bytes);
    m.bytes = {};
    Link& l = links_[m.link];
    l.buffered -= message_bytes_;
    while (!l.want_space.empty() && fits(l)) {
      MessagePtr w = std::move(l.want_space.front());
      l.want_space.pop_front();
      w->wants_space = false;
      take_space(l, w);
    }
    op_done(*m.recv_op);
  }

  void op_done(NcclOp& o) {
    o.done = true;
    complete(o.request);
    Kernel& k = *o.kernel;
    if (--k.left == 0)
      kernel_done(k);
    else if (k.left == 1)
      announce_end(k);
  }

  // The rank's waits on its ops are over; the next kernel on the stream runs.
  void kernel_done(Kernel& k) {
    waiters_.wake(k.rank);
    Stream& s = streams_[stream_key(k.rank, k.stream)];
    s.head = k.next;
    if (s.head == nullptr)
      s.tail = nullptr;
    else
      work_.push_back({s.head, nullptr});
  }

  // A kernel whose one op left is a send under way completes when that transfer ends: its
  // request says so (the rank may wait for it before a memory change, reap()).
  void announce_end(Kernel& k) {
    for (NcclOp* o : k.ops)
      if (!o->done && o->request->send && o->message->started && !o->message->arrived)
        o->request->ends_at.store(o->message->start + xfer_seconds_, std::memory_order_relaxed);
  }

  std::size_t stream_key(int rank, int stream) const {
    return static_cast<std::size_t>(rank) * (static_cast<std::size_t>(R_) + 1) +
           static_cast<std::size_t>(stream + 1);
  }

  void clear_nccl() {
    work_.clear();
    streams_.clear();
    op_of_.clear();
    kernels_.clear();
    nccl_ops_.clear();
    for (auto& g : groups_) g = {};
  }

  struct TagSlot {
    MessagePtr send;
    RequestPtr recv;
  };
  struct Group {  // a rank's open group
    int depth = 0;
    std::vector<Op> ops;  // posted inside it, in order
    std::vector<NcclOp*> members;
  };
  struct Work {  // a kernel to run, or a message whose transfer is ready
    Kernel* kernel;
    MessagePtr message;
  };

  std::optional<TransportContext> ctx_;
  int R_ = 0;
  bool fifo_ = false, eager_ = false, nccl_ = false;
  std::int64_t message_bytes_ = 0, buffer_bytes_ = 0;
  std::optional<schedules::P2pStreams> p2p_;
  double xfer_seconds_ = 0;
  mutable std::mutex mu_;
  std::unordered_map<std::size_t, Link> links_;
  std::unordered_map<std::size_t, TagSlot> tag_slot_;
  Waiters waiters_;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> pending_;
  // nccl: ops and kernels of the run (stable addresses), streams by stream_key, open groups
  std::deque<NcclOp> nccl_ops_;
  std::deque<Kernel> kernels_;
  std::unordered_map<const Request*, NcclOp*> op_of_;
  std::unordered_map<std::size_t, Stream> streams_;
  std::vector<Group> groups_;
  std::deque<Work> work_;
  std::uint64_t seq_ = 0;
  bool aborted_ = false, closing_ = false;
  std::condition_variable network_cv_;
  std::thread network_;
};

}  // namespace

void register_host(TransportRegistry& registry) {
  registry.add({"host", "ranks are threads of this process; modelled latency and bandwidth",
                [] { return std::make_unique<HostTransport>(); }});
}

}  // namespace ppsim::real::transports
