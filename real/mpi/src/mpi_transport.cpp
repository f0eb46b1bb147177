// `mpi`: one rank per process, the processes started by a launcher (mpirun); a send and its
// receive are one MPI message between the two processes, so the run has real MPI's behaviour:
// MPI's matching (by tag: the tensor, or `fifo`: one tag, MPI's non-overtaking order per pair)
// and MPI's progress. A send that rendezvous is MPI_Issend (complete once its receive has
// matched it); an eager one (comm.eager_limit) is copied out and completes when posted, its
// message travelling with MPI_Isend. A thread of each process drives MPI's progress, so every
// posted request progresses on its own, as comm.semantics "mpi" says. Transfers take what MPI
// takes: the modelled latency and bandwidth are not added (calibrate: --calibrate).
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "mpi_plugin.hpp"
#include "ppsim/config/error.hpp"
#include "ppsim/real/transport.hpp"
#include "ppsim/real/waiters.hpp"

namespace ppsim::real::mpi {

namespace {

using schedules::Op;

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(rc, text, &n);
  throw std::runtime_error(fmt::format("{} failed: {}", what, std::string_view(text, n)));
}

// Ahead of a message's bytes: the op that sent it, and when (run clock), so that the receiver
// can name the send and date the transfer from the later of the two posts.
struct Header {
  std::int32_t pos;
  std::int32_t reserved;
  double posted;
};

// An MPI request under way (its MPI_Request is in requests_, at the same index).
struct InFlight {
  RequestPtr request;  // none for an eager send's message (its request completed when posted)
  std::vector<std::byte> bytes;
  int peer = 0;
  bool send = false;
  double posted = 0;  // run-clock seconds
};

class MpiTransport final : public Transport {
 public:
  ~MpiTransport() override { stop_progress(); }

  void begin(const TransportContext& c) override {
    int started = 0;
    MPI_Initialized(&started);
    if (!started)
      throw config::ConfigError("", "real.backend",
                                "the mpi backend needs MPI: start ppsim with mpirun, one process "
                                "per rank");
    if (c.network.semantics == model::P2pSemantics::nccl)
      throw config::ConfigError(
          "", "comm.semantics",
          "the mpi backend has MPI's point-to-point semantics (\"mpi\"); NCCL's (\"nccl\") run on "
          "the host backend in one process, or on GPUs with nccl");
    stop_progress();
    ctx_.emplace(c);
    fifo_ = c.network.matching == model::Matching::fifo;
    eager_ = c.network.eager_limit > 0 && c.network.boundary_bytes <= c.network.eager_limit;
    // A fresh communicator per run: nothing of an earlier run can match into this one.
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    int processes = 0;
    MPI_Comm_size(comm_, &processes);
    void* attr = nullptr;
    int has = 0;
    MPI_Comm_get_attr(comm_, MPI_TAG_UB, &attr, &has);
    const std::int64_t tag_ub = has ? *static_cast<int*>(attr) : 32767;
    if (!fifo_ && static_cast<std::int64_t>(c.semantics.tensor_count()) > tag_ub)
      throw config::ConfigError("", "comm.matching",
                                fmt::format("tag matching needs a tag per tensor ({}); this MPI "
                                            "has tags up to {}: use fifo matching",
                                            c.semantics.tensor_count(), tag_ub));
    sent_to_.assign(static_cast<std::size_t>(processes), 0);
    received_from_.assign(static_cast<std::size_t>(processes), 0);
    in_flight_.clear();
    requests_.clear();
    waiters_.reset(1);  // this process's one rank
    aborted_ = false;
    closing_ = false;
    progress_ = std::thread([this] { progress_loop(); });
  }

  RequestPtr post(int rank, int pos, const Op& op, std::shared_ptr<Buffer> buffer) override {
    const auto& sem = ctx_->semantics;
    auto req = new_request(*ctx_, rank, pos, op, std::move(buffer));
    const int peer = sem.peer_of(op);
    const int tag = fifo_ ? 0 : static_cast<int>(sem.tensor_index(sem.tensor_of(op)));
    const double now = ctx_->clock.now();
    auto f = std::make_unique<InFlight>();
    f->peer = peer;
    f->send = req->send;
    f->posted = now;
    const auto data = req->buffer->data();
    f->bytes.resize(sizeof(Header) + data.size());
    MPI_Request mpi = MPI_REQUEST_NULL;
    std::lock_guard lock(mu_);
    if (req->send) {
      // The bytes are copied out now: the rank may reuse its buffer once the request completes,
      // and an eager one completes at once.
      const Header h{pos, 0, now};
      std::memcpy(f->bytes.data(), &h, sizeof h);
      if (!data.empty()) std::memcpy(f->bytes.data() + sizeof h, data.data(), data.size());
      const int n = static_cast<int>(f->bytes.size());
      if (eager_) {
        check(MPI_Isend(f->bytes.data(), n, MPI_BYTE, peer, tag, comm_, &mpi), "MPI_Isend");
        req->transfer_start = req->transfer_end = now;
        req->complete.store(true, std::memory_order_release);
      } else {
        check(MPI_Issend(f->bytes.data(), n, MPI_BYTE, peer, tag, comm_, &mpi), "MPI_Issend");
        f->request = req;
      }
      ++sent_to_[static_cast<std::size_t>(peer)];
    } else {
      check(MPI_Irecv(f->bytes.data(), static_cast<int>(f->bytes.size()), MPI_BYTE, peer, tag,
                      comm_, &mpi),
            "MPI_Irecv");
      f->request = req;
    }
    requests_.push_back(mpi);
    in_flight_.push_back(std::move(f));
    progress_cv_.notify_one();
    return req;
  }

  bool wait(int /*rank*/, std::span<const RequestPtr> requests) override {
    std::unique_lock lock(mu_);
    return waiters_.wait(
        lock, 0, requests, [&] { return aborted_; }, completed);
  }

  // MPI does not say whether a message is moving; the watchdog's timeout covers one that is.
  bool quiescent() const override { return true; }

  std::size_t stuck_waiters() const override {
    std::lock_guard lock(mu_);
    return waiters_.stuck(completed);
  }

  void abort() override {
    std::lock_guard lock(mu_);
    aborted_ = true;
    waiters_.wake_all();
  }

  // Collective (every process ends its run together): receives never matched are cancelled, and
  // the messages of sends never received are taken by their peers, so that nothing is left under
  // way when the communicator goes.
  void end() override {
    stop_progress();
    if (comm_ == MPI_COMM_NULL) return;
    for (std::size_t i = 0; i < in_flight_.size(); ++i) {
      if (in_flight_[i]->send) continue;
      MPI_Cancel(&requests_[i]);
      MPI_Status status;
      MPI_Wait(&requests_[i], &status);
      int cancelled = 0;
      MPI_Test_cancelled(&status, &cancelled);
      if (!cancelled) finish(*in_flight_[i], status);  // it matched as it was being cancelled
    }
    std::vector<int> delivered(sent_to_.size()), left(sent_to_.size()), to_take(sent_to_.size());
    MPI_Alltoall(received_from_.data(), 1, MPI_INT, delivered.data(), 1, MPI_INT, comm_);
    for (std::size_t q = 0; q < left.size(); ++q) left[q] = sent_to_[q] - delivered[q];
    MPI_Alltoall(left.data(), 1, MPI_INT, to_take.data(), 1, MPI_INT, comm_);
    std::vector<std::byte> scratch;
    for (std::size_t p = 0; p < to_take.size(); ++p)
      for (int i = 0; i < to_take[p]; ++i) {
        MPI_Status status;
        MPI_Probe(static_cast<int>(p), MPI_ANY_TAG, comm_, &status);
        int n = 0;
        MPI_Get_count(&status, MPI_BYTE, &n);
        scratch.resize(static_cast<std::size_t>(std::max(n, 1)));
        MPI_Recv(scratch.data(), n, MPI_BYTE, static_cast<int>(p), status.MPI_TAG, comm_,
                 MPI_STATUS_IGNORE);
      }
    for (std::size_t i = 0; i < in_flight_.size(); ++i)
      if (in_flight_[i]->send) MPI_Wait(&requests_[i], MPI_STATUS_IGNORE);
    in_flight_.clear();
    requests_.clear();
    MPI_Comm_free(&comm_);
    comm_ = MPI_COMM_NULL;
  }

  std::vector<std::string> report() const override {
    return {
        "mpi: one process per rank; transfers are MPI messages (the modelled link times are "
        "not added)"};
  }

 private:
  // A completed MPI request: its Request completes, with the transfer's times and peer.
  void finish(InFlight& f, const MPI_Status& status) {
    const double now = ctx_->clock.now();
    if (!f.send) ++received_from_[static_cast<std::size_t>(f.peer)];
    if (!f.request) return;  // an eager message
    Request& r = *f.request;
    r.peer_rank = f.peer;
    if (f.send) {
      r.transfer_start = r.transfer_end = now;
    } else {
      int n = 0;
      MPI_Get_count(&status, MPI_BYTE, &n);
      Header h{};
      if (static_cast<std::size_t>(n) >= sizeof h) std::memcpy(&h, f.bytes.data(), sizeof h);
      r.peer_pos = h.pos;
      r.transfer_start = std::max(h.posted, f.posted);
      r.transfer_end = now;
      if (r.buffer->has_storage() && static_cast<std::size_t>(n) > sizeof h)
        r.buffer->copy_from(std::span<const std::byte>(f.bytes).subspan(
            sizeof h, static_cast<std::size_t>(n) - sizeof h));
    }
    r.complete.store(true, std::memory_order_release);
  }

  void progress_loop() {
    std::vector<int> done;
    std::vector<MPI_Status> statuses;
    std::unique_lock lock(mu_);
    while (true) {
      progress_cv_.wait(lock, [&] { return closing_ || !requests_.empty(); });
      if (closing_) return;
      const int n = static_cast<int>(requests_.size());
      done.resize(requests_.size());
      statuses.resize(requests_.size());
      int count = 0;
      MPI_Testsome(n, requests_.data(), &count, done.data(), statuses.data());
      if (count > 0 && count != MPI_UNDEFINED) {
        for (int i = 0; i < count; ++i) {
          const auto at = static_cast<std::size_t>(done[static_cast<std::size_t>(i)]);
          finish(*in_flight_[at], statuses[static_cast<std::size_t>(i)]);
        }
        // Completed ones go (their MPI requests are now MPI_REQUEST_NULL).
        std::size_t k = 0;
        for (std::size_t i = 0; i < in_flight_.size(); ++i)
          if (requests_[i] != MPI_REQUEST_NULL) {
            requests_[k] = requests_[i];
            in_flight_[k] = std::move(in_flight_[i]);
            ++k;
          }
        requests_.resize(k);
        in_flight_.resize(k);
        waiters_.wake_all();
        continue;
      }
      // Nothing completed: let the ranks and the peers' processes run for a moment.
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      lock.lock();
    }
  }

  void stop_progress() {
    {
      std::lock_guard lock(mu_);
      closing_ = true;
      progress_cv_.notify_all();
    }
    if (progress_.joinable()) progress_.join();
  }

  std::optional<TransportContext> ctx_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  bool fifo_ = false, eager_ = false;
  mutable std::mutex mu_;
  std::condition_variable progress_cv_;
  // Under way, and their MPI requests side by side (MPI_Testsome takes an array).
  std::vector<std::unique_ptr<InFlight>> in_flight_;
  std::vector<MPI_Request> requests_;
  std::vector<int> sent_to_, received_from_;  // messages, by process
  Waiters waiters_;
  bool aborted_ = false, closing_ = false;
  std::thread progress_;
};

}  // namespace

Transport* make_transport() {
  return new MpiTransport();
}

}  // namespace ppsim::real::mpi
