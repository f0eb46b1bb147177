#pragma once
// Hooks the engine calls while it runs; a metrics-only run passes no observer and records nothing.
#include <cstdint>

namespace ppsim::sim {

struct TransferEvent {
  int src_rank, src_pos;  // the send op
  int dst_rank, dst_pos;  // the receive op
  double start, end;
  std::int64_t bytes;
};

class Observer {
 public:
  virtual ~Observer() = default;
  // A compute op ran on [start, end).
  virtual void on_compute(int /*rank*/, int /*pos*/, double /*start*/, double /*end*/) {}
  // A blocking comm op or WAIT held the rank on [start, end) (end == start when it did not block).
  virtual void on_blocked(int /*rank*/, int /*pos*/, double /*start*/, double /*end*/) {}
  // An asynchronous send or receive was posted.
  virtual void on_post(int /*rank*/, int /*pos*/, double /*time*/) {}
  virtual void on_transfer(const TransferEvent& /*transfer*/) {}
  // Memory or in-flight count of a rank changed at `time`.
  virtual void on_counter(int /*rank*/, double /*time*/, std::int64_t /*memory_bytes*/,
                          int /*inflight*/) {}
};

}  // namespace ppsim::sim
