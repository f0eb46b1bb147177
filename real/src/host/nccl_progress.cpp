// comm.semantics "nccl" on the host network (network.hpp; docs/SEMANTICS.md): each op is (part of)
// a kernel on a p2p stream of its rank, and a kernel runs once the one before it on its stream has
// completed. A transfer is ready when both its ops run (rendezvous) or, for a send whose receive
// does not run, when the message fits in the pair's buffer; a request completes with its op, and
// a wait returns once the kernels of its requests have completed. Matching is in fifo order (NCCL
// has no tags) and there is no eager protocol: the pair's buffer is comm.nccl_buffer_bytes.
// What became possible runs through a worklist: with no modelled time, one completion may start
// the next kernel, whose transfer ends at once, and so on, without recursion.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "network.hpp"
#include "ppsim/schedules/p2p_streams.hpp"

namespace ppsim::real::host {

namespace {

using schedules::Op;

struct Kernel;
struct NcclMessage;

// One op, what it sends or receives, and the kernel it runs in.
struct NcclOp {
  RequestPtr request;
  std::shared_ptr<NcclMessage> message;  // a send's from its post, a receive's once matched
  Kernel* kernel = nullptr;              // none while its group is open
  bool running = false, done = false;
};

// Ops launched together on one stream; it runs when it is the head of its stream.
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

struct NcclMessage : Message {
  NcclOp* send_op = nullptr;
  NcclOp* recv_op = nullptr;
  bool queued = false;       // its transfer became ready (or is in the worklist)
  bool buffered = false;     // it went without its receive, into the pair's buffer
  bool wants_space = false;  // its send runs and waits for the buffer (in PairBuffer::want_space)
  bool started = false;      // its transfer took the link
};
using NcclMessagePtr = std::shared_ptr<NcclMessage>;

// A directed pair's buffer: bytes sent into it and not yet received, running sends waiting for
// room.
struct PairBuffer {
  std::int64_t used = 0;
  std::deque<NcclMessagePtr> want_space;
};

class NcclProgress final : public Network {
 public:
  ~NcclProgress() override { stop_network(); }

  // Matched in fifo order at once; enqueued as a kernel of its own, or with its group at the
  // outermost GROUP_END.
  RequestPtr post(int rank, int pos, const Op& op, std::shared_ptr<Buffer> buffer) override {
    auto req = new_request(*ctx_, rank, pos, op, std::move(buffer));
    const int peer = ctx_->semantics.peer_of(op);
    const std::size_t link = req->send ? link_index(rank, peer) : link_index(peer, rank);
    std::lock_guard lock(mu_);
    NcclOp* o = &ops_.emplace_back();
    o->request = req;
    op_of_[req.get()] = o;
    if (req->send) {
      auto m = std::make_shared<NcclMessage>();
      m->send = req;
      m->send_op = o;
      m->link = link;
      o->message = m;
      if (match_send(m)) {
        m->recv_op = op_of_.at(m->recv.get());
        m->recv_op->message = m;
      }
    } else if (MessagePtr m = match_recv(link, req)) {
      o->message = std::static_pointer_cast<NcclMessage>(m);
      o->message->recv_op = o;
    }
    Group& g = groups_[static_cast<std::size_t>(rank)];
    if (g.depth > 0) {
      g.ops.push_back(op);
      g.members.push_back(o);
      return req;
    }
    launch(rank, std::span<const Op>(&op, 1), std::span<NcclOp* const>(&o, 1));
    return req;
  }

  void group_start(int rank) override {
    std::lock_guard lock(mu_);
    ++groups_[static_cast<std::size_t>(rank)].depth;
  }

  void group_end(int rank) override {
    std::lock_guard lock(mu_);
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
  struct Group {  // a rank's open group
    int depth = 0;
    std::vector<Op> ops;  // posted inside it, in order
    std::vector<NcclOp*> members;
  };
  struct Work {  // a kernel to run, or a message whose transfer is ready
    Kernel* kernel;
    NcclMessagePtr message;
  };

  void configure(const TransportContext& c) override {
    fifo_ = true;
    message_bytes_ = c.network.boundary_bytes;
    buffer_bytes_ = c.network.nccl_buffer_bytes;
    p2p_.emplace(c.semantics, model::stream_options(c.network));
    groups_.assign(static_cast<std::size_t>(R_), {});
  }

  void clear() override {
    work_.clear();
    streams_.clear();
    op_of_.clear();
    kernels_.clear();
    ops_.clear();
    buffers_.clear();
    for (auto& g : groups_) g = {};
  }

  // A WAIT blocks until its kernels' ops complete, as a CUDA event after the kernel does.
  bool satisfied(const Request& r) const override {
    if (!r.complete.load(std::memory_order_relaxed)) return false;
    const auto it = op_of_.find(&r);
    return it == op_of_.end() || it->second->kernel->left == 0;
  }

  void started(Message& m, double /*ends*/) override {
    auto& nm = static_cast<NcclMessage&>(m);
    nm.started = true;
    if (nm.send_op->kernel->left == 1) announce_end(*nm.send_op->kernel);
  }

  void settle() override { drain(); }

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

  // Runs what became possible, in order, until nothing more is.
  void drain() {
    while (!work_.empty()) {
      Work w = std::move(work_.front());
      work_.pop_front();
      if (w.kernel != nullptr)
        run_kernel(*w.kernel);
      else
        make_ready(w.message);
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
    NcclMessage& m = *o.message;
    if (o.done || m.queued || m.wants_space) return;
    PairBuffer& b = buffers_[m.link];
    if (m.recv_op != nullptr && m.recv_op->running) {
      transfer(o.message);
    } else if (b.want_space.empty() && fits(b)) {
      take_space(b, o.message);
    } else {
      m.wants_space = true;
      b.want_space.push_back(o.message);
    }
  }

  void run_recv(NcclOp& o) {
    if (o.done || !o.message) return;  // (its send is not posted yet: it matches then)
    NcclMessage& m = *o.message;
    if (m.buffered) {
      if (m.arrived) deliver_buffered(m);  // else when it arrives
      return;
    }
    if (m.queued || !m.send_op->running) return;
    if (m.wants_space) {  // no room was needed after all: rendezvous
      auto& w = buffers_[m.link].want_space;
      w.erase(std::find(w.begin(), w.end(), o.message));
      m.wants_space = false;
    }
    transfer(o.message);
  }

  bool fits(const PairBuffer& b) const { return message_bytes_ <= buffer_bytes_ - b.used; }
  void take_space(PairBuffer& b, const NcclMessagePtr& m) {
    b.used += message_bytes_;
    m->buffered = true;
    transfer(m);
  }
  void transfer(const NcclMessagePtr& m) {
    m->queued = true;
    work_.push_back({nullptr, m});
  }

  // The transfer ended: a rendezvous completes both ops; a buffered message completes its send
  // and waits in the buffer for its receive to run.
  void arrived(Message& msg) override {
    auto& m = static_cast<NcclMessage&>(msg);
    if (m.buffered)
      read_send(m, [&](std::span<const std::byte> b) { m.bytes.assign(b.begin(), b.end()); });
    else
      read_send(m, [&](std::span<const std::byte> b) { m.recv->buffer->copy_from(b); });
    op_done(*m.send_op, m);
    if (!m.buffered)
      op_done(*m.recv_op, m);
    else if (m.recv_op != nullptr && m.recv_op->running)
      deliver_buffered(m);
  }

  // A running receive takes its message out of the buffer; the room it frees may let waiting
  // sends on the pair go.
  void deliver_buffered(NcclMessage& m) {
    if (m.error.empty()) m.recv->buffer->copy_from(m.bytes);
    m.bytes = {};
    PairBuffer& b = buffers_[m.link];
    b.used -= message_bytes_;
    while (!b.want_space.empty() && fits(b)) {
      NcclMessagePtr w = std::move(b.want_space.front());
      b.want_space.pop_front();
      w->wants_space = false;
      take_space(b, w);
    }
    op_done(*m.recv_op, m);
  }

  void op_done(NcclOp& o, const Message& m) {
    o.done = true;
    complete(o.request, m);
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

  std::int64_t message_bytes_ = 0, buffer_bytes_ = 0;
  std::optional<schedules::P2pStreams> p2p_;
  // The run's ops and kernels (stable addresses), streams by stream_key, pair buffers by link,
  // open groups, and what is to run.
  std::deque<NcclOp> ops_;
  std::deque<Kernel> kernels_;
  std::unordered_map<const Request*, NcclOp*> op_of_;
  std::unordered_map<std::size_t, Stream> streams_;
  std::unordered_map<std::size_t, PairBuffer> buffers_;
  std::vector<Group> groups_;
  std::deque<Work> work_;
};

}  // namespace

std::unique_ptr<Network> make_nccl_progress() {
  return std::make_unique<NcclProgress>();
}

}  // namespace ppsim::real::host
