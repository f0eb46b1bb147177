#pragma once
// Sinks of a run's events. A producer (the simulator, the executor) calls them while it runs; a
// metrics-only run passes none and nothing per op is kept.
//
// Contract, for producers with one thread per rank as well as for single-threaded ones:
//  - on_begin is called once before any other callback, on_end once after all of them, both from
//    the thread that started the run;
//  - every other callback is about one rank (its first argument, or dst_rank for a transfer) and
//    is called only from the thread that runs that rank, never concurrently for the same rank;
//  - callbacks for one rank come in the order the rank's ops were issued.
// So an observer that keeps one buffer per rank needs no locks. on_begin says whether ranks may
// call concurrently; a single-threaded producer (the simulator) says no, and sinks may then keep
// one buffer for all ranks, in the order the events happened.
#include <cstdint>
#include <vector>

#include "ppsim/record/trace.hpp"

namespace ppsim::record {

class Observer {
 public:
  virtual ~Observer() = default;
  virtual void on_begin(int /*ranks*/, bool /*concurrent*/) {}
  virtual void on_compute(int /*rank*/, int /*pos*/, double /*start*/, double /*end*/) {}
  virtual void on_blocked(int /*rank*/, int /*pos*/, double /*start*/, double /*end*/) {}
  virtual void on_post(int /*rank*/, int /*pos*/, double /*time*/) {}
  virtual void on_transfer(const TransferEvent& /*transfer*/) {}
  virtual void on_counter(int /*rank*/, double /*time*/, std::int64_t /*memory_bytes*/,
                          int /*inflight*/) {}
  // How each rank ended (called for every rank before on_end).
  virtual void on_rank_end(int /*rank*/, const RankTimeline& /*timeline*/) {}
  virtual void on_end() {}
};

// Several sinks at once, called in the order they were added.
class ObserverList : public Observer {
 public:
  void add(Observer* o) {
    if (o) sinks_.push_back(o);
  }
  bool empty() const { return sinks_.empty(); }
  // nullptr when there is no sink, so producers keep their metrics-only fast path.
  Observer* get() { return sinks_.empty() ? nullptr : sinks_.size() == 1 ? sinks_[0] : this; }

  void on_begin(int ranks, bool concurrent) override;
  void on_compute(int rank, int pos, double start, double end) override;
  void on_blocked(int rank, int pos, double start, double end) override;
  void on_post(int rank, int pos, double time) override;
  void on_transfer(const TransferEvent& t) override;
  void on_counter(int rank, double time, std::int64_t memory_bytes, int inflight) override;
  void on_rank_end(int rank, const RankTimeline& timeline) override;
  void on_end() override;

 private:
  std::vector<Observer*> sinks_;
};

// Fills a Trace. From a concurrent producer it keeps one buffer per rank and joins them at on_end
// (ranks one after another); from a single-threaded one it appends in event order.
class TraceRecorder : public Observer {
 public:
  explicit TraceRecorder(Trace& trace) : trace_(trace) {}
  void on_begin(int ranks, bool concurrent) override;
  void on_compute(int rank, int pos, double start, double end) override;
  void on_blocked(int rank, int pos, double start, double end) override;
  void on_post(int rank, int pos, double time) override;
  void on_transfer(const TransferEvent& t) override;
  void on_counter(int rank, double time, std::int64_t memory_bytes, int inflight) override;
  void on_rank_end(int rank, const RankTimeline& timeline) override;
  void on_end() override;

 private:
  struct PerRank {
    std::vector<Span> spans;
    std::vector<TransferEvent> transfers;
    std::vector<CounterSample> counters;
  };
  template <typename Fn>
  void add(int rank, Fn&& fn) {
    if (per_rank_.empty())
      fn(trace_.spans, trace_.transfers, trace_.counters);
    else {
      PerRank& b = per_rank_[static_cast<std::size_t>(rank)];
      fn(b.spans, b.transfers, b.counters);
    }
  }
  Trace& trace_;
  std::vector<PerRank> per_rank_;  // empty: events go straight into the trace
};

}  // namespace ppsim::record
