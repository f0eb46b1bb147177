// `nccl` transport: one GPU per rank, ranks are threads of this process (one communicator per
// GPU, ncclCommInitAll). A send or receive is ncclSend / ncclRecv on the rank's communication
// stream, after an event on its compute stream (a send's data is there). A run of consecutive
// asynchronous sends and receives of a rank is one batch: one NCCL group, issued when the first
// of them is posted. NCCL matches by order per pair of ranks, so the host keeps the same fifo
// order: the payload stamped in the host buffers follows NCCL's matching, and a receive that gets
// another tensor's message is reported (message_order_mismatch), as the simulator's `fifo` check
// predicts. A wait blocks the rank until the group's event has completed (the simulator's WAIT),
// so whatever the rank issues next is ordered after the transfer. abort() calls ncclCommAbort on
// every communicator, so that a hung NCCL kernel ends; they are made again for the next run.
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "gpu_runtime.hpp"
#include "ppsim/config/error.hpp"
#include "ppsim/real/backend_error.hpp"
#include "ppsim/real/gpu/checks.hpp"
#include "ppsim/real/transport.hpp"
#include "ppsim/real/waiters.hpp"

namespace ppsim::real::gpu {

namespace {

using schedules::Op;

struct Group;

struct Entry {  // one issued ncclSend / ncclRecv
  RequestPtr req;
  void* device = nullptr;
  std::shared_ptr<Group> group;
  std::shared_ptr<Entry> peer;  // the op NCCL matches it with (fifo per pair)
  bool attached = false;        // post() has given it its host buffer
};
using EntryPtr = std::shared_ptr<Entry>;

struct Group {  // what one ncclGroupStart/End issued, and its event on the comm stream
  int rank = 0;
  std::vector<EntryPtr> entries;
  cudaEvent_t done = nullptr;
  double start = 0;
  bool complete = false;
};

class NcclTransport final : public Transport {
 public:
  ~NcclTransport() override {
    stop_progress();
    destroy_comms(false);
  }

  void begin(const TransportContext& c) override {
    stop_progress();
    ctx_.emplace(c);
    R_ = c.program.ranks();
    GpuRuntime& rt = GpuRuntime::instance();
    if (rt.device_count() < R_)
      throw BackendUnavailable(fmt::format(
          "the nccl backend needs one GPU per rank (NCCL refuses two ranks on one GPU): the "
          "program has {} ranks and this machine {} GPU{}; use --backend cuda to run several "
          "ranks on one GPU",
          R_, rt.device_count(), rt.device_count() == 1 ? "" : "s"));
    if (c.network.eager_limit > 0 && c.network.boundary_bytes <= c.network.eager_limit)
      throw config::ConfigError("", "comm.eager_limit",
                                "the nccl transport is rendezvous only; set comm.eager_limit "
                                "below comm.boundary_bytes or use --backend host");
    rt.layout(R_, false);
    bytes_ = static_cast<std::size_t>(std::max<std::int64_t>(c.network.boundary_bytes, 1));
    if (static_cast<int>(comms_.size()) != R_) {
      destroy_comms(false);
      comms_.assign(static_cast<std::size_t>(R_), nullptr);
      std::vector<int> devs(static_cast<std::size_t>(R_));
      for (int r = 0; r < R_; ++r) devs[static_cast<std::size_t>(r)] = r;
      NCCL_CHECK(ncclCommInitAll(comms_.data(), R_, devs.data()));
      streams_.assign(static_cast<std::size_t>(R_), nullptr);
      for (int r = 0; r < R_; ++r) {
        CUDA_CHECK(cudaSetDevice(r));
        CUDA_CHECK(cudaStreamCreateWithFlags(&streams_[static_cast<std::size_t>(r)],
                                             cudaStreamNonBlocking));
      }
    }
    std::lock_guard lock(mu_);
    issued_.assign(static_cast<std::size_t>(R_), {});
    sends_.clear();
    recvs_.clear();
    groups_.clear();
    waiters_.reset(R_);
    aborted_ = closing_ = false;
    progress_ = std::thread([this] { progress_loop(); });
  }

  RequestPtr post(int rank, int pos, const Op& op, std::shared_ptr<Buffer> buffer) override {
    const auto r = static_cast<std::size_t>(rank);
    {
      std::lock_guard lock(mu_);
      if (auto it = issued_[r].find(pos); it != issued_[r].end()) {  // issued with its batch
        EntryPtr e = it->second;
        issued_[r].erase(it);
        e->req->buffer = std::move(buffer);
        e->attached = true;
        return e->req;
      }
    }
    // A new batch: this op and, when it is asynchronous, the asynchronous sends and receives
    // right after it.
    const auto ops = ctx_->program.ops(rank);
    std::vector<int> batch{pos};
    if (op.async)
      for (std::size_t i = static_cast<std::size_t>(pos) + 1;
           i < ops.size() && schedules::is_comm(ops[i].kind) && ops[i].async; ++i)
        batch.push_back(static_cast<int>(i));
    GpuRuntime& rt = GpuRuntime::instance();
    rt.bind(rank);
    RankGpu& g = rt.rank(rank);
    cudaStream_t cs = streams_[r];
    cudaEvent_t ready = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(ready, g.stream));
    CUDA_CHECK(cudaStreamWaitEvent(cs, ready, 0));
    CUDA_CHECK(cudaEventDestroy(ready));
    auto group = std::make_shared<Group>();
    group->rank = rank;
    for (int p : batch) {
      const Op& o = ops[static_cast<std::size_t>(p)];
      auto e = std::make_shared<Entry>();
      e->req = new_request(*ctx_, rank, p, o, nullptr);
      e->group = group;
      CUDA_CHECK(cudaMallocAsync(&e->device, bytes_, cs));
      group->entries.push_back(e);
    }
    group->entries.front()->req->buffer = std::move(buffer);
    group->entries.front()->attached = true;
    // The NCCL calls outside the lock: a first send between two ranks sets their connection up
    // inside ncclGroupEnd, which waits for the peer, and the peer may need the lock to post.
    // (Only this rank's thread uses its communicator.)
    NCCL_CHECK(ncclGroupStart());
    for (const EntryPtr& e : group->entries) {
      const int peer = ctx_->semantics.peer_of(e->req->op);
      if (e->req->send)
        NCCL_CHECK(ncclSend(e->device, bytes_, ncclUint8, peer, comms_[r], cs));
      else
        NCCL_CHECK(ncclRecv(e->device, bytes_, ncclUint8, peer, comms_[r], cs));
    }
    NCCL_CHECK(ncclGroupEnd());
    CUDA_CHECK(cudaEventCreateWithFlags(&group->done, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(group->done, cs));
    group->start = ctx_->clock.now();
    {
      std::lock_guard lock(mu_);
      groups_.push_back(group);
      // NCCL's matching, mirrored: in issue order per directed pair.
      for (const EntryPtr& e : group->entries) {
        const int peer = ctx_->semantics.peer_of(e->req->op);
        auto& mine = e->req->send ? sends_[{rank, peer}] : recvs_[{peer, rank}];
        auto& theirs = e->req->send ? recvs_[{rank, peer}] : sends_[{peer, rank}];
        if (!theirs.empty()) {
          e->peer = theirs.front();
          theirs.front()->peer = e;
          theirs.pop_front();
        } else {
          mine.push_back(e);
        }
        if (e->req->pos != pos) issued_[r][e->req->pos] = e;
      }
      progress_cv_.notify_one();
    }
    return group->entries.front()->req;
  }

  bool wait(int rank, std::span<const RequestPtr> requests) override {
    std::unique_lock lock(mu_);
    return waiters_.wait(
        lock, rank, requests, [&] { return aborted_; }, completed);
  }

  // Nothing can move: every group not complete holds an op whose peer never issued its match
  // (NCCL's kernel for that group waits for it), or waits for such a group's peer.
  bool quiescent() const override {
    std::lock_guard lock(mu_);
    for (const auto& g : groups_) {
      if (g->complete) continue;
      bool all_matched = true;
      for (const auto& e : g->entries) all_matched = all_matched && e->peer;
      if (!all_matched) continue;
      bool peers_matched = true;
      for (const auto& e : g->entries)
        for (const auto& pe : e->peer->group->entries) peers_matched = peers_matched && pe->peer;
      if (peers_matched) return false;
    }
    return !waiters_.any_about_to_move(completed);
  }

  std::size_t stuck_waiters() const override {
    std::lock_guard lock(mu_);
    return waiters_.stuck(completed);
  }

  void abort() override {
    std::lock_guard lock(mu_);
    if (aborted_) return;
    aborted_ = true;
    // A hung NCCL kernel ends only when its communicator is aborted.
    for (ncclComm_t c : comms_)
      if (c) (void)ncclCommAbort(c);
    comms_.clear();
    waiters_.wake_all();
    progress_cv_.notify_all();
  }

  void end() override {
    stop_progress();
    std::lock_guard lock(mu_);
    for (int r = 0; r < static_cast<int>(streams_.size()); ++r) {
      (void)cudaSetDevice(r);
      if (!aborted_) (void)cudaStreamSynchronize(streams_[static_cast<std::size_t>(r)]);
    }
    for (auto& g : groups_) {
      for (auto& e : g->entries)
        if (e->device) {
          (void)cudaSetDevice(g->rank);
          (void)cudaFreeAsync(e->device, streams_[static_cast<std::size_t>(g->rank)]);
          e->device = nullptr;
        }
      if (g->done) (void)cudaEventDestroy(g->done);
      g->done = nullptr;
      g->entries.clear();  // (each entry points back at its group)
    }
    groups_.clear();
    issued_.assign(static_cast<std::size_t>(R_), {});
    sends_.clear();
    recvs_.clear();
    if (aborted_) destroy_comms(true);
  }

  // Each collective the model times, over all R_ GPUs (one thread drives every communicator, so
  // each call is one NCCL group across them), at a few sizes: the median of its repeats, timed
  // by events on every rank's stream, the slowest rank's.
  std::vector<CollectiveSample> measure_collectives() override {
    if (R_ < 2 || comms_.size() != static_cast<std::size_t>(R_) || aborted_) return {};
    constexpr double kSizes[] = {1 << 20, 8 << 20, 64 << 20};
    constexpr int kWarmup = 2, kRepeats = 5;
    const std::size_t most = static_cast<std::size_t>(kSizes[2]);
    std::vector<void*> in(static_cast<std::size_t>(R_)), out(static_cast<std::size_t>(R_));
    std::vector<cudaEvent_t> t0(static_cast<std::size_t>(R_)), t1(static_cast<std::size_t>(R_));
    for (int r = 0; r < R_; ++r) {
      const auto i = static_cast<std::size_t>(r);
      CUDA_CHECK(cudaSetDevice(r));
      CUDA_CHECK(cudaMalloc(&in[i], most));
      CUDA_CHECK(cudaMalloc(&out[i], most));
      CUDA_CHECK(cudaEventCreate(&t0[i]));
      CUDA_CHECK(cudaEventCreate(&t1[i]));
    }
    // One call of `c` with `bytes` as model::collective_time counts them, on every rank.
    auto issue = [&](model::Collective c, std::size_t bytes) {
      const std::size_t share = bytes / static_cast<std::size_t>(R_);
      NCCL_CHECK(ncclGroupStart());
      for (int r = 0; r < R_; ++r) {
        const auto i = static_cast<std::size_t>(r);
        ncclComm_t comm = comms_[i];
        cudaStream_t st = streams_[i];
        switch (c) {
          case model::Collective::all_reduce:
            NCCL_CHECK(ncclAllReduce(in[i], out[i], bytes / 2, ncclHalf, ncclSum, comm, st));
            break;
          case model::Collective::all_gather:  // bytes: the gathered output
            NCCL_CHECK(ncclAllGather(in[i], out[i], share, ncclUint8, comm, st));
            break;
          case model::Collective::reduce_scatter:  // bytes: the scattered input
            NCCL_CHECK(ncclReduceScatter(in[i], out[i], share / 2, ncclHalf, ncclSum, comm, st));
            break;
          case model::Collective::broadcast:
            NCCL_CHECK(ncclBroadcast(in[i], out[i], bytes, ncclUint8, 0, comm, st));
            break;
          case model::Collective::all_to_all:  // bytes: each rank's send buffer
            for (int peer = 0; peer < R_; ++peer) {
              const std::size_t at = static_cast<std::size_t>(peer) * share;
              NCCL_CHECK(
                  ncclSend(static_cast<char*>(in[i]) + at, share, ncclUint8, peer, comm, st));
              NCCL_CHECK(
                  ncclRecv(static_cast<char*>(out[i]) + at, share, ncclUint8, peer, comm, st));
            }
            break;
        }
      }
      NCCL_CHECK(ncclGroupEnd());
    };
    std::vector<CollectiveSample> samples;
    for (model::Collective c : {model::Collective::all_reduce, model::Collective::all_gather,
                                model::Collective::reduce_scatter, model::Collective::all_to_all,
                                model::Collective::broadcast}) {
      for (double size : kSizes) {
        const auto bytes = static_cast<std::size_t>(size);
        for (int k = 0; k < kWarmup; ++k) issue(c, bytes);
        std::vector<double> times;
        for (int k = 0; k < kRepeats; ++k) {
          for (int r = 0; r < R_; ++r) {
            CUDA_CHECK(cudaSetDevice(r));
            CUDA_CHECK(cudaStreamSynchronize(streams_[static_cast<std::size_t>(r)]));
          }
          for (int r = 0; r < R_; ++r) {
            CUDA_CHECK(cudaSetDevice(r));
            CUDA_CHECK(cudaEventRecord(t0[static_cast<std::size_t>(r)],
                                       streams_[static_cast<std::size_t>(r)]));
          }
          issue(c, bytes);
          double slowest = 0;
          for (int r = 0; r < R_; ++r) {
            const auto i = static_cast<std::size_t>(r);
            CUDA_CHECK(cudaSetDevice(r));
            CUDA_CHECK(cudaEventRecord(t1[i], streams_[i]));
            CUDA_CHECK(cudaEventSynchronize(t1[i]));
            float ms = 0;
            CUDA_CHECK(cudaEventElapsedTime(&ms, t0[i], t1[i]));
            slowest = std::max(slowest, static_cast<double>(ms) * 1e-3);
          }
          times.push_back(slowest);
        }
        std::sort(times.begin(), times.end());
        samples.push_back({c, R_, size, times[times.size() / 2]});
      }
    }
    for (int r = 0; r < R_; ++r) {
      const auto i = static_cast<std::size_t>(r);
      (void)cudaSetDevice(r);
      (void)cudaFree(in[i]);
      (void)cudaFree(out[i]);
      (void)cudaEventDestroy(t0[i]);
      (void)cudaEventDestroy(t1[i]);
    }
    return samples;
  }

  std::vector<std::string> report() const override {
    int version = 0;
    (void)ncclGetVersion(&version);
    return {fmt::format("nccl transport   NCCL {}, {} GPUs, one per rank: {}", version, R_,
                        describe_device(0))};
  }

 private:
  void destroy_comms(bool aborted) {
    if (!aborted)
      for (ncclComm_t c : comms_)
        if (c) (void)ncclCommDestroy(c);
    comms_.clear();
    for (std::size_t r = 0; r < streams_.size(); ++r) {
      (void)cudaSetDevice(static_cast<int>(r));
      if (streams_[r]) (void)cudaStreamDestroy(streams_[r]);
    }
    streams_.clear();
  }

  // A group whose event completed completes its requests (once each has its host buffer):
  // the payload goes from the sender's host buffer to the receiver's, as NCCL matched them. Its
  // device buffers and event then go, and the group leaves the list: a long run holds only what is
  // in flight. The CUDA calls are made without the lock, so that the ranks never wait for them.
  void progress_loop() {
    struct Release {
      int rank;
      void* device;
      cudaEvent_t done;
    };
    std::vector<std::shared_ptr<Group>> pending;
    std::vector<std::pair<std::shared_ptr<Group>, cudaError_t>> ended;
    std::vector<Release> releases;
    std::unique_lock lock(mu_);
    while (!closing_) {
      pending.clear();
      for (const auto& g : groups_)
        if (!g->complete) pending.push_back(g);
      if (pending.empty() || aborted_) {
        progress_cv_.wait(lock);
        continue;
      }
      lock.unlock();
      ended.clear();
      for (const auto& g : pending) {
        (void)cudaSetDevice(g->rank);
        const cudaError_t e = cudaEventQuery(g->done);
        if (e != cudaErrorNotReady) ended.emplace_back(g, e);
      }
      lock.lock();
      releases.clear();
      for (const auto& [g, e] : ended) {
        bool attached = true;
        for (const auto& en : g->entries) attached = attached && en->attached;
        if (!attached) continue;
        g->complete = true;
        const double now = ctx_->clock.now();
        for (const auto& en : g->entries) {
          Request& q = *en->req;
          if (e != cudaSuccess)
            q.error = fmt::format("the NCCL transfer failed: {}", cudaGetErrorString(e));
          if (!q.send && en->peer && en->peer->attached) {
            const Buffer& src = *en->peer->req->buffer;
            if (src.has_storage())
              q.buffer->copy_from(src.data());
            else
              q.error = released_error(*ctx_, *en->peer->req);
          }
          if (en->peer) {
            q.peer_rank = en->peer->req->rank;
            q.peer_pos = en->peer->req->pos;
          }
          q.transfer_start = g->start;
          q.transfer_end = now;
          q.complete.store(true, std::memory_order_release);
          waiters_.wake(q.rank);
          releases.push_back({g->rank, en->device, nullptr});
          en->device = nullptr;
        }
        releases.push_back({g->rank, nullptr, g->done});
        g->done = nullptr;
        // (A complete group's entries are not looked at again: quiescent() skips it, and a
        // peer's check finds nothing left unmatched in it. Cleared, they no longer hold the group
        // alive through their back pointers.)
        g->entries.clear();
      }
      std::erase_if(groups_, [](const auto& g) { return g->complete; });
      if (!releases.empty()) {
        lock.unlock();
        // Stream-ordered on the rank's communication stream, after the group's kernel (done).
        for (const Release& r : releases) {
          (void)cudaSetDevice(r.rank);
          if (r.device) (void)cudaFreeAsync(r.device, streams_[static_cast<std::size_t>(r.rank)]);
          if (r.done) (void)cudaEventDestroy(r.done);
        }
        lock.lock();
      }
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
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

  std::optional<TransportContext> ctx_;
  int R_ = 0;
  std::size_t bytes_ = 1;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
  mutable std::mutex mu_;
  std::vector<std::map<int, EntryPtr>> issued_;  // per rank: batch ops not posted yet, by pos
  std::map<std::pair<int, int>, std::deque<EntryPtr>> sends_, recvs_;  // unmatched, by (src, dst)
  std::vector<std::shared_ptr<Group>> groups_;
  Waiters waiters_;
  bool aborted_ = false, closing_ = false;
  std::condition_variable progress_cv_;
  std::thread progress_;
};

}  // namespace

}  // namespace ppsim::real::gpu

namespace ppsim::real::gpu::transports {

void register_nccl(TransportRegistry& registry) {
  registry.add({"nccl",
                "one GPU per rank: ncclSend / ncclRecv, a batch of asynchronous ops as "
                "one NCCL group",
                [] { return std::make_unique<NcclTransport>(); }});
}

}  // namespace ppsim::real::gpu::transports
