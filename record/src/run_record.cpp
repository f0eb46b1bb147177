#include "ppsim/record/run_record.hpp"

#include <fmt/format.h>

namespace ppsim::record {

std::string RunInfo::comm_label() const {
  return comm_style + "/" + (semantics == "nccl" ? semantics : matching);
}

std::string RunInfo::style_title() const {
  return semantics == "nccl" ? comm_style + ", nccl" : comm_style;
}

std::string Verdict::text() const {
  const char* s = count == 1 ? "" : "s";
  switch (kind) {
    case VerdictKind::ok:
      return "ok";
    case VerdictKind::errors:
      return fmt::format("ERRORS ({})", count);
    case VerdictKind::deadlock:
      return fmt::format("DEADLOCK ({} cycle{})", count, s);
    case VerdictKind::hang:
      return fmt::format("HANG ({} unmatched)", count);
    case VerdictKind::invalid:
      return fmt::format("INVALID ({} error{})", count, s);
    case VerdictKind::out_of_memory:
      return fmt::format("OUT_OF_MEMORY ({} rank{})", count, s);
  }
  return "?";
}

Verdict RunRecord::verdict() const {
  if (!metrics) return {VerdictKind::invalid, diagnostics.size()};
  if (deadlock) {
    if (!deadlock->cycles.empty()) return {VerdictKind::deadlock, deadlock->cycle_count()};
    return {VerdictKind::hang, deadlock->unmatched.size()};
  }
  if (!diagnostics.empty()) return {VerdictKind::errors, diagnostics.size()};
  if (!out_of_memory.empty()) return {VerdictKind::out_of_memory, out_of_memory.size()};
  return {VerdictKind::ok, 0};
}

std::string OutOfMemory::describe() const {
  // Decimal GB as the GPU datasheets give memory, with bytes for the exact figures.
  auto gb = [](std::int64_t b) { return fmt::format("{:.2f} GB", static_cast<double>(b) / 1e9); };
  const std::string parts =
      split ? fmt::format("static {}, activations {}, buffers {}", gb(static_bytes),
                          gb(activation_bytes), gb(buffer_bytes))
            : fmt::format("static {}, activations and buffers {}", gb(static_bytes),
                          gb(activation_bytes));
  return fmt::format("rank {} peaks at {} ({} bytes), above its memory of {} ({} bytes): {}", rank,
                     gb(peak), peak, gb(limit), limit, parts);
}

std::vector<OutOfMemory> out_of_memory(const RunMetrics& metrics, std::int64_t limit, bool split) {
  std::vector<OutOfMemory> out;
  if (limit <= 0) return out;
  for (const RankMetrics& m : metrics.per_rank) {
    if (m.peak_memory_bytes <= limit) continue;
    const std::int64_t rest = m.peak_memory_bytes - m.peak_static_bytes;
    out.push_back({m.rank, m.peak_memory_bytes, limit, m.peak_static_bytes,
                   split ? m.peak_activation_bytes : rest,
                   split ? rest - m.peak_activation_bytes : 0, split});
  }
  return out;
}

std::string Deadlock::describe() const {
  auto one = [](const BlockedOp& b) {
    std::string s = fmt::format("rank {} blocked in {}", b.rank, b.op);
    if (!b.waiting_for.empty()) s += fmt::format(" on {}", b.waiting_for);
    return b.peer >= 0 ? s + fmt::format(" -> rank {}", b.peer) : s;
  };
  std::vector<std::string> parts;
  for (const auto& c : cycles) {
    std::vector<std::string> ops;
    for (const auto& b : c) ops.push_back(one(b));
    parts.push_back(fmt::format("cycle: {}", fmt::join(ops, "; ")));
  }
  if (cut())
    parts.push_back(fmt::format("(cut: {} more cycle{} not listed)", cycle_count() - cycles.size(),
                                cycle_count() - cycles.size() == 1 ? "" : "s"));
  for (const auto& b : unmatched)
    parts.push_back(fmt::format("unmatched: {} (rank {} has finished)", one(b), b.peer));
  for (const auto& b : blocked) parts.push_back(fmt::format("waiting: {}", one(b)));
  return fmt::format("{}", fmt::join(parts, "\n"));
}

}  // namespace ppsim::record
