// `cuda` transport: several ranks on one GPU, each rank a host thread with its own stream (and,
// where the driver has green contexts, its own share of the SMs: gpu_runtime.cpp). Matching and
// the blocking semantics are the host transport's (rendezvous or eager; tag or fifo matching; one
// transfer at a time per directed link): once both sides have posted (the host rendezvous), the
// transfer is a device-to-device copy on the link's stream, and its requests complete when the
// copy has completed. An eager send (comm.eager_limit) completes when posted and its copy goes at
// once, into a device buffer of the transport's that the receive takes over when it is posted. The
// copy waits for no event of the ranks' streams: a compute op returns when the GPU has finished it
// (cuda compute), so a send's data is there when it is posted, and each message has buffers of its
// own. A waiting rank spins (yielding) rather than sleeps: a woken thread runs tens of microseconds
// after the copy ended, which the issue gap would count. The payload stamped in the host buffers
// travels with it, so the receiver's checks (wrong message, released storage) hold. After each
// copy its stream raises the flags of its send and receive (stream_gates.hpp): a rank's next
// compute op, enqueued ahead behind them, starts then.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "gpu_runtime.hpp"
#include "host_signals.hpp"
#include "ppsim/config/error.hpp"
#include "ppsim/real/gpu/checks.hpp"
#include "ppsim/real/transport.hpp"
#include "ppsim/real/waiters.hpp"

namespace ppsim::real::gpu {

namespace {

using schedules::Op;

struct Side {
  RequestPtr req;
  void* device = nullptr;  // its device buffer (boundary bytes)
};

struct Message {
  Side send, recv;  // eager and not yet received: recv.req is null, recv.device the landing place
  bool has_recv = false;
  bool eager = false;    // the send completed when posted; its bytes are in `bytes`
  bool arrived = false;  // (eager) the copy has completed
  std::vector<std::byte> bytes;
  std::string error;  // (eager) the send's storage was released before it was posted
  double start = 0, end = 0;
  cudaEvent_t done = nullptr;  // where there are no host signals
  std::uint32_t seq = 0;       // its link's signal reaches it when the copy has completed
  std::size_t link = 0;
  // The flags its copy raises (rank, pos; rank -1: none), taken when the link is claimed.
  std::pair<int, int> raise_send{-1, 0}, raise_recv{-1, 0};
};
using MessagePtr = std::shared_ptr<Message>;

struct Link {
  std::deque<MessagePtr> ready;  // matched, waiting for the link
  MessagePtr busy;               // the copy under way
  std::deque<MessagePtr> sends;  // fifo: posted, not matched
  std::deque<Side> recvs;
  cudaStream_t stream = nullptr;
  std::uint32_t seq = 0;  // copies enqueued (progress thread)
};

class CudaTransport final : public Transport {
 public:
  ~CudaTransport() override {
    stop_progress();
    for (auto& [i, l] : links_)
      if (l.stream) (void)cudaStreamDestroy(l.stream);
    // cudaFree waits for the whole device: after a stall (a copy of this transport's or a compute
    // op that never ended) what it holds is left to the process's exit.
    if (device_stalled()) {
      (void)signals_.release();
      return;
    }
    for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
    for (void* b : buffers_) (void)cudaFree(b);
  }

  void begin(const TransportContext& c) override {
    stop_progress();
    ctx_.emplace(c);
    R_ = c.program.ranks();
    if (c.network.semantics == model::P2pSemantics::nccl)
      throw config::ConfigError(
          "", "comm.semantics",
          "the cuda backend has MPI's point-to-point semantics (\"mpi\"): every posted request "
          "progresses on its own; NCCL's (\"nccl\": kernels in stream order, groups) run on the "
          "host backend, or with one GPU per rank on nccl");
    eager_ = c.network.eager_limit > 0 && c.network.boundary_bytes <= c.network.eager_limit;
    GpuRuntime::instance().layout(R_, true);
    fifo_ = c.network.matching == model::Matching::fifo;
    const auto bytes =
        static_cast<std::size_t>(std::max<std::int64_t>(c.network.boundary_bytes, 1));
    CUDA_CHECK(cudaSetDevice(0));
    // One counter per directed link, and one more to try them out on.
    const auto links = static_cast<std::size_t>(R_ * R_);
    if (!signals_ || signals_->size() != links + 1) {
      if (device_stalled()) (void)signals_.release();  // (a stalled copy may still write them)
      signals_ = std::make_unique<HostSignals>(links + 1);
      for (auto& [i, l] : links_) l.seq = 0;  // new counters start at 0
      cudaStream_t probe = nullptr;
      CUDA_CHECK(cudaStreamCreateWithFlags(&probe, cudaStreamNonBlocking));
      signals_->probe(probe, links, 1);
      CUDA_CHECK(cudaStreamDestroy(probe));
    }
    if (bytes != bytes_) {  // the buffers of another message size go (end() left them idle)
      if (!device_stalled())
        for (void* b : buffers_) CUDA_CHECK(cudaFree(b));
      buffers_.clear();
      free_buffers_.clear();
      bytes_ = bytes;
    }
    if (!primed_) {
      // One copy now: whatever the runtime loads for a device-to-device copy at its first use is
      // loaded before the run (a load waits for the whole device: behind a hung op, it would
      // hang the progress thread).
      void* from = take_buffer();
      void* to = take_buffer();
      cudaStream_t s = nullptr;
      CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      CUDA_CHECK(cudaMemcpyAsync(to, from, bytes_, cudaMemcpyDeviceToDevice, s));
      CUDA_CHECK(cudaStreamSynchronize(s));
      CUDA_CHECK(cudaStreamDestroy(s));
      give_buffer(from);
      give_buffer(to);
      primed_ = true;
    }
    std::lock_guard lock(mu_);
    for (auto& [i, l] : links_) {
      l.ready.clear();
      l.busy = nullptr;
      l.sends.clear();
      l.recvs.clear();
    }
    tag_slot_.clear();
    // The flags of this run's transfers.
    gates_ = nullptr;
    std::vector<std::size_t> ops(static_cast<std::size_t>(R_));
    for (int r = 0; r < R_; ++r) ops[static_cast<std::size_t>(r)] = c.program.ops(r).size();
    if (StreamGates& g = GpuRuntime::instance().gates(); g.arm(ops, device_stalled())) gates_ = &g;
    waiters_.reset(R_);
    aborted_ = false;
    closing_ = false;
    startable_ = 0;
    transfers_ = 0;
    progress_ = std::thread([this] { progress_loop(); });
  }

  RequestPtr post(int rank, int pos, const Op& op, std::shared_ptr<Buffer> buffer) override {
    const auto& sem = ctx_->semantics;
    auto req = new_request(*ctx_, rank, pos, op, std::move(buffer));
    const int peer = sem.peer_of(op);
    Side side{req, take_buffer()};
    const std::size_t link = req->send ? link_index(rank, peer) : link_index(peer, rank);
    std::lock_guard lock(mu_);
    Link& l = links_[link];
    if (req->send) {
      auto m = std::make_shared<Message>();
      m->send = side;
      if (eager_) {
        // The payload leaves now: the send is done, and its copy goes whether or not the
        // receive is posted.
        m->eager = true;
        if (req->buffer->has_storage()) {
          const auto b = req->buffer->data();
          m->bytes.assign(b.begin(), b.end());
        } else {
          m->error = released_error(*req);
        }
        req->error = m->error;
        if (!match_send(l, m)) m->recv.device = take_buffer();
        make_ready(link, l, m);
        complete(*req);
      } else if (match_send(l, m)) {
        make_ready(link, l, m);
      }
    } else if (MessagePtr m = match_recv(l, side)) {
      if (!m->eager)
        make_ready(link, l, m);
      else if (m->arrived)  // an eager message waiting here
        deliver(*m);
    }
    return req;
  }

  bool wait(int rank, std::span<const RequestPtr> requests) override {
    auto done = [&] { return Waiters::all_done(requests, completed); };
    {
      std::lock_guard lock(mu_);
      waiters_.set_waiting(rank, &requests);
    }
    // Spins for a while (see the top of the file), then sleeps: a hang does not hold the cores.
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kSpinMs);
    while (!done() && !aborted_.load(std::memory_order_acquire)) {
      if (std::chrono::steady_clock::now() < until) {
        std::this_thread::yield();
        continue;
      }
      std::unique_lock lock(mu_);
      waiters_.cv(rank).wait(lock, [&] { return aborted_ || done(); });
      break;
    }
    std::lock_guard lock(mu_);
    waiters_.set_waiting(rank, nullptr);
    return done();
  }

  bool quiescent() const override {
    std::lock_guard lock(mu_);
    for (const auto& [i, l] : links_)
      if (l.busy || !l.ready.empty()) return false;
    return !waiters_.any_about_to_move(completed);
  }

  std::size_t stuck_waiters() const override {
    std::lock_guard lock(mu_);
    return waiters_.stuck(completed);
  }

  void abort() override {
    std::lock_guard lock(mu_);
    aborted_ = true;
    waiters_.wake_all();
  }

  void end() override {
    stop_progress();
    if (gates_) gates_->disarm();
    gates_ = nullptr;
    // Copies still under way finish before their buffers are reused. A copy takes microseconds;
    // one still going after kDrainSeconds sits behind a GPU stream that never finishes (streams
    // share the GPU's hardware queues): nothing waits for it, and no buffer is reused.
    std::lock_guard lock(mu_);
    bool drained = true;
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(kDrainSeconds);
    for (auto& [i, l] : links_) {
      while (l.stream && cudaStreamQuery(l.stream) == cudaErrorNotReady) {
        if (std::chrono::steady_clock::now() > until) {
          drained = false;
          break;
        }
        std::this_thread::yield();
      }
      l.ready.clear();
      l.busy = nullptr;
      l.sends.clear();
      l.recvs.clear();
    }
    tag_slot_.clear();
    // (Not the whole device: a compute stream that never finishes must not hang this.)
    std::lock_guard buffers(buffer_mu_);
    if (drained) {
      free_buffers_ = buffers_;  // every one is idle now
    } else {
      stalled_ = true;
      free_buffers_.clear();
      GpuRuntime::instance().mark_stalled();
    }
  }

  std::vector<std::string> report() const override {
    return {fmt::format(
        "cuda transport   {} device-to-device transfers of {} bytes; {}; copies "
        "seen complete {}",
        transfers_, bytes_, GpuRuntime::instance().partition_note(),
        signals_ && signals_->available()
            ? "in host memory (cuStreamWriteValue32)"
            : "by polling events (" + (signals_ ? signals_->note() : std::string("-")) + ")")};
  }

 private:
  std::size_t link_index(int src, int dst) const {
    return static_cast<std::size_t>(src) * static_cast<std::size_t>(R_) +
           static_cast<std::size_t>(dst);
  }
  // Events are recycled: creating one per post and per transfer cost microseconds on the ranks'
  // critical path, and kept every event of the run alive.
  cudaEvent_t event() {
    std::lock_guard lock(event_mu_);
    if (!free_events_.empty()) {
      cudaEvent_t e = free_events_.back();
      free_events_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    events_.push_back(e);
    return e;
  }
  // Device buffers of bytes_ each, reused once their copy has completed: no allocation (nor
  // stream-ordered free) on a rank's way from one op to the next after the first iteration.
  void* take_buffer() {
    std::lock_guard lock(buffer_mu_);
    if (!free_buffers_.empty()) {
      void* b = free_buffers_.back();
      free_buffers_.pop_back();
      return b;
    }
    void* b = nullptr;
    CUDA_CHECK(cudaMalloc(&b, bytes_));
    buffers_.push_back(b);
    return b;
  }
  void give_buffer(void*& b) {
    if (!b) return;
    std::lock_guard lock(buffer_mu_);
    free_buffers_.push_back(b);
    b = nullptr;
  }

  bool match_send(Link& l, const MessagePtr& m) {
    if (fifo_) {
      if (l.recvs.empty()) {
        l.sends.push_back(m);
        return false;
      }
      m->recv = l.recvs.front();
      l.recvs.pop_front();
      m->has_recv = true;
      return true;
    }
    auto& slot = tag_slot_[tag_of(*m->send.req)];
    if (!slot.recv.req) {
      if (slot.send) duplicate(*m->send.req);
      slot.send = m;
      return false;
    }
    m->recv = slot.recv;
    m->has_recv = true;
    slot = {};
    return true;
  }
  MessagePtr match_recv(Link& l, const Side& side) {
    if (fifo_) {
      if (l.sends.empty()) {
        l.recvs.push_back(side);
        return nullptr;
      }
      MessagePtr m = l.sends.front();
      l.sends.pop_front();
      take_recv(*m, side);
      return m;
    }
    auto& slot = tag_slot_[tag_of(*side.req)];
    if (!slot.send) {
      if (slot.recv.req) duplicate(*side.req);
      slot.recv = side;
      return nullptr;
    }
    MessagePtr m = std::move(slot.send);
    slot = {};
    take_recv(*m, side);
    return m;
  }
  // A receive meets its send's message. An eager one already has its landing buffer (its copy
  // may be under way or over): the receive's own goes back.
  void take_recv(Message& m, Side side) {
    m.has_recv = true;
    if (!m.eager) {
      m.recv = side;
      return;
    }
    m.recv.req = std::move(side.req);
    give_buffer(side.device);
    record_match(m);
  }
  static void record_match(Message& m) {
    m.send.req->peer_rank = m.recv.req->rank;
    m.send.req->peer_pos = m.recv.req->pos;
    m.recv.req->peer_rank = m.send.req->rank;
    m.recv.req->peer_pos = m.send.req->pos;
  }
  std::string released_error(const Request& s) const { return real::released_error(*ctx_, s); }
  std::size_t tag_of(const Request& r) const { return real::tag_of(*ctx_, r); }
  [[noreturn]] void duplicate(const Request& r) const { throw_duplicate(*ctx_, r); }

  void make_ready(std::size_t link, Link& l, const MessagePtr& m) {
    m->link = link;
    if (m->has_recv) record_match(*m);
    // The progress thread starts it: at once on an idle link, else when the link's copy ends.
    if (!l.busy && l.ready.empty()) startable_.fetch_add(1, std::memory_order_release);
    l.ready.push_back(m);
  }
  // The link's next copy: the link is its from now (progress thread, under the lock).
  MessagePtr claim_next(Link& l) {
    MessagePtr m = l.ready.front();
    l.ready.pop_front();
    l.busy = m;
    ++transfers_;
    if (gates_) {
      if (!m->eager) m->raise_send = {m->send.req->rank, m->send.req->pos};
      if (m->has_recv) m->raise_recv = {m->recv.req->rank, m->recv.req->pos};
    }
    return m;
  }
  // Enqueues a claimed copy (progress thread, without the lock).
  void launch(Link& l, Message& m) {
    if (!l.stream) CUDA_CHECK(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking));
    m.start = ctx_->clock.now();
    CUDA_CHECK(
        cudaMemcpyAsync(m.recv.device, m.send.device, bytes_, cudaMemcpyDeviceToDevice, l.stream));
    // The flags first: they start the ranks' next ops; the host learns of the copy after.
    for (const auto& [rank, pos] : {m.raise_send, m.raise_recv})
      if (rank >= 0) gates_->raise(l.stream, rank, pos);
    m.seq = l.seq + 1;
    if (signals_->write(l.stream, m.link, m.seq)) {
      l.seq = m.seq;
    } else {
      m.done = event();
      CUDA_CHECK(cudaEventRecord(m.done, l.stream));
    }
  }
  // Whether a launched copy has completed (progress thread, without the lock).
  bool copied(const Message& m) const {
    if (!m.done) return signals_->reached(m.link, m.seq);
    const cudaError_t e = cudaEventQuery(m.done);
    if (e == cudaErrorNotReady) return false;
    CUDA_CHECK(e);
    return true;
  }
  // A copy has completed (progress thread, under the lock).
  void finish(Message& m) {
    m.end = ctx_->clock.now();
    give_buffer(m.send.device);
    give_buffer(m.recv.device);  // (nothing reads it: the payload stamps travel on the host)
    if (m.done) {
      std::lock_guard events(event_mu_);
      free_events_.push_back(m.done);
      m.done = nullptr;
    }
    if (m.eager) {  // the send completed when posted; the receive, if there is one yet, now
      m.arrived = true;
      if (m.has_recv) deliver(m);
      return;
    }
    Request& s = *m.send.req;
    Request& r = *m.recv.req;
    if (s.buffer->has_storage())
      r.buffer->copy_from(s.buffer->data());
    else
      s.error = r.error = released_error(s);
    for (Request* q : {&s, &r}) {
      q->transfer_start = m.start;
      q->transfer_end = m.end;
    }
    complete(s);
    complete(r);
  }
  // An eager message's receive completes with the bytes its send posted.
  void deliver(Message& m) {
    Request& r = *m.recv.req;
    // (Its copy raised the flag where the receive was known when the copy took the link.)
    if (gates_ && m.raise_recv.first < 0) gates_->raise_now(r.rank, r.pos);
    r.error = m.error;
    if (m.error.empty()) r.buffer->copy_from(m.bytes);
    r.transfer_start = m.start;
    r.transfer_end = m.end;
    complete(r);
  }
  void complete(Request& q) {
    q.complete.store(true, std::memory_order_release);
    waiters_.wake(q.rank);
  }

  // The progress thread starts the copies (in the device's primary context: enqueued from a
  // rank's thread, each copy cost that rank ~20 us of context switching) and ends those whose
  // event has completed. It spins while the run lasts and makes no CUDA call under the lock,
  // so that the ranks post without waiting for it.
  void progress_loop() {
    try {
      CUDA_CHECK(cudaSetDevice(0));
      std::vector<std::pair<Link*, MessagePtr>> busy, starting;  // under way; to enqueue
      std::vector<char> done;
      while (!closing_.load(std::memory_order_acquire)) {
        starting.clear();
        if (startable_.load(std::memory_order_acquire) > 0) {
          std::lock_guard lock(mu_);
          startable_.store(0, std::memory_order_relaxed);
          for (auto& [i, l] : links_)  // (a map's elements stay put as it grows)
            if (!l.busy && !l.ready.empty()) starting.emplace_back(&l, claim_next(l));
        }
        done.assign(busy.size(), 0);
        bool any = false;
        for (std::size_t i = 0; i < busy.size(); ++i) {
          if (!copied(*busy[i].second)) continue;
          done[i] = 1;
          any = true;
        }
        if (any) {
          std::lock_guard lock(mu_);
          for (std::size_t i = 0; i < busy.size(); ++i) {
            if (!done[i]) continue;
            auto& [l, m] = busy[i];
            l->busy = nullptr;
            finish(*m);
            if (!l->ready.empty()) starting.emplace_back(l, claim_next(*l));
            m = nullptr;
          }
        }
        std::erase_if(busy, [](const auto& b) { return b.second == nullptr; });
        for (auto& [l, m] : starting) {
          launch(*l, *m);
          busy.emplace_back(l, std::move(m));
        }
        if (!any && starting.empty()) std::this_thread::yield();
      }
    } catch (const std::exception& e) {
      // A failed copy is a GPU fault: every waiting rank returns, and the watchdog reports.
      std::lock_guard lock(mu_);
      aborted_ = true;
      waiters_.wake_all();
      fault_ = e.what();
    }
  }
  void stop_progress() {
    if (!progress_.joinable()) return;
    closing_.store(true, std::memory_order_release);
    progress_.join();
  }

  struct TagSlot {
    MessagePtr send;
    Side recv;
  };

  std::optional<TransportContext> ctx_;
  int R_ = 0;
  bool fifo_ = false, eager_ = false;
  std::size_t bytes_ = 1;
  static constexpr int kSpinMs = 20;
  static constexpr double kDrainSeconds = 2.0;
  bool primed_ = false;   // a copy has run (begin)
  bool stalled_ = false;  // a copy never ended: its buffers stay out of use and are not freed
  // (signals_ is made once the runtime exists: a transport that never reached a device, say
  // on a machine without one, must not ask for the runtime from its destructor, which throws.)
  bool device_stalled() const { return stalled_ || (signals_ && GpuRuntime::instance().stalled()); }
  std::mutex buffer_mu_;
  std::vector<void*> buffers_, free_buffers_;  // all of bytes_ made, and the idle ones
  mutable std::mutex mu_;
  std::mutex event_mu_;
  std::vector<cudaEvent_t> events_;       // every event made, destroyed at the end
  std::vector<cudaEvent_t> free_events_;  // those not in use
  std::unordered_map<std::size_t, Link> links_;
  std::unique_ptr<HostSignals> signals_;  // one per link (link_index): its copies completed
  StreamGates* gates_ = nullptr;          // this run's flags, when armed
  std::unordered_map<std::size_t, TagSlot> tag_slot_;
  Waiters waiters_;
  std::atomic<bool> aborted_ = false;
  std::atomic<bool> closing_ = false;
  std::atomic<int> startable_ = 0;  // links that went from idle to having a copy ready
  std::thread progress_;
  std::size_t transfers_ = 0;
  std::string fault_;
};

}  // namespace

}  // namespace ppsim::real::gpu

namespace ppsim::real::gpu::transports {

void register_cuda(TransportRegistry& registry) {
  registry.add({"cuda",
                "several ranks on one GPU: device-to-device copies, SMs split by green "
                "contexts where the driver has them",
                [] { return std::make_unique<CudaTransport>(); }});
}

}  // namespace ppsim::real::gpu::transports
