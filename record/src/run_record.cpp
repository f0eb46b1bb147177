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
  return {VerdictKind::ok, 0};
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
