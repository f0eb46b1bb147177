#include "ppsim/viz/summary_table.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ppsim/base/excerpt.hpp"
#include "ppsim/base/human_bytes.hpp"

namespace ppsim::viz {

namespace {
// A name or path from the input, shown whole on a terminal: control characters and bytes that
// are not UTF-8 as \xNN (a name holding ESC or CR could otherwise redraw a FAIL line as "ok").
std::string shown(const std::string& text) {
  return base::excerpt(text, std::string::npos);
}
}  // namespace

std::string summary_text(const record::RunRecord& a) {
  const auto& p = *a.program;
  const auto& u = a.info.time_unit;
  std::string out = fmt::format("{}: {} P={} V={} S={} M={} comm={} ({} ops)\n", shown(a.info.name),
                                a.info.schedule, p.ranks(), p.chunks(), p.stages(),
                                p.microbatches(), a.info.comm_label(), p.total_ops());
  if (a.metrics) {
    const auto& r = *a.metrics;
    out += fmt::format("  makespan         {:.4f} {}\n", r.makespan, u);
    if (a.step) {
      const record::StepSummary& st = a.step->summary;
      out += fmt::format(
          "  step_time        {:.4f} s   the whole step: {:.4g} tokens/s, {:.4g} TFLOP/s per GPU, "
          "MFU {:.1f}%\n",
          st.time, st.tokens_per_second, st.tflops_per_gpu, st.mfu * 100);
    }
    out += fmt::format("  bubble_fraction  {:.4f}   1 - sum(busy) / (P * makespan)\n",
                       r.bubble_fraction);
    out += fmt::format("  bubble_vs_ideal  {:.4f}   (makespan - max busy) / max busy\n",
                       r.bubble_vs_ideal);
    out +=
        fmt::format("  comm_bytes       {} ({})\n", r.comm_bytes, base::human_bytes(r.comm_bytes));
    out += fmt::format("  peak_inflight    {}\n", r.peak_inflight);
    out += fmt::format("  peak_memory      {}\n", base::human_bytes(r.peak_memory_bytes));
  }
  out += fmt::format("  verdict          {}\n", a.verdict().text());
  if (a.metrics) {
    out += fmt::format("\n  {:>4} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>12} {:>12} {:>12}\n",
                       "rank", "start", "end", "busy", "idle", "exposed", "inflight", "peak_mem",
                       "sent", "recv");
    for (const auto& m : a.metrics->per_rank) {
      out += fmt::format(
          "  {:>4} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>8} {:>12} {:>12} {:>12}\n",
          m.rank, m.start, m.end, m.busy, m.idle, m.comm_exposed, m.peak_inflight,
          m.peak_memory_bytes, m.sent_bytes, m.recv_bytes);
    }
    if (a.deadlock) out += fmt::format("\n{}\n", a.deadlock->describe());
    if (!a.out_of_memory.empty()) out += "\n";
    for (const auto& o : a.out_of_memory) out += fmt::format("  out of memory: {}\n", o.describe());
  }
  if (!a.diagnostics.empty()) {
    out += "\n";
    for (const auto& d : a.diagnostics) out += fmt::format("  {}: {}\n", d.kind, d.message);
  }
  return out;
}

std::string check_text(const record::RunRecord& a, const std::string& path,
                       const schedules::OpLocator& locate, bool overridden) {
  const std::string name = overridden ? fmt::format("{}; ran: {}, {}", shown(a.info.name),
                                                    a.info.schedule, a.info.comm_label())
                                      : shown(a.info.name);
  if (a.ok()) return fmt::format("ok    {} ({})\n", shown(path), name);
  auto where = [&](int rank, int position) -> std::string {
    if (!locate || rank < 0 || position < 0) return "";
    const auto at = locate(rank, position);
    return at ? fmt::format(" [{}]", at->where) : "";
  };
  std::string out = fmt::format("FAIL  {} ({}): {}\n", shown(path), name, a.verdict().text());
  if (a.deadlock) {
    // Each line indented, built in one pass (replacing in place moved the tail once per line).
    const std::string d = a.deadlock->describe();
    out += "      ";
    for (const char c : d) {
      out += c;
      if (c == '\n') out += "      ";
    }
    out += "\n";
    // The cycle's words name the ops; these lines say where they are in the rank's list.
    auto stuck = [&](const record::BlockedOp& b) {
      out += fmt::format("      stuck: rank {} op {} ({}){}", b.rank, b.position, b.op,
                         where(b.rank, b.position));
      if (!b.waiting_for.empty()) out += fmt::format(" waits on {}", b.waiting_for);
      out += b.peer >= 0 ? fmt::format(", needs rank {}\n", b.peer) : "\n";
    };
    for (const auto& cycle : a.deadlock->cycles)
      for (const auto& b : cycle) stuck(b);
    for (const auto& b : a.deadlock->unmatched) stuck(b);
    for (const auto& b : a.deadlock->blocked) stuck(b);
  }
  for (const auto& e : a.diagnostics)
    out += fmt::format("      {}: {}{}\n", e.kind, e.message, where(e.rank, e.position));
  for (const auto& o : a.out_of_memory)
    out += fmt::format("      out of memory: {}\n", o.describe());
  return out;
}

std::string lowering_stall(const record::RunRecord& a) {
  if (!a.metrics || !a.send_hold || !a.ok() ||
      a.send_hold->time <= kStallShare * a.metrics->makespan)
    return "";
  const auto& info = a.info;
  std::string hint;
  if (!info.default_lowering.empty() && info.lowering != info.default_lowering)
    hint =
        fmt::format("; try comm.style unset, the schedule's default ({})", info.default_lowering);
  else if (info.comm_style == "async" && info.lowering.find("prefetch all") == std::string::npos)
    hint = "; try comm.prefetch=all";
  return fmt::format(
      "stalled by the lowering: {:.3g} {} blocked (rank {} waited for its sends' receivers with "
      "its next op ready: {:.0f}% of the makespan){}",
      a.send_hold->time, info.time_unit, a.send_hold->rank,
      100 * a.send_hold->time / a.metrics->makespan, hint);
}

std::string compare_table(const std::vector<record::RunRecord>& runs) {
  std::size_t w = 4;
  bool steps = false;  // a config with a `model` section: the whole step's seconds too
  for (const auto& a : runs) {
    w = std::max(w, shown(a.info.name).size());
    steps = steps || a.step.has_value();
  }
  std::string out = fmt::format(
      "{:<{}} {:<17} {:>4} {:>3} {:>6} {:<14} {:>12}{} {:>8} {:>8} {:>8} {:>12} {:>12}  {}\n",
      "name", w, "schedule", "P", "V", "M", "comm", "makespan",
      steps ? fmt::format(" {:>10}", "step_s") : "", "bubble", "vs_ideal", "inflight", "peak_mem",
      "comm_bytes", "verdict");
  std::vector<std::string> notes;
  for (const auto& a : runs) {
    const auto& p = *a.program;
    const std::string step_col = !steps   ? ""
                                 : a.step ? fmt::format(" {:>10.4f}", a.step->summary.time)
                                          : fmt::format(" {:>10}", "-");
    std::string metrics = fmt::format("{:>12}{} {:>8} {:>8} {:>8} {:>12} {:>12}", "-", step_col,
                                      "-", "-", "-", "-", "-");
    if (a.metrics) {
      const auto& r = *a.metrics;
      metrics = fmt::format("{:>12.3f}{} {:>8.4f} {:>8.4f} {:>8} {:>12} {:>12}", r.makespan,
                            step_col, r.bubble_fraction, r.bubble_vs_ideal, r.peak_inflight,
                            r.peak_memory_bytes, r.comm_bytes);
    }
    std::string verdict = a.verdict().text();
    if (std::string stall = lowering_stall(a); !stall.empty()) {
      notes.push_back(fmt::format("[{}] {}: {}", notes.size() + 1, shown(a.info.name), stall));
      verdict += fmt::format(" [{}]", notes.size());
    }
    out += fmt::format("{:<{}} {:<17} {:>4} {:>3} {:>6} {:<14} {}  {}\n", shown(a.info.name), w,
                       a.info.schedule, p.ranks(), p.chunks(), p.microbatches(),
                       a.info.comm_label(), metrics, verdict);
  }
  for (const auto& note : notes) out += note + "\n";
  return out;
}

std::string compare_csv(const std::vector<record::RunRecord>& runs) {
  std::string out =
      "name,schedule,ranks,chunks,microbatches,comm,time_unit,makespan,bubble_fraction,bubble_vs_"
      "ideal,"
      "peak_inflight,peak_memory_bytes,comm_bytes,verdict\n";
  auto quote = [](const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  for (const auto& a : runs) {
    const auto& p = *a.program;
    std::string metrics = ",,,,,";
    if (a.metrics) {
      const auto& r = *a.metrics;
      metrics = fmt::format("{},{},{},{},{},{}", r.makespan, r.bubble_fraction, r.bubble_vs_ideal,
                            r.peak_inflight, r.peak_memory_bytes, r.comm_bytes);
    }
    out += fmt::format("{},{},{},{},{},{},{},{},{}\n", quote(a.info.name), quote(a.info.schedule),
                       p.ranks(), p.chunks(), p.microbatches(), a.info.comm_label(),
                       a.info.time_unit, metrics, quote(a.verdict().text()));
  }
  return out;
}

}  // namespace ppsim::viz
