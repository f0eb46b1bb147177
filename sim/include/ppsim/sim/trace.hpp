#pragma once
// The timeline of one run (simulated here, measured by real/ later), in one schema for all writers.
#include <cstdint>
#include <string>
#include <vector>

#include "ppsim/schedules/program.hpp"
#include "ppsim/sim/observer.hpp"

namespace ppsim::sim {

enum class SpanKind : std::uint8_t { compute, blocked, post };

struct Span {
  int rank;
  int pos;  // index into the program's op list for that rank
  SpanKind kind;
  double start, end;
};

struct CounterSample {
  int rank;
  double time;
  std::int64_t memory_bytes;
  int inflight;
};

struct Trace {
  std::string time_unit = "ms";
  std::vector<Span> spans;
  std::vector<TransferEvent> transfers;
  std::vector<CounterSample> counters;
};

// Observer that fills a Trace.
class TraceRecorder : public Observer {
 public:
  explicit TraceRecorder(Trace& trace) : trace_(trace) {}
  void on_compute(int rank, int pos, double start, double end) override;
  void on_blocked(int rank, int pos, double start, double end) override;
  void on_post(int rank, int pos, double time) override;
  void on_transfer(const TransferEvent& t) override;
  void on_counter(int rank, double time, std::int64_t memory_bytes, int inflight) override;

 private:
  Trace& trace_;
};

}  // namespace ppsim::sim
