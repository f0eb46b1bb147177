// `host`: ranks are threads of this process. A send and its receive meet by tag (the tensor) or in
// fifo order per directed link; a transfer starts once both are posted and its link is free, takes
// the modelled latency + bytes / bandwidth of wall clock, then copies the bytes and completes both
// requests. Eager sends complete when posted; their message travels at once and waits at the
// receiver. One transfer at a time per directed link, in the order they became ready.
#include <fmt/format.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <queue>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ppsim/real/transport.hpp"

namespace ppsim::real::transports {

namespace {

using schedules::Op;

// One message: a send and, once matched, its receive.
struct Message {
  RequestPtr send, recv;
  bool eager = false;            // its bytes were copied out when the send was posted
  bool arrived = false;          // its transfer has ended
  double ready = 0;              // both sides posted (eager: the send), seconds on the run clock
  double start = 0, end = 0;     // the transfer
  std::vector<std::byte> bytes;  // an eager message's bytes
  std::string error;             // the send's storage was gone when the transfer read it
};
using MessagePtr = std::shared_ptr<Message>;

struct Link {
  std::deque<MessagePtr> ready;  // waiting for the link, in the order they became ready
  bool busy = false;
  double free_at = 0;  // seconds: when the transfer under way ends
  // fifo matching: posted and not yet matched, in post order
  std::deque<MessagePtr> sends;
  std::deque<RequestPtr> recvs;
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
    fifo_ = c.network.matching == config::Matching::fifo;
    eager_ = c.network.eager_limit > 0 && c.network.boundary_bytes <= c.network.eager_limit;
    const double units = c.network.latency +
                         (c.network.bandwidth > 0
                              ? static_cast<double>(c.network.boundary_bytes) / c.network.bandwidth
                              : 0.0);
    xfer_seconds_ = units * c.time_scale;
    links_.clear();
    tag_slot_.clear();
    waiting_.assign(static_cast<std::size_t>(R_), nullptr);
    cvs_ = std::vector<std::condition_variable>(static_cast<std::size_t>(R_));
    pending_ = {};
    seq_ = 0;
    aborted_ = false;
    closing_ = false;
    if (xfer_seconds_ > 0) network_ = std::thread([this] { network_loop(); });
  }

  RequestPtr post(int rank, int pos, const Op& op, std::shared_ptr<Buffer> buffer) override {
    const auto& sem = ctx_->semantics;
    auto req = std::make_shared<Request>();
    req->rank = rank;
    req->pos = pos;
    req->op = op;
    req->send = schedules::is_send(op.kind);
    req->buffer = std::move(buffer);
    const int peer = sem.peer_of(op);
    if (peer < 0 || peer == rank)
      throw HazardError("bad_comm", rank, pos,
                        fmt::format("rank {} op {}: {} has no peer on another rank", rank, pos,
                                    ctx_->program.op_text(rank, op)));
    const std::size_t link = req->send ? link_index(rank, peer) : link_index(peer, rank);
    std::lock_guard lock(mu_);
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
    auto done = [&] {
      for (const auto& r : requests)
        if (!r->complete.load(std::memory_order_relaxed)) return false;
      return true;
    };
    waiting_[static_cast<std::size_t>(rank)] = &requests;
    cvs_[static_cast<std::size_t>(rank)].wait(lock, [&] { return aborted_ || done(); });
    waiting_[static_cast<std::size_t>(rank)] = nullptr;
    return done();
  }

  bool quiescent() const override {
    std::lock_guard lock(mu_);
    if (!pending_.empty()) return false;
    for (const auto& [id, l] : links_)
      if (l.busy || !l.ready.empty()) return false;
    // A rank whose wait is satisfied but has not woken yet is about to move.
    for (const auto* w : waiting_) {
      if (w == nullptr) continue;
      bool all = true;
      for (const auto& r : *w) all = all && r->complete.load(std::memory_order_relaxed);
      if (all) return false;
    }
    return true;
  }

  std::size_t stuck_waiters() const override {
    std::lock_guard lock(mu_);
    std::size_t n = 0;
    for (const auto* w : waiting_) {
      if (w == nullptr) continue;
      for (const auto& r : *w)
        if (!r->complete.load(std::memory_order_relaxed)) {
          ++n;
          break;
        }
    }
    return n;
  }

  void abort() override {
    std::lock_guard lock(mu_);
    aborted_ = true;
    for (auto& cv : cvs_) cv.notify_all();
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
  }

 private:
  double now() const { return ctx_->clock.now(); }
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
  std::size_t tag_of(const Request& r) const {
    const auto& sem = ctx_->semantics;
    return sem.tensor_index(sem.tensor_of(r.op));
  }
  [[noreturn]] void duplicate(const Request& r) const {
    throw HazardError("duplicate_comm", r.rank, r.pos,
                      fmt::format("rank {} op {}: {} duplicates an earlier op on the same tensor",
                                  r.rank, r.pos, ctx_->program.op_text(r.rank, r.op)));
  }
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
    m->send->ends_at.store(l.free_at, std::memory_order_relaxed);
    pending_.push({l.free_at, seq_++, link, m});
    network_cv_.notify_one();
  }
  // The transfer ended at `t`: the data is at the receiver (if it is posted).
  void finish(Message& m, double t) {
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
    const Request& s = *m.send;
    m.error = fmt::format("the transfer of {} reads storage already released by {}",
                          ctx_->program.op_text(s.rank, s.op), b.released_by());
  }
  void complete(const RequestPtr& r) {
    r->complete.store(true, std::memory_order_release);
    cvs_[static_cast<std::size_t>(r->rank)].notify_all();
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

  struct TagSlot {
    MessagePtr send;
    RequestPtr recv;
  };

  std::optional<TransportContext> ctx_;
  int R_ = 0;
  bool fifo_ = false, eager_ = false;
  double xfer_seconds_ = 0;
  mutable std::mutex mu_;
  std::unordered_map<std::size_t, Link> links_;
  std::unordered_map<std::size_t, TagSlot> tag_slot_;
  std::vector<const std::span<const RequestPtr>*> waiting_;
  std::vector<std::condition_variable> cvs_;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> pending_;
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
