#include "ppsim/viz/terminal_timeline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ticks.hpp"

namespace ppsim::viz {

namespace {

using schedules::OpKind;

// What one column of a rank's line shows: the category that takes most of its time.
// 0..4: F B I W X of chunk 0; 5..9: the same kinds of later chunks; then blocked, idle.
constexpr int kKinds = 5, kBlocked = 10, kIdle = 11, kCats = 12;
constexpr std::string_view kChars = "FBIWXfbiwx-.";

int kind_index(OpKind k) {
  const int i = schedules::plain_compute_index(k);
  return i >= 0 ? i : 4;  // 4: OVERLAP_F_B
}

// ANSI SGR per category: kind colours as in palette.hpp (blue, green, orange~yellow, purple, red),
// later chunks on the bright variant of the same background.
constexpr std::array<std::string_view, kCats> kSgr = {"44;97",  "42;97",  "43;30",  "45;97",
                                                      "41;97",  "104;30", "102;30", "103;30",
                                                      "105;30", "101;30", "2",      ""};
constexpr std::string_view kStuckSgr = "1;31";

using detail::nice_step;

// Adds `amount` of [a, b) to each column it overlaps.
void spread(std::vector<std::array<double, kCats>>& cols, int cat, double a, double b, double dt) {
  if (!(b > a)) return;
  const int n = static_cast<int>(cols.size());
  int c = std::clamp(static_cast<int>(a / dt), 0, n - 1);
  const int last = std::clamp(static_cast<int>(b / dt), 0, n - 1);
  for (; c <= last; ++c) {
    const double lo = std::max(a, c * dt), hi = std::min(b, (c + 1) * dt);
    if (hi > lo) cols[static_cast<std::size_t>(c)][static_cast<std::size_t>(cat)] += hi - lo;
  }
}

// The picture's frame: its columns, their span of time, the labels' width.
struct Frame {
  int ranks = 0, label_w = 0, ncols = 0;
  double dt = 0, t_end = 0;
  bool deadlocked = false;
  std::string indent;  // under the labels
};

void paint(std::string& line, char ch, std::string_view sgr, std::string_view& current,
           bool color) {
  if (color && sgr != current) {
    line += "\x1b[0m";
    if (!sgr.empty()) line += fmt::format("\x1b[{}m", sgr);
    current = sgr;
  }
  line += ch;
}

// Rank r's line: each column the category that takes most of its time, `!` from where it blocked
// for good.
std::string rank_line(const record::RunRecord& rec, const Frame& f, int r,
                      const std::vector<const record::Span*>& spans, bool color) {
  const auto& program = *rec.program;
  const auto& rt = rec.trace->ranks[static_cast<std::size_t>(r)];
  std::vector<std::array<double, kCats>> cols(static_cast<std::size_t>(f.ncols));
  double stuck_since = -1;
  for (const record::Span* sp : spans) {
    const auto& s = *sp;
    if (s.pos < 0 || static_cast<std::size_t>(s.pos) >= program.ops(r).size())
      throw std::invalid_argument(fmt::format(
          "terminal timeline: a span names op {} of rank {}, which the program does not have",
          s.pos, r));
    if (!rt.finished && s.pos == rt.stuck_pos) stuck_since = s.start;
    if (s.kind == record::SpanKind::blocked) {
      spread(cols, kBlocked, s.start, s.end, f.dt);
    } else if (s.kind == record::SpanKind::compute) {
      const auto& op = program.ops(r)[static_cast<std::size_t>(s.pos)];
      const auto& head =
          schedules::is_composite(op.kind) && op.list_size > 0 ? program.parts(r, op).front() : op;
      const int cat = kind_index(op.kind) + (program.place(head.stage).chunk > 0 ? kKinds : 0);
      spread(cols, cat, s.start, s.end, f.dt);
    }
  }
  if (!rt.finished && stuck_since < 0) stuck_since = rt.end;
  std::string line = fmt::format("{:>{}}", fmt::format("rank {}", r), f.label_w - 1) + " |";
  std::string_view current;
  for (int c = 0; c < f.ncols; ++c) {
    auto& col = cols[static_cast<std::size_t>(c)];
    const double t0 = c * f.dt, t1 = (c + 1) * f.dt;
    if (!rt.finished && t1 > stuck_since) {
      paint(line, '!', kStuckSgr, current, color);
      continue;
    }
    double used = 0;
    for (int k = 0; k < kIdle; ++k) used += col[static_cast<std::size_t>(k)];
    col[kIdle] = std::max(0.0, (t1 - t0) - used);
    const auto best =
        static_cast<std::size_t>(std::max_element(col.begin(), col.end()) - col.begin());
    paint(line, kChars[best], kSgr[best], current, color);
  }
  if (color && !current.empty()) line += "\x1b[0m";
  return line + "|\n";
}

// The axis: a tick at each column boundary b = t / dt (b = 0 under the opening '|', b = ncols
// under the closing one), labels under the ticks where they fit, then the unit if the line has
// room (`unit_on_axis`).
std::string axis(const Frame& f, const std::string& time_unit, int width, bool& unit_on_axis) {
  const std::size_t n = static_cast<std::size_t>(f.ncols) + 1;
  std::string ticks(n, '-');
  ticks.front() = ticks.back() = '+';
  std::string labels(n, ' ');
  const double step = nice_step(f.t_end, std::max(2, f.ncols / 12));
  std::size_t next_free = 0;
  for (int k = 0;; ++k) {
    const double t = k * step;
    if (t > f.t_end * (1 + 1e-9)) break;
    const auto b = static_cast<std::size_t>(std::min<long>(f.ncols, std::lround(t / f.dt)));
    ticks[b] = '+';
    const std::string text = fmt::format("{:g}", t);
    if (b >= next_free && b + text.size() <= n) {
      labels.replace(b, text.size(), text);
      next_free = b + text.size() + 1;
    }
  }
  while (!labels.empty() && labels.back() == ' ') labels.pop_back();
  const std::string unit = " " + time_unit;
  unit_on_axis = static_cast<int>(f.label_w + labels.size() + unit.size()) <= width;
  if (unit_on_axis) labels += unit;
  return f.indent + ticks + "\n" + f.indent + labels + "\n";
}

// The legend, only for the kinds that occur, wrapped to the width.
std::string legend(const record::RunRecord& rec, const Frame& f, int width, bool unit_on_axis) {
  const auto& trace = *rec.trace;
  const auto& program = *rec.program;
  std::array<bool, kCats> seen{};
  for (const auto& s : trace.spans)
    if (s.kind == record::SpanKind::compute && s.rank >= 0 && s.rank < f.ranks) {
      const auto& op = program.ops(s.rank)[static_cast<std::size_t>(s.pos)];
      seen[static_cast<std::size_t>(kind_index(op.kind))] = true;
    }
  std::vector<std::string> items;
  if (!unit_on_axis) items.push_back("time in " + trace.time_unit);
  constexpr std::array<std::string_view, kKinds> kNames = {"forward", "backward", "input-grad",
                                                           "weight-grad", "F&B overlapped"};
  for (int k = 0; k < kKinds; ++k)
    if (seen[static_cast<std::size_t>(k)])
      items.push_back(fmt::format("{} {}", kChars[static_cast<std::size_t>(k)],
                                  kNames[static_cast<std::size_t>(k)]));
  if (program.chunks() > 1) items.push_back("lower case: chunk >= 1");
  items.push_back("- blocked in comm");
  items.push_back(". idle");
  if (f.deadlocked) items.push_back("! blocked for good");
  std::string out;
  std::string line = f.indent;
  for (std::size_t k = 0; k < items.size(); ++k) {
    const std::string item = items[k] + (k + 1 < items.size() ? "," : "");
    if (line.size() > f.indent.size() && static_cast<int>(line.size() + 1 + item.size()) > width) {
      out += line + "\n";
      line = f.indent;
    }
    line += (line.size() > f.indent.size() ? " " : "") + item;
  }
  return out + line + "\n";
}

}  // namespace

std::string terminal_timeline(const record::RunRecord& rec, const TerminalTimelineOptions& opt) {
  if (!rec.trace) throw std::invalid_argument("terminal timeline: the run record has no trace");
  if (!rec.program) throw std::invalid_argument("terminal timeline: the run record has no program");
  const auto& trace = *rec.trace;
  Frame f;
  f.ranks = std::min(static_cast<int>(trace.ranks.size()), rec.program->ranks());
  double t_max = 0;
  for (const auto& s : trace.spans) t_max = std::max(t_max, s.end);
  for (const auto& r : trace.ranks) {
    t_max = std::max(t_max, r.end);
    f.deadlocked = f.deadlocked || !r.finished;
  }
  // A hung run gets a few columns past its last event, so the stuck marks show.
  f.t_end = t_max * (f.deadlocked ? 1.04 : 1.0);
  if (!(f.t_end > 0)) f.t_end = 1;
  f.label_w = static_cast<int>(fmt::format("rank {}", std::max(f.ranks - 1, 0)).size()) + 1;
  f.ncols = std::max(10, opt.width - f.label_w - 2);
  f.dt = f.t_end / f.ncols;
  f.indent.assign(static_cast<std::size_t>(f.label_w), ' ');

  const std::string makespan =
      fmt::format("{:.4g} {}", rec.metrics ? rec.metrics->makespan : t_max, trace.time_unit);
  std::string out = fmt::format("{} \u2014 {} ({}) \u00b7 {} \u00b7 makespan {}{}\n", rec.info.name,
                                rec.info.schedule, rec.info.style_title(), trace.origin, makespan,
                                f.deadlocked ? " \u00b7 DEADLOCK" : "");
  // A producer may interleave the ranks' spans (the simulator appends them in event order).
  std::vector<std::vector<const record::Span*>> by_rank(static_cast<std::size_t>(f.ranks));
  for (const auto& s : trace.spans)
    if (s.rank >= 0 && s.rank < f.ranks) by_rank[static_cast<std::size_t>(s.rank)].push_back(&s);
  for (int r = 0; r < f.ranks; ++r)
    out += rank_line(rec, f, r, by_rank[static_cast<std::size_t>(r)], opt.color);
  bool unit_on_axis = false;
  out += axis(f, trace.time_unit, opt.width, unit_on_axis);
  out += legend(rec, f, opt.width, unit_on_axis);
  if (rec.deadlock) out += rec.deadlock->describe() + "\n";
  return out;
}

}  // namespace ppsim::viz
