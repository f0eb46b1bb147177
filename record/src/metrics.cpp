#include "ppsim/record/metrics.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace ppsim::record {

namespace {

// Byte sums are checked: config::check_numbers bounds what a simulated run can reach, but a
// measured trace comes from outside.
void add_bytes(std::int64_t& sum, std::int64_t bytes) {
  if (__builtin_add_overflow(sum, bytes, &sum))
    throw std::overflow_error("a byte sum of the trace overflows 64 bits");
}

}  // namespace

void RunMetrics::summarize() {
  const int R = static_cast<int>(per_rank.size());
  double first = std::numeric_limits<double>::infinity(), last = 0;
  for (const auto& m : per_rank) {
    first = std::min(first, m.start);
    last = std::max(last, m.end);
  }
  if (R == 0) first = 0;
  makespan = last - first;
  double sum_busy = 0, max_busy = 0;
  ops_executed = 0;
  peak_memory_bytes = 0;
  peak_inflight = 0;
  for (auto& m : per_rank) {
    m.idle = makespan - m.busy;
    sum_busy += m.busy;
    max_busy = std::max(max_busy, m.busy);
    ops_executed += m.ops_done;
    peak_memory_bytes = std::max(peak_memory_bytes, m.peak_memory_bytes);
    peak_inflight = std::max(peak_inflight, m.peak_inflight);
  }
  bubble_fraction = makespan > 0 ? 1.0 - sum_busy / (R * makespan) : 0.0;
  bubble_vs_ideal = max_busy > 0 ? (makespan - max_busy) / max_busy : 0.0;
}

RunMetrics compute_metrics(const Trace& trace, const schedules::Program& program) {
  RunMetrics out;
  const int R = program.ranks();
  out.per_rank.resize(static_cast<std::size_t>(R));
  std::vector<std::int64_t> peak_dynamic(static_cast<std::size_t>(R), 0);
  for (int r = 0; r < R; ++r) {
    RankMetrics& m = out.per_rank[static_cast<std::size_t>(r)];
    m.rank = r;
    if (static_cast<std::size_t>(r) < trace.ranks.size()) {
      m.start = trace.ranks[static_cast<std::size_t>(r)].start;
      m.end = trace.ranks[static_cast<std::size_t>(r)].end;
    }
  }
  for (const Span& s : trace.spans) {
    RankMetrics& m = out.per_rank[static_cast<std::size_t>(s.rank)];
    ++m.ops_done;
    if (s.kind == SpanKind::compute)
      m.busy += s.end - s.start;
    else if (s.kind == SpanKind::blocked)
      m.comm_exposed += s.end - s.start;
  }
  for (const TransferEvent& t : trace.transfers) {
    add_bytes(out.per_rank[static_cast<std::size_t>(t.src_rank)].sent_bytes, t.bytes);
    add_bytes(out.per_rank[static_cast<std::size_t>(t.dst_rank)].recv_bytes, t.bytes);
    add_bytes(out.comm_bytes, t.bytes);
  }
  for (const CounterSample& c : trace.counters) {
    auto& peak = peak_dynamic[static_cast<std::size_t>(c.rank)];
    peak = std::max(peak, c.memory_bytes);
    RankMetrics& m = out.per_rank[static_cast<std::size_t>(c.rank)];
    m.peak_inflight = std::max(m.peak_inflight, c.inflight);
  }
  for (int r = 0; r < R; ++r) {
    const std::int64_t fixed = static_cast<std::size_t>(r) < trace.ranks.size()
                                   ? trace.ranks[static_cast<std::size_t>(r)].static_bytes
                                   : 0;
    std::int64_t& peak = out.per_rank[static_cast<std::size_t>(r)].peak_memory_bytes;
    peak = peak_dynamic[static_cast<std::size_t>(r)];
    add_bytes(peak, fixed);
    out.per_rank[static_cast<std::size_t>(r)].peak_static_bytes = fixed;
  }
  out.summarize();
  return out;
}

}  // namespace ppsim::record
