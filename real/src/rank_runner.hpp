#pragma once
// One rank of one run (internal to real/): issues the rank's ops in program order through the
// transport and the compute, keeps its buffers and its accounting, and reports its events to the
// trace from its own thread.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ppsim/model/model.hpp"
#include "ppsim/real/buffer.hpp"
#include "ppsim/real/clock.hpp"
#include "ppsim/real/compute.hpp"
#include "ppsim/real/transport.hpp"
#include "ppsim/record/observer.hpp"
#include "ppsim/record/wait_graph.hpp"
#include "ppsim/schedules/diagnostic.hpp"
#include "ppsim/schedules/semantics.hpp"

namespace ppsim::real::detail {

enum class RankStatus : int { running, blocked, done, stopped };

// What every rank of one run shares.
struct RunShared {
  const schedules::Program& program;
  const schedules::Semantics& semantics;
  const model::Model& model;
  Transport& transport;
  Compute& compute;
  RunClock clock;
  double unit_seconds;  // wall seconds per time unit of the trace
  double tie_window;    // wall seconds within which two events count as one instant
  double memory_scale;
  std::uint64_t iteration;
  record::Observer* observer;
  std::atomic<bool> cancel{false};
  std::atomic<std::uint64_t> progress{0};  // ops done and posts, over all ranks
  std::mutex failure_mu{};
  std::string failure{};  // the first rank that threw
};

class RankRunner {
 public:
  RankRunner(RunShared& run, int rank);
  void run() noexcept;  // the thread's body
  int rank() const { return rank_; }

  RankStatus status() const { return status_.load(std::memory_order_acquire); }
  // The compute op this rank is in, when it has run past its budget at run-clock second `now`:
  // max(hang_timeout, 10 x its modelled wall time). The message names the rank and the op.
  std::optional<std::string> overdue(double now, double hang_timeout) const;
  // After the thread has ended:
  const record::RankTimeline& timeline() const { return timeline_; }
  std::vector<schedules::Diagnostic>& diagnostics() { return diagnostics_; }
  // Reports the receives that completed and were never looked at: from finish_rank(), and again
  // once every rank has ended, for a message a peer sent after this rank had finished (a
  // receive never waited).
  void report_unseen_transfers();
  // The wait-for edges of the op it stopped in (none when it finished).
  std::vector<record::WaitEdge> wait_edges() const;
  std::int64_t real_peak() const { return allocator_.real_peak() + static_allocator_.real_peak(); }

 private:
  struct Live {  // a request and what the rank knows of it
    RequestPtr request;
    bool reported = false;             // its transfer went to the observer
    bool release_when_waited = false;  // its buffer was dropped while it was not waited
  };

  void issue_all();
  void run_compute(int pos, const schedules::Op& op);
  void run_p2p(int pos, const schedules::Op& op);
  bool run_wait(int pos, const schedules::Op& op);
  bool block(int pos, std::span<const RequestPtr> requests, double since);
  void completed(Live& live);  // a request seen complete: its transfer, its data
  void waited(Live& live);
  void finish_rank();

  double now() const { return run_.clock.now() / run_.unit_seconds; }
  void counter(double t);
  void reap(double t, bool wait_for_ties = true);
  std::shared_ptr<Buffer> allocate(schedules::TensorId tensor, std::int64_t bytes, double t);
  void release(Buffer& buffer, const std::string& by, double t);
  void release_now(Buffer& buffer, const std::string& by, double t);  // without reaping first
  void stash(int microbatch, int delta, double t);
  void hazard(std::string kind, int pos, std::string message);
  std::string op_text(int pos) const;
  bool nccl() const { return run_.model.network.semantics == model::P2pSemantics::nccl; }
  Live* live_of_tensor(std::unordered_map<std::size_t, Live*>& table, const schedules::TensorId& t);

  RunShared& run_;
  const int rank_;
  const std::span<const schedules::Op> ops_;
  Allocator allocator_, static_allocator_;
  std::unique_ptr<Buffer> static_;
  std::atomic<RankStatus> status_{RankStatus::running};
  // The compute op under way, for the watchdog: its position (-1: none), when it was called
  // (run-clock seconds) and its modelled wall time (seconds).
  std::atomic<int> computing_pos_{-1};
  std::atomic<double> computing_since_{0}, computing_expected_{0};

  std::vector<std::unique_ptr<Live>> requests_;  // in post order
  std::unordered_map<std::int32_t, Live*> by_id_;
  std::unordered_map<std::size_t, Live*> recv_of_, send_f_of_;        // by tensor index
  std::unordered_map<std::size_t, std::shared_ptr<Buffer>> stashes_;  // by (stage, mb) cell
  std::unordered_map<int, std::uint32_t> stash_count_;                // by microbatch
  std::vector<Live*> frees_when_sent_;  // sends whose storage goes once transferred
  int inflight_ = 0;
  std::int64_t reported_live_ = 0;

  record::RankTimeline timeline_;
  double blocked_since_ = 0, last_end_ = 0;
  double blocked_since_compute_ = 0;  // time units blocked since the last compute op ended
  int stopped_pos_ = -1;
  std::vector<RequestPtr> stopped_on_;  // the requests of the op it stopped in
  // nccl: for each of them, the ops of the kernel it was queued behind (none: it was running)
  std::vector<std::vector<schedules::Op>> stopped_behind_;
  std::vector<schedules::Diagnostic> diagnostics_;
};

}  // namespace ppsim::real::detail
