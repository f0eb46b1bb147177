#include "ppsim/viz/summary_table.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ppsim/schedules/lowering.hpp"

namespace ppsim::viz {

namespace {

std::string human_bytes(std::int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", b) : fmt::format("{:.2f} {}", v, units[u]);
}

std::string style_of(const sim::Analysis& a) {
  if (a.config.kind == "custom")
    return fmt::format("custom/{}", sim::to_string(a.config.network.matching));
  return fmt::format("{}/{}", schedules::to_string(a.config.lowering.style),
                     sim::to_string(a.config.network.matching));
}

template <typename F>
auto max_over(const sim::SimResult& r, F f) {
  decltype(f(r.per_rank[0])) m{};
  for (const auto& x : r.per_rank) m = std::max(m, f(x));
  return m;
}

}  // namespace

std::string verdict(const sim::Analysis& a) {
  if (!a.result)
    return fmt::format("INVALID ({} error{})", a.errors.size(), a.errors.size() == 1 ? "" : "s");
  if (a.result->deadlock) {
    const auto& d = *a.result->deadlock;
    if (!d.cycles.empty())
      return fmt::format("DEADLOCK ({} cycle{})", d.cycles.size(), d.cycles.size() == 1 ? "" : "s");
    return fmt::format("HANG ({} unmatched)", d.unmatched.size());
  }
  if (!a.errors.empty()) return fmt::format("ERRORS ({})", a.errors.size());
  return "ok";
}

std::string summary_text(const sim::Analysis& a) {
  const auto& p = a.run.program;
  const auto& u = a.config.time_unit;
  std::string out =
      fmt::format("{}: {} P={} V={} S={} M={} comm={} ({} ops)\n", a.config.name, a.config.kind,
                  p.ranks(), p.chunks(), p.stages(), p.microbatches(), style_of(a), p.total_ops());
  if (a.result) {
    const auto& r = *a.result;
    out += fmt::format("  makespan         {:.4f} {}\n", r.makespan, u);
    out += fmt::format("  bubble_fraction  {:.4f}   1 - sum(busy) / (P * makespan)\n",
                       r.bubble_fraction);
    out += fmt::format("  bubble_vs_ideal  {:.4f}   (makespan - max busy) / max busy\n",
                       r.bubble_vs_ideal);
    out += fmt::format("  comm_bytes       {} ({})\n", r.comm_bytes, human_bytes(r.comm_bytes));
    out += fmt::format("  peak_inflight    {}\n",
                       max_over(r, [](const auto& m) { return m.peak_inflight; }));
    out += fmt::format("  peak_memory      {}\n",
                       human_bytes(max_over(r, [](const auto& m) { return m.peak_memory_bytes; })));
  }
  out += fmt::format("  verdict          {}\n", verdict(a));
  if (a.result) {
    out += fmt::format("\n  {:>4} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>12} {:>12} {:>12}\n",
                       "rank", "start", "end", "busy", "idle", "exposed", "inflight", "peak_mem",
                       "sent", "recv");
    for (const auto& m : a.result->per_rank) {
      out += fmt::format(
          "  {:>4} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>8} {:>12} {:>12} {:>12}\n",
          m.rank, m.start, m.end, m.busy, m.idle, m.comm_exposed, m.peak_inflight,
          m.peak_memory_bytes, m.sent_bytes, m.recv_bytes);
    }
    if (a.result->deadlock) out += fmt::format("\n{}\n", a.result->deadlock->describe());
  }
  if (!a.errors.empty()) {
    out += "\n";
    for (const auto& d : a.errors) out += fmt::format("  {}: {}\n", d.kind, d.message);
  }
  return out;
}

std::string compare_table(const std::vector<sim::Analysis>& runs) {
  std::size_t w = 4;
  for (const auto& a : runs) w = std::max(w, a.config.name.size());
  std::string out = fmt::format(
      "{:<{}} {:<17} {:>4} {:>3} {:>6} {:<14} {:>12} {:>8} {:>8} {:>8} {:>12} {:>12}  {}\n", "name",
      w, "schedule", "P", "V", "M", "comm", "makespan", "bubble", "vs_ideal", "inflight",
      "peak_mem", "comm_bytes", "verdict");
  for (const auto& a : runs) {
    const auto& p = a.run.program;
    std::string metrics =
        fmt::format("{:>12} {:>8} {:>8} {:>8} {:>12} {:>12}", "-", "-", "-", "-", "-", "-");
    if (a.result) {
      const auto& r = *a.result;
      metrics = fmt::format(
          "{:>12.3f} {:>8.4f} {:>8.4f} {:>8} {:>12} {:>12}", r.makespan, r.bubble_fraction,
          r.bubble_vs_ideal, max_over(r, [](const auto& m) { return m.peak_inflight; }),
          max_over(r, [](const auto& m) { return m.peak_memory_bytes; }), r.comm_bytes);
    }
    out += fmt::format("{:<{}} {:<17} {:>4} {:>3} {:>6} {:<14} {}  {}\n", a.config.name, w,
                       a.config.kind, p.ranks(), p.chunks(), p.microbatches(), style_of(a), metrics,
                       verdict(a));
  }
  return out;
}

std::string compare_csv(const std::vector<sim::Analysis>& runs) {
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
    const auto& p = a.run.program;
    std::string metrics = ",,,,,";
    if (a.result) {
      const auto& r = *a.result;
      metrics =
          fmt::format("{},{},{},{},{},{}", r.makespan, r.bubble_fraction, r.bubble_vs_ideal,
                      max_over(r, [](const auto& m) { return m.peak_inflight; }),
                      max_over(r, [](const auto& m) { return m.peak_memory_bytes; }), r.comm_bytes);
    }
    out += fmt::format("{},{},{},{},{},{},{},{},{}\n", quote(a.config.name), quote(a.config.kind),
                       p.ranks(), p.chunks(), p.microbatches(), style_of(a), a.config.time_unit,
                       metrics, quote(verdict(a)));
  }
  return out;
}

}  // namespace ppsim::viz
