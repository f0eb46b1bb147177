// `cuda` transport: several ranks on one GPU, each rank a host thread with its own stream (and,
// where the driver has green contexts, its own share of the SMs: gpu_runtime.cpp). Matching and
// the blocking semantics are the host transport's (rendezvous; tag or fifo matching; one transfer
// at a time per directed link): once both sides have posted (the host rendezvous), the transfer
// is a device-to-device copy on the link's stream, ordered after both ranks' streams by events,
// and its requests complete when the copy's event has completed. The payload stamped in the host
// buffers travels with it, so the receiver's checks (wrong message, released storage) hold.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "gpu_runtime.hpp"
#include "ppsim/config/error.hpp"
#include "ppsim/real/gpu/checks.hpp"
#include "ppsim/real/transport.hpp"

namespace ppsim::real::gpu {

namespace {

using schedules::Op;

struct Side {
  RequestPtr req;
  void* device = nullptr;        // its device buffer (boundary bytes)
  cudaEvent_t posted = nullptr;  // on its rank's stream when it was posted
};

struct Message {
  Side send, recv;
  bool has_recv = false;
  double start = 0;
  cudaEvent_t done = nullptr;
};
using MessagePtr = std::shared_ptr<Message>;

struct Link {
  std::deque<MessagePtr> ready;  // matched, waiting for the link
  MessagePtr busy;               // the copy under way
  std::deque<MessagePtr> sends;  // fifo: posted, not matched
  std::deque<Side> recvs;
  cudaStream_t stream = nullptr;
};

class CudaTransport final : public Transport {
 public:
  ~CudaTransport() override {
    stop_progress();
    for (auto& [i, l] : links_)
      if (l.stream) (void)cudaStreamDestroy(l.stream);
    for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
  }

  void begin(const TransportContext& c) override {
    stop_progress();
    ctx_.emplace(c);
    R_ = c.program.ranks();
    if (c.network.eager_limit > 0 && c.network.boundary_bytes <= c.network.eager_limit)
      throw config::ConfigError(
          "", "comm.eager_limit",
          "the cuda transport is rendezvous only (a send completes when its transfer has); set "
          "comm.eager_limit below comm.boundary_bytes or use --backend host");
    GpuRuntime::instance().layout(R_, true);
    fifo_ = c.network.matching == config::Matching::fifo;
    bytes_ = static_cast<std::size_t>(std::max<std::int64_t>(c.network.boundary_bytes, 1));
    CUDA_CHECK(cudaSetDevice(0));
    if (!pool_) {
      cudaMemPoolProps props{};
      props.allocType = cudaMemAllocationTypePinned;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = 0;
      CUDA_CHECK(cudaMemPoolCreate(&pool_, &props));
      std::uint64_t keep = ~std::uint64_t{0};
      CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep));
    }
    std::lock_guard lock(mu_);
    for (auto& [i, l] : links_) {
      l.ready.clear();
      l.busy = nullptr;
      l.sends.clear();
      l.recvs.clear();
    }
    tag_slot_.clear();
    waiting_.assign(static_cast<std::size_t>(R_), nullptr);
    cvs_ = std::vector<std::condition_variable>(static_cast<std::size_t>(R_));
    aborted_ = closing_ = false;
    transfers_ = 0;
    progress_ = std::thread([this] { progress_loop(); });
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
    // The device side: a buffer from the rank's stream, and the point in that stream after
    // which the data is there (a send's producer has run) or may be overwritten (a receive).
    GpuRuntime& rt = GpuRuntime::instance();
    rt.bind(rank);
    RankGpu& g = rt.rank(rank);
    Side side{req, nullptr, nullptr};
    CUDA_CHECK(cudaMallocFromPoolAsync(&side.device, bytes_, pool_, g.stream));
    side.posted = event();
    CUDA_CHECK(cudaEventRecord(side.posted, g.stream));
    const std::size_t link = req->send ? link_index(rank, peer) : link_index(peer, rank);
    std::lock_guard lock(mu_);
    Link& l = links_[link];
    if (req->send) {
      auto m = std::make_shared<Message>();
      m->send = side;
      if (match_send(l, m)) make_ready(l, m);
    } else if (MessagePtr m = match_recv(l, side)) {
      make_ready(l, m);
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
    for (const auto& [i, l] : links_)
      if (l.busy || !l.ready.empty()) return false;
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
    progress_cv_.notify_all();
  }

  void end() override {
    stop_progress();
    // Copies still under way finish before their buffers go back to the pool.
    std::lock_guard lock(mu_);
    for (auto& [i, l] : links_) {
      if (l.stream) (void)cudaStreamSynchronize(l.stream);
      auto drop = [&](Side& s) {
        if (s.device) (void)cudaFreeAsync(s.device, l.stream ? l.stream : nullptr);
        s.device = nullptr;
      };
      for (auto& m : l.ready) drop(m->send), drop(m->recv);
      if (l.busy) drop(l.busy->send), drop(l.busy->recv);
      for (auto& m : l.sends) drop(m->send);
      for (auto& s : l.recvs) drop(s);
      l.ready.clear();
      l.busy = nullptr;
      l.sends.clear();
      l.recvs.clear();
    }
    for (auto& [t, slot] : tag_slot_) {
      if (slot.send && slot.send->send.device) (void)cudaFreeAsync(slot.send->send.device, nullptr);
      if (slot.recv.device) (void)cudaFreeAsync(slot.recv.device, nullptr);
    }
    tag_slot_.clear();
    (void)cudaDeviceSynchronize();
  }

  std::vector<std::string> report() const override {
    return {fmt::format("cuda transport   {} device-to-device transfers of {} bytes; {}",
                        transfers_, bytes_, GpuRuntime::instance().partition_note())};
  }

 private:
  std::size_t link_index(int src, int dst) const {
    return static_cast<std::size_t>(src) * static_cast<std::size_t>(R_) +
           static_cast<std::size_t>(dst);
  }
  cudaEvent_t event() {
    std::lock_guard lock(event_mu_);
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    events_.push_back(e);
    return e;
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
      m->recv = side;
      m->has_recv = true;
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
    m->recv = side;
    m->has_recv = true;
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

  void make_ready(Link& l, const MessagePtr& m) {
    m->send.req->peer_rank = m->recv.req->rank;
    m->send.req->peer_pos = m->recv.req->pos;
    m->recv.req->peer_rank = m->send.req->rank;
    m->recv.req->peer_pos = m->send.req->pos;
    if (l.busy) {
      l.ready.push_back(m);
      return;
    }
    start(l, m);
  }
  // The copy, after both sides' streams reached their posts.
  void start(Link& l, const MessagePtr& m) {
    if (!l.stream) CUDA_CHECK(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking));
    m->start = ctx_->clock.now();
    m->done = event();
    CUDA_CHECK(cudaStreamWaitEvent(l.stream, m->send.posted, 0));
    CUDA_CHECK(cudaStreamWaitEvent(l.stream, m->recv.posted, 0));
    CUDA_CHECK(cudaMemcpyAsync(m->recv.device, m->send.device, bytes_, cudaMemcpyDeviceToDevice,
                               l.stream));
    CUDA_CHECK(cudaEventRecord(m->done, l.stream));
    l.busy = m;
    ++transfers_;
    progress_cv_.notify_one();
  }
  void finish(Link& l, Message& m) {
    const double end = ctx_->clock.now();
    Request& s = *m.send.req;
    Request& r = *m.recv.req;
    if (s.buffer->has_storage())
      r.buffer->copy_from(s.buffer->data());
    else
      s.error = r.error = fmt::format("the transfer of {} reads storage already released by {}",
                                      ctx_->program.op_text(s.rank, s.op), s.buffer->released_by());
    for (Request* q : {&s, &r}) {
      q->transfer_start = m.start;
      q->transfer_end = end;
    }
    CUDA_CHECK(cudaFreeAsync(m.send.device, l.stream));
    CUDA_CHECK(cudaFreeAsync(m.recv.device, l.stream));
    m.send.device = m.recv.device = nullptr;
    for (const RequestPtr& q : {m.send.req, m.recv.req}) {
      q->complete.store(true, std::memory_order_release);
      cvs_[static_cast<std::size_t>(q->rank)].notify_all();
    }
  }

  // Ends copies whose event has completed and starts the next one on each link.
  void progress_loop() {
    try {
      CUDA_CHECK(cudaSetDevice(0));
      std::unique_lock lock(mu_);
      while (!closing_) {
        bool busy = false;
        for (auto& [i, l] : links_) {
          if (!l.busy) continue;
          const cudaError_t e = cudaEventQuery(l.busy->done);
          if (e == cudaErrorNotReady) {
            busy = true;
            continue;
          }
          CUDA_CHECK(e);
          MessagePtr m = std::move(l.busy);
          l.busy = nullptr;
          finish(l, *m);
          if (!l.ready.empty()) {
            MessagePtr next = l.ready.front();
            l.ready.pop_front();
            start(l, next);
            busy = true;
          }
        }
        if (busy) {
          lock.unlock();
          std::this_thread::yield();
          lock.lock();
        } else if (!closing_) {
          progress_cv_.wait(lock);
        }
      }
    } catch (const std::exception& e) {
      // A failed copy is a GPU fault: every waiting rank returns, and the watchdog reports.
      std::lock_guard lock(mu_);
      aborted_ = true;
      for (auto& cv : cvs_) cv.notify_all();
      fault_ = e.what();
    }
  }
  void stop_progress() {
    if (!progress_.joinable()) return;
    {
      std::lock_guard lock(mu_);
      closing_ = true;
      progress_cv_.notify_all();
    }
    progress_.join();
  }

  struct TagSlot {
    MessagePtr send;
    Side recv;
  };

  std::optional<TransportContext> ctx_;
  int R_ = 0;
  bool fifo_ = false;
  std::size_t bytes_ = 1;
  cudaMemPool_t pool_ = nullptr;
  mutable std::mutex mu_;
  std::mutex event_mu_;
  std::vector<cudaEvent_t> events_;
  std::unordered_map<std::size_t, Link> links_;
  std::unordered_map<std::size_t, TagSlot> tag_slot_;
  std::vector<const std::span<const RequestPtr>*> waiting_;
  std::vector<std::condition_variable> cvs_;
  bool aborted_ = false, closing_ = false;
  std::condition_variable progress_cv_;
  std::thread progress_;
  std::size_t transfers_ = 0;
  std::string fault_;
};

}  // namespace

void register_cuda_transport(TransportRegistry& registry) {
  registry.add({"cuda",
                "several ranks on one GPU: device-to-device copies, SMs split by green "
                "contexts where the driver has them",
                [] { return std::make_unique<CudaTransport>(); }});
}

}  // namespace ppsim::real::gpu
