#include "ppsim/record/observer.hpp"

namespace ppsim::record {

void ObserverList::on_begin(int ranks, bool concurrent) {
  for (auto* s : sinks_) s->on_begin(ranks, concurrent);
}
void ObserverList::on_compute(int rank, int pos, double start, double end) {
  for (auto* s : sinks_) s->on_compute(rank, pos, start, end);
}
void ObserverList::on_blocked(int rank, int pos, double start, double end) {
  for (auto* s : sinks_) s->on_blocked(rank, pos, start, end);
}
void ObserverList::on_post(int rank, int pos, double time) {
  for (auto* s : sinks_) s->on_post(rank, pos, time);
}
void ObserverList::on_transfer(const TransferEvent& t) {
  for (auto* s : sinks_) s->on_transfer(t);
}
void ObserverList::on_counter(int rank, double time, std::int64_t memory_bytes, int inflight) {
  for (auto* s : sinks_) s->on_counter(rank, time, memory_bytes, inflight);
}
void ObserverList::on_rank_end(int rank, const RankTimeline& timeline) {
  for (auto* s : sinks_) s->on_rank_end(rank, timeline);
}
void ObserverList::on_end() {
  for (auto* s : sinks_) s->on_end();
}

void TraceRecorder::on_begin(int ranks, bool concurrent) {
  per_rank_.assign(concurrent ? static_cast<std::size_t>(ranks) : 0, {});
  trace_.ranks.assign(static_cast<std::size_t>(ranks), {});
}
void TraceRecorder::on_compute(int rank, int pos, double start, double end) {
  add(rank, [&](auto& spans, auto&, auto&) {
    spans.push_back({rank, pos, SpanKind::compute, start, end});
  });
}
void TraceRecorder::on_blocked(int rank, int pos, double start, double end) {
  add(rank, [&](auto& spans, auto&, auto&) {
    spans.push_back({rank, pos, SpanKind::blocked, start, end});
  });
}
void TraceRecorder::on_post(int rank, int pos, double time) {
  add(rank, [&](auto& spans, auto&, auto&) {
    spans.push_back({rank, pos, SpanKind::post, time, time});
  });
}
void TraceRecorder::on_transfer(const TransferEvent& t) {
  add(t.dst_rank, [&](auto&, auto& transfers, auto&) { transfers.push_back(t); });
}
void TraceRecorder::on_counter(int rank, double time, std::int64_t memory_bytes, int inflight) {
  add(rank, [&](auto&, auto&, auto& counters) {
    counters.push_back({rank, time, memory_bytes, inflight});
  });
}
void TraceRecorder::on_rank_end(int rank, const RankTimeline& timeline) {
  trace_.ranks[static_cast<std::size_t>(rank)] = timeline;
}
void TraceRecorder::on_end() {
  for (auto& r : per_rank_) {
    trace_.spans.insert(trace_.spans.end(), r.spans.begin(), r.spans.end());
    trace_.transfers.insert(trace_.transfers.end(), r.transfers.begin(), r.transfers.end());
    trace_.counters.insert(trace_.counters.end(), r.counters.begin(), r.counters.end());
    r = {};  // free as we go
  }
  per_rank_.clear();
}

}  // namespace ppsim::record
