#include "ppsim/sim/trace.hpp"

namespace ppsim::sim {

void TraceRecorder::on_compute(int rank, int pos, double start, double end) {
  trace_.spans.push_back({rank, pos, SpanKind::compute, start, end});
}
void TraceRecorder::on_blocked(int rank, int pos, double start, double end) {
  trace_.spans.push_back({rank, pos, SpanKind::blocked, start, end});
}
void TraceRecorder::on_post(int rank, int pos, double time) {
  trace_.spans.push_back({rank, pos, SpanKind::post, time, time});
}
void TraceRecorder::on_transfer(const TransferEvent& t) {
  trace_.transfers.push_back(t);
}
void TraceRecorder::on_counter(int rank, double time, std::int64_t memory_bytes, int inflight) {
  trace_.counters.push_back({rank, time, memory_bytes, inflight});
}

}  // namespace ppsim::sim
