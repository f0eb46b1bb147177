#include "ppsim/viz/svg_timeline.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "ppsim/base/escape.hpp"
#include "ppsim/viz/palette.hpp"
#include "ticks.hpp"

namespace ppsim::viz {

namespace {

// Character data and attributes alike: tab and newline as they are (base/escape.hpp).
std::string xml_escape(std::string_view s) {
  return base::xml_escape(s, false);
}
using schedules::OpKind;

// Boxes narrower than this are merged with their narrow neighbours into one run per rank row, so a
// 32 x 256 run stays a small file and still shows the pipeline's shape.
constexpr double kMergePx = 1.0;
// Beyond this many transfers the lines would be a grey smear; they are left out (and the legend
// says so).
constexpr std::size_t kMaxTransfers = 3000;
constexpr std::size_t kMaxDeadlockLines = 8;

using detail::nice_step;

std::size_t kind_slot(OpKind k) {
  const int i = schedules::plain_compute_index(k);
  return i >= 0 ? static_cast<std::size_t>(i) : 4;  // 4: OVERLAP_F_B
}
constexpr std::array<OpKind, 5> kSlotKinds = {OpKind::F, OpKind::B, OpKind::I, OpKind::W,
                                              OpKind::OVERLAP_F_B};

struct Layout {
  double left = 70, right = 16;
  double top = 0;  // first row
  double row_h = 0, gap = 0;
  double x0 = 0, scale = 0;  // x = x0 + t * scale
  double row_y(int r) const { return top + r * (row_h + gap); }
  double x(double t) const { return x0 + t * scale; }
};

// SVG text does not wrap: a line longer than `fits` characters is cut at a "; " (else a space)
// that fits, and goes on indented on the next line.
void wrap_line(std::string line, std::size_t fits, std::vector<std::string>& out) {
  std::string indent;
  while (line.size() > fits) {
    std::size_t cut = line.rfind("; ", fits);
    std::size_t skip = 2;
    if (cut == std::string::npos || cut < fits / 3) {
      cut = line.rfind(' ', fits);
      skip = 1;
    }
    if (cut == std::string::npos || cut == 0) break;
    out.push_back(indent + line.substr(0, cut + (skip == 2 ? 1 : 0)));
    line.erase(0, cut + skip);
    indent = "\u2003\u2003";  // (spaces would collapse)
  }
  out.push_back(indent + line);
}

// What a hung run adds to the timeline: a band where each rank blocked for good (with a line to
// the rank it waits on, in a cycle) and the deadlock described under the axis.
class DeadlockMarks {
 public:
  explicit DeadlockMarks(const record::RunRecord& rec) : rec_(rec) {
    deadlocked_ = std::any_of(rec.trace->ranks.begin(), rec.trace->ranks.end(),
                              [](const record::RankTimeline& r) { return !r.finished; });
    if (rec_.deadlock)
      for (const auto& cycle : rec_.deadlock->cycles)
        for (const auto& b : cycle) cycle_ops_.insert({b.rank, b.position});
  }
  bool in_cycle(int rank, int pos) const { return cycle_ops_.count({rank, pos}) > 0; }
  std::size_t line_count() const { return deadlock_lines_.size(); }

  // Each rank that blocked for good: a red band from the op it is stuck in to the end of the axis,
  // thicker when that op is part of a wait-for cycle, with a dashed line to the rank it waits on.
  void bands(std::ostream& out, const Layout& lay, double t_end) const {
    if (!deadlocked_) return;
    const auto& trace = *rec_.trace;
    const auto& program = *rec_.program;
    const int ranks = static_cast<int>(trace.ranks.size());
    out << "<g class=\"stuck-ops\">\n";
    for (int r = 0; r < ranks; ++r) {
      const auto& rt = trace.ranks[static_cast<std::size_t>(r)];
      if (rt.finished || rt.stuck_pos < 0) continue;
      double since = rt.end;
      for (auto it = trace.spans.rbegin(); it != trace.spans.rend(); ++it)
        if (it->rank == r && it->pos == rt.stuck_pos) {
          since = it->start;
          break;
        }
      const auto& op = program.ops(r)[static_cast<std::size_t>(rt.stuck_pos)];
      const std::string text = xml_escape(program.op_text(r, op));
      const bool in_cycle = this->in_cycle(r, rt.stuck_pos);
      const double x0 = lay.x(since);
      const double w = std::max(lay.x(t_end) - x0, 4.0);
      const double y = lay.row_y(r);
      const record::BlockedOp* b = blocked_op(r);
      std::string why = fmt::format("rank {} blocked for good in {}", r, text);
      if (b && b->peer >= 0) why += fmt::format(" \u2192 waits on rank {}", b->peer);
      if (b && !b->waiting_for.empty())
        why += fmt::format(" (waiting for {})", xml_escape(b->waiting_for));
      if (in_cycle) why += " [deadlock cycle]";
      fmt::print(out,
                 "<rect class=\"stuck{}\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" "
                 "height=\"{:.2f}\" fill=\"{}\" fill-opacity=\"0.22\" stroke=\"{}\" "
                 "stroke-width=\"{}\" data-rank=\"{}\" data-pos=\"{}\" data-op=\"{}\"><title>{}"
                 "</title></rect>\n",
                 in_cycle ? " cycle" : "", x0, y, w, lay.row_h, kStuckColor, kStuckColor,
                 in_cycle ? 2 : 1, r, rt.stuck_pos, text, why);
      if (lay.row_h >= 12 && w > 6.6 * static_cast<double>(text.size()))
        fmt::print(out,
                   "<text x=\"{:.2f}\" y=\"{:.2f}\" fill=\"{}\" font-size=\"10\" "
                   "pointer-events=\"none\">{}</text>\n",
                   x0 + 3, y + lay.row_h / 2 + 4, kStuckColor, text);
      if (b && b->peer >= 0 && b->peer < ranks && in_cycle) {
        const bool down = b->peer > r;
        fmt::print(out,
                   "<line class=\"waits-on\" x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" "
                   "y2=\"{:.2f}\" stroke=\"{}\" stroke-width=\"1.5\" stroke-dasharray=\"3 2\"/>\n",
                   x0 + 2, y + (down ? lay.row_h : 0), x0 + 2,
                   lay.row_y(b->peer) + (down ? 0 : lay.row_h), kStuckColor);
      }
    }
    out << "</g>\n";
  }

  // The deadlock report's entry for `rank`: in a cycle, unmatched or behind one.
  const record::BlockedOp* blocked_op(int rank) const {
    if (!rec_.deadlock) return nullptr;
    for (const auto& c : rec_.deadlock->cycles)
      for (const auto& b : c)
        if (b.rank == rank) return &b;
    for (const auto* list : {&rec_.deadlock->unmatched, &rec_.deadlock->blocked})
      for (const auto& b : *list)
        if (b.rank == rank) return &b;
    return nullptr;
  }

  // The deadlock described in lines of at most `fits` characters, for under the axis.
  void describe_lines(std::size_t fits) {
    deadlock_lines_.clear();
    if (!rec_.deadlock) return;
    const auto& d = *rec_.deadlock;
    auto describe = [](const record::BlockedOp& b) {
      std::string s = fmt::format("rank {} blocked in {}", b.rank, b.op);
      if (b.peer >= 0) s += fmt::format(" \u2192 rank {}", b.peer);
      if (!b.waiting_for.empty()) s += fmt::format(" (waiting for {})", b.waiting_for);
      return s;
    };
    std::size_t n = 0;
    for (const auto& c : d.cycles) {
      std::string line = fmt::format("Deadlock cycle {}: ", ++n);
      for (std::size_t i = 0; i < c.size(); ++i) line += (i ? "; " : "") + describe(c[i]);
      if (!c.empty()) line += fmt::format("; back to rank {}", c.front().rank);
      wrap_line(std::move(line), fits, deadlock_lines_);
    }
    for (const auto& b : d.unmatched) wrap_line("Unmatched: " + describe(b), fits, deadlock_lines_);
    for (const auto& b : d.blocked)
      wrap_line("Behind the cycle: " + describe(b), fits, deadlock_lines_);
    if (deadlock_lines_.size() > kMaxDeadlockLines) {
      const std::size_t more = deadlock_lines_.size() - (kMaxDeadlockLines - 1);
      deadlock_lines_.resize(kMaxDeadlockLines - 1);
      deadlock_lines_.push_back(fmt::format("\u2026 and {} more", more));
    }
    if (d.cut())
      deadlock_lines_.push_back(
          fmt::format("({} cycles in all; the first {} are listed in the report)", d.cycle_count(),
                      d.cycles.size()));
  }

  void text(std::ostream& out, const Layout& lay, double axis_y) const {
    if (deadlock_lines_.empty()) return;
    out << "<g class=\"deadlock\" font-size=\"11\">\n";
    double y = axis_y + 36 + 12;
    for (const auto& l : deadlock_lines_) {
      fmt::print(out, "<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"{}\">{}</text>\n", lay.left, y,
                 kStuckColor, xml_escape(l));
      y += 16;
    }
    out << "</g>\n";
  }

 private:
  const record::RunRecord& rec_;
  bool deadlocked_ = false;
  std::set<std::pair<int, int>> cycle_ops_;
  std::vector<std::string> deadlock_lines_;
};

class Drawer {
 public:
  Drawer(std::ostream& out, const record::RunRecord& rec, const TimelineOptions& options)
      : out_(out), rec_(rec), trace_(*rec.trace), program_(*rec.program), opt_(options) {
    prefix_ = xml_escape(opt_.id_prefix);
    ranks_ = static_cast<int>(trace_.ranks.size());
    if (program_.ranks() != ranks_)
      throw std::invalid_argument(fmt::format(
          "svg timeline: the trace has {} ranks, the program {}", ranks_, program_.ranks()));
    for (const auto& s : trace_.spans)
      if (s.rank < 0 || s.rank >= ranks_ || s.pos < 0 ||
          static_cast<std::size_t>(s.pos) >= program_.ops(s.rank).size())
        throw std::invalid_argument(fmt::format(
            "svg timeline: a span names op {} of rank {}, which the program does not have", s.pos,
            s.rank));
    for (const auto& s : trace_.spans) t_max_ = std::max(t_max_, s.end);
    for (const auto& r : trace_.ranks) t_max_ = std::max(t_max_, r.end);
    deadlocked_ = std::any_of(trace_.ranks.begin(), trace_.ranks.end(),
                              [](const record::RankTimeline& r) { return !r.finished; });
    t_end_ = opt_.time_end > 0 ? opt_.time_end : t_max_ * (deadlocked_ ? 1.04 : 1.0);
    if (!std::isfinite(t_end_))
      throw std::invalid_argument("svg timeline: the trace has a time that is not finite");
    if (!(t_end_ > 0)) t_end_ = 1;
    if (opt_.interactive)  // who sent what each receive waited for
      for (const auto& t : trace_.transfers) sender_[{t.dst_rank, t.dst_pos}] = t.src_rank;
  }

  void draw(bool fragment) {
    layout();
    if (!fragment) out_ << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    fmt::print(
        out_,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"ppsim-timeline\" id=\"{}timeline\" "
        "width=\"{}\" height=\"{:.0f}\" viewBox=\"0 0 {} {:.0f}\" font-family=\"sans-serif\" "
        "font-size=\"12\" data-origin=\"{}\" data-ranks=\"{}\" data-x0=\"{:.4f}\" "
        "data-px-per-unit=\"{:.10g}\" data-time-end=\"{:.10g}\" data-time-unit=\"{}\" "
        "data-tick-step=\"{:.10g}\">\n",
        prefix_, width_, height_, width_, height_, xml_escape(trace_.origin), ranks_, lay_.x0,
        lay_.scale, t_end_, xml_escape(trace_.time_unit), tick_step());
    defs();
    fmt::print(out_, "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n");
    title();
    legend();
    rows();
    transfers();
    deadlock_.bands(out_, lay_, t_end_);
    axis();
    deadlock_.text(out_, lay_, axis_y_);
    out_ << "</svg>\n";
  }

 private:
  void layout() {
    width_ = std::max(opt_.width, 320);
    const int P = std::max(ranks_, 1);
    lay_.row_h = P <= 8 ? 26 : P <= 16 ? 20 : P <= 32 ? 14 : std::max(4.0, 448.0 / P);
    lay_.gap = lay_.row_h >= 14 ? 8 : 2;
    lay_.left = 70;
    lay_.x0 = lay_.left;
    lay_.scale = (width_ - lay_.left - lay_.right) / t_end_;
    title_lines_ = title_lines();
    legend_y_ = 30 + 17.0 * static_cast<double>(title_lines_.size() - 1);
    legend_items();
    // Legend rows: items wrap at the drawing's width.
    double x = lay_.left;
    legend_rows_ = 1;
    for (const auto& item : legend_) {
      const double w = item_width(item.label);
      if (x + w > width_ - lay_.right && x > lay_.left) {
        x = lay_.left;
        ++legend_rows_;
      }
      x += w;
    }
    lay_.top = legend_y_ + legend_rows_ * 18 + 8;
    const double rows_bottom = lay_.row_y(P) - lay_.gap;
    axis_y_ = rows_bottom + 6;
    height_ = axis_y_ + 36;
    // 6.2 px is about a character at font-size 11.
    deadlock_.describe_lines(
        static_cast<std::size_t>(std::max(40.0, (width_ - lay_.left - 10) / 6.2)));
    height_ +=
        static_cast<double>(deadlock_.line_count()) * 16 + (deadlock_.line_count() == 0 ? 0 : 6);
  }

  static double item_width(const std::string& label) {
    return 16 + 6.6 * static_cast<double>(label.size()) + 14;
  }

  struct LegendItem {
    std::string label;
    std::string swatch;  // SVG markup drawn at (0,0) in a 12 x 12 square
  };

  void legend_items() {
    std::array<bool, 5> used{};
    for (const auto& s : trace_.spans)
      if (s.kind == record::SpanKind::compute && s.rank < ranks_)
        used[kind_slot(op_of(s).kind)] = true;
    for (std::size_t i = 0; i < used.size(); ++i)
      if (used[i]) {
        const OpKind k = kSlotKinds[i];
        std::string sw =
            fmt::format("<rect width=\"12\" height=\"12\" fill=\"{}\"/>", kind_color(k));
        const int V = program_.chunks();
        if (V > 1)  // a strip of the chunk shades under the base colour
          for (int c = 1; c < V && c < 4; ++c)
            sw += fmt::format(
                "<rect x=\"{:.1f}\" y=\"8\" width=\"{:.1f}\" height=\"4\" fill=\"{}\"/>",
                12.0 * c / std::min(V, 4), 12.0 / std::min(V, 4), kind_color(k, c, V));
        // An overlapped pair's box reads "7/13": its forward's microbatch, then its backward's.
        legend_.push_back({k == OpKind::OVERLAP_F_B
                               ? std::string(kind_label(k)) + " (label: F's/B's microbatch)"
                               : std::string(kind_label(k)),
                           sw});
      }
    if (program_.chunks() > 1)
      legend_.push_back({fmt::format("chunks 0..{}: darker to lighter", program_.chunks() - 1),
                         fmt::format("<rect width=\"6\" height=\"12\" fill=\"{}\"/><rect x=\"6\" "
                                     "width=\"6\" height=\"12\" fill=\"{}\"/>",
                                     kind_color(OpKind::F), kind_color(OpKind::F, 1, 2))});
    if (!program_.routes().is_linear() && program_.routes().count() > 1)
      legend_.push_back({"reverse direction (hatched)",
                         fmt::format("<rect width=\"12\" height=\"12\" fill=\"{}\"/><rect "
                                     "width=\"12\" height=\"12\" fill=\"url(#{}hatch)\"/>",
                                     kind_color(OpKind::F), prefix_)});
    legend_.push_back(
        {"blocked in comm / WAIT",
         fmt::format("<rect y=\"8\" width=\"12\" height=\"4\" fill=\"{}\"/>", kBlockedColor)});
    if (!trace_.transfers.empty())
      legend_.push_back({trace_.transfers.size() <= kMaxTransfers
                             ? std::string("transfer")
                             : fmt::format("transfers not drawn ({})", trace_.transfers.size()),
                         fmt::format("<line x1=\"1\" y1=\"1\" x2=\"11\" y2=\"11\" stroke=\"{}\"/>",
                                     kTransferColor)});
    if (deadlocked_)
      legend_.push_back(
          {"blocked for good", fmt::format("<rect width=\"12\" height=\"12\" fill=\"{}\" "
                                           "fill-opacity=\"0.25\" stroke=\"{}\"/>",
                                           kStuckColor, kStuckColor)});
    legend_.push_back(
        {"idle", "<rect width=\"12\" height=\"12\" fill=\"#f4f4f4\" stroke=\"#ccc\"/>"});
  }

  const schedules::Op& op_of(const record::Span& s) const {
    return program_.ops(s.rank)[static_cast<std::size_t>(s.pos)];
  }

  void defs() {
    fmt::print(out_,
               "<defs><pattern id=\"{}hatch\" width=\"6\" height=\"6\" "
               "patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect width=\"2\" "
               "height=\"6\" fill=\"#000000\" fill-opacity=\"0.35\"/></pattern></defs>\n",
               prefix_);
  }

  // The title, in lines that fit the drawing: wrapped at its " · " separators (a long config name
  // or a narrow picture), a part longer than a line kept whole.
  std::vector<std::string> title_lines() const {
    std::vector<std::string> parts = {
        fmt::format("{} \u2014 {}", rec_.info.name, rec_.info.schedule)};
    if (!rec_.info.comm_style.empty())
      parts.back() += fmt::format(" ({})", rec_.info.style_title());
    std::string shape = fmt::format("{} \u00b7 P={} M={}", trace_.origin, program_.ranks(),
                                    program_.microbatches());
    if (program_.chunks() > 1) shape += fmt::format(" V={}", program_.chunks());
    parts.push_back(shape);
    parts.push_back(fmt::format("makespan {:.4g} {}", makespan(), trace_.time_unit));
    if (deadlocked_) parts.push_back("DEADLOCK");
    // Bold 14 px sans-serif: about 8 px per character (code points, not bytes).
    auto px = [](const std::string& t) {
      std::size_t n = 0;
      for (unsigned char c : t) n += (c & 0xC0) != 0x80;
      return 8.0 * static_cast<double>(n);
    };
    const double room = width_ - lay_.left - lay_.right;
    std::vector<std::string> lines;
    for (const auto& part : parts) {
      if (!lines.empty() && px(lines.back() + " \u00b7 " + part) <= room)
        lines.back() += " \u00b7 " + part;
      else
        lines.push_back(part);
    }
    return lines;
  }

  void title() {
    out_ << "<text class=\"title\" font-size=\"14\" font-weight=\"bold\">";
    for (std::size_t i = 0; i < title_lines_.size(); ++i)
      fmt::print(out_, "<tspan x=\"{}\" y=\"{}\">{}</tspan>", lay_.left, 20 + 17 * i,
                 xml_escape(title_lines_[i]));
    out_ << "</text>\n";
  }

  double makespan() const { return rec_.metrics ? rec_.metrics->makespan : t_max_; }

  void legend() {
    out_ << "<g class=\"legend\">\n";
    double x = lay_.left, y = legend_y_;
    for (const auto& item : legend_) {
      const double w = item_width(item.label);
      if (x + w > width_ - lay_.right && x > lay_.left) {
        x = lay_.left;
        y += 18;
      }
      fmt::print(
          out_,
          "<g transform=\"translate({:.1f},{:.1f})\">{}<text x=\"16\" y=\"10\">{}</text></g>\n", x,
          y, item.swatch, xml_escape(item.label));
      x += w;
    }
    out_ << "</g>\n";
  }

  // What the rank waited in before a compute op could start: the comm ops and WAITs that held it
  // since its previous compute op, with the sender of each received tensor.
  std::string waited_text(const std::vector<const record::Span*>& waits) const {
    std::string out;
    for (const auto* w : waits) {
      if (!out.empty()) out += "; ";
      const auto& op = op_of(*w);
      out += fmt::format("{} {:.4g}\u2013{:.4g}", program_.op_text(w->rank, op), w->start, w->end);
      if (auto it = sender_.find({w->rank, w->pos}); it != sender_.end())
        out += fmt::format(" (from rank {})", it->second);
    }
    return out;
  }

  struct Run {  // narrow boxes of one row merged into one
    double x0 = 0, x1 = 0, t0 = 0, t1 = 0;
    std::size_t n = 0;
    std::array<double, 5> time{};
    const record::Span* only = nullptr;
    std::string only_wait;
  };

  void rows() {
    const bool labels_fit = lay_.row_h >= 12;
    const double font = std::min(11.0, lay_.row_h - 3);
    out_ << "<g class=\"ranks\">\n";
    // Thin rows (many ranks) are labelled every few ranks, in a font still readable.
    const double pitch = lay_.row_h + lay_.gap;
    const int every = std::max(1, static_cast<int>(std::ceil(10.0 / pitch)));
    const double label_font = std::clamp(font + 1, 8.0, 12.0);
    for (int r = 0; r < ranks_; r += every) {
      const double y = lay_.row_y(r);
      fmt::print(out_,
                 "<text class=\"rank-label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" "
                 "font-size=\"{:.0f}\">rank {}</text>\n",
                 lay_.left - 6, y + lay_.row_h / 2 + label_font * 0.36, label_font, r);
    }
    // Background of each row: idle time shows as this light band between boxes.
    for (int r = 0; r < ranks_; ++r)
      fmt::print(out_,
                 "<rect class=\"row\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" "
                 "fill=\"#f4f4f4\"/>\n",
                 lay_.x0, lay_.row_y(r), lay_.x(t_end_) - lay_.x0, lay_.row_h);
    out_ << "</g>\n";

    std::vector<std::string> labels;
    // A producer may interleave the ranks' spans (the simulator appends them in event order);
    // each rank's own spans are in its issue order.
    std::vector<std::vector<const record::Span*>> by_rank(static_cast<std::size_t>(ranks_));
    for (const auto& s : trace_.spans) by_rank[static_cast<std::size_t>(s.rank)].push_back(&s);
    for (int r = 0; r < ranks_; ++r)
      draw_row(r, by_rank[static_cast<std::size_t>(r)], labels_fit, font, labels);
    if (!labels.empty()) {
      fmt::print(out_,
                 "<g class=\"mb-labels\" text-anchor=\"middle\" font-size=\"{:.0f}\" "
                 "pointer-events=\"none\">\n",
                 font);
      for (const auto& l : labels) out_ << l;
      out_ << "</g>\n";
    }
  }

  void draw_row(int r, const std::vector<const record::Span*>& spans, bool labels_fit, double font,
                std::vector<std::string>& labels) {
    const double y = lay_.row_y(r);
    const double wait_h = std::max(2.0, lay_.row_h / 4);
    fmt::print(out_, "<g class=\"rank\" data-rank=\"{}\" transform=\"translate(0,{:.2f})\">\n", r,
               y);
    std::vector<const record::Span*> waits;
    Run run;
    auto flush = [&] {
      if (run.n == 1) {
        emit_box(*run.only, run.only_wait, labels_fit, font, labels, y);
      } else if (run.n > 1) {
        const std::size_t slot = static_cast<std::size_t>(
            std::max_element(run.time.begin(), run.time.end()) - run.time.begin());
        const double w = std::max(run.x1 - run.x0, 0.5);
        fmt::print(out_,
                   "<rect class=\"merged\" x=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" "
                   "fill=\"{}\" data-n=\"{}\"",
                   run.x0, w, lay_.row_h, kind_color(kSlotKinds[slot]), run.n);
        if (opt_.interactive)
          fmt::print(out_, "><title>{} ops, {:.4g}\u2013{:.4g} {}</title></rect>\n", run.n, run.t0,
                     run.t1, xml_escape(trace_.time_unit));
        else
          out_ << "/>\n";
        // The kinds' shares of the run as bands, top to bottom in F, B, I, W order: a steady
        // state of F and B stays two colours, not the larger one's.
        double total = 0;
        for (double t : run.time) total += t;
        double top = 0;
        for (std::size_t k = 0; k < run.time.size() && total > 0; ++k) {
          if (run.time[k] <= 0) continue;
          const double h = lay_.row_h * run.time[k] / total;
          fmt::print(out_,
                     "<rect class=\"share\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" "
                     "height=\"{:.2f}\" fill=\"{}\" pointer-events=\"none\"/>\n",
                     run.x0, top, w, h, kind_color(kSlotKinds[k]));
          top += h;
        }
      }
      run = Run{};
    };
    for (const record::Span* sp : spans) {
      const auto& s = *sp;
      if (s.kind == record::SpanKind::blocked) {
        if (s.end > s.start) {
          waits.push_back(&s);
          const double w = (s.end - s.start) * lay_.scale;
          if (w >= 0.5)
            fmt::print(out_,
                       "<rect class=\"wait\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" "
                       "height=\"{:.2f}\" fill=\"{}\"/>\n",
                       lay_.x(s.start), lay_.row_h - wait_h, w, wait_h, kBlockedColor);
        }
        continue;
      }
      if (s.kind != record::SpanKind::compute) continue;
      const double x0 = lay_.x(s.start), x1 = lay_.x(s.end);
      std::string wait_text = opt_.interactive ? waited_text(waits) : std::string();
      waits.clear();
      if (x1 - x0 >= kMergePx) {
        flush();
        emit_box(s, wait_text, labels_fit, font, labels, y);
        continue;
      }
      if (run.n > 0 && x0 - run.x1 > kMergePx) flush();
      if (run.n == 0) {
        run.x0 = x0;
        run.t0 = s.start;
        run.only = &s;
        run.only_wait = std::move(wait_text);
      }
      run.x1 = std::max(run.x1, x1);
      run.t1 = std::max(run.t1, s.end);
      run.time[kind_slot(op_of(s).kind)] += s.end - s.start;
      ++run.n;
    }
    flush();
    out_ << "</g>\n";
  }

  void emit_box(const record::Span& s, const std::string& wait_text, bool labels_fit, double font,
                std::vector<std::string>& labels, double row_y) {
    const auto& op = op_of(s);
    const bool composite = schedules::is_composite(op.kind);
    const auto parts = composite ? program_.parts(s.rank, op) : std::span<const schedules::Op>();
    const schedules::Op& head = composite && !parts.empty() ? parts.front() : op;
    const int chunk = program_.place(head.stage).chunk;
    const Rgb fill = chunk_shade(kind_rgb(op.kind), chunk, program_.chunks());
    const double x0 = lay_.x(s.start), w = (s.end - s.start) * lay_.scale;
    const bool reverse =
        !program_.routes().is_linear() && program_.routes().route_of(head.microbatch) > 0;
    const bool in_cycle = deadlock_.in_cycle(s.rank, s.pos);
    fmt::print(out_,
               "<rect class=\"op\" x=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"", x0,
               w, lay_.row_h, hex(fill));
    if (in_cycle)
      fmt::print(out_, " stroke=\"{}\" stroke-width=\"2\"", kStuckColor);
    else if (w >= 4)  // a hairline between neighbours of one colour; narrower boxes would vanish
      out_ << " stroke=\"#ffffff\" stroke-width=\"0.5\"";
    if (opt_.interactive) {
      const std::string text = xml_escape(program_.op_text(s.rank, op));
      const std::string wait = xml_escape(wait_text);
      fmt::print(out_,
                 " data-rank=\"{}\" data-pos=\"{}\" data-op=\"{}\" data-start=\"{:.9g}\" "
                 "data-end=\"{:.9g}\" data-wait=\"{}\"><title>rank {}: {} (chunk {})\n"
                 "{:.6g}\u2013{:.6g} {} ({}){}{}</title></rect>\n",
                 s.rank, s.pos, text, s.start, s.end, wait, s.rank, text, chunk, s.start, s.end,
                 xml_escape(trace_.time_unit), xml_escape(trace_.origin),
                 wait.empty() ? "" : "\nwaited for: ", wait);
    } else {
      out_ << "/>\n";
    }
    if (reverse)
      fmt::print(out_,
                 "<rect class=\"reverse\" x=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" "
                 "fill=\"url(#{}hatch)\" pointer-events=\"none\"/>\n",
                 x0, w, lay_.row_h, prefix_);
    if (!labels_fit) return;
    std::string label;
    if (composite) {
      for (const auto& p : parts)
        label += (label.empty() ? "" : "/") + std::to_string(p.microbatch);
    } else {
      label = std::to_string(op.microbatch);
    }
    const double need = static_cast<double>(label.size()) * font * 0.62 + 3;
    if (w < need) return;
    labels.push_back(fmt::format("<text x=\"{:.2f}\" y=\"{:.2f}\" fill=\"{}\">{}</text>\n",
                                 x0 + w / 2, row_y + lay_.row_h / 2 + font * 0.36,
                                 text_color_on(fill), label));
  }

  void transfers() {
    if (trace_.transfers.empty() || trace_.transfers.size() > kMaxTransfers) return;
    fmt::print(out_,
               "<g class=\"transfers\" stroke=\"{}\" stroke-width=\"0.8\" "
               "stroke-opacity=\"0.7\">\n",
               kTransferColor);
    for (const auto& t : trace_.transfers) {
      if (t.src_rank < 0 || t.src_rank >= ranks_ || t.dst_rank < 0 || t.dst_rank >= ranks_)
        continue;
      const bool down = t.dst_rank > t.src_rank;
      const double y1 = lay_.row_y(t.src_rank) + (down ? lay_.row_h : 0);
      const double y2 = lay_.row_y(t.dst_rank) + (down ? 0 : lay_.row_h);
      fmt::print(out_,
                 "<line class=\"transfer\" x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" "
                 "y2=\"{:.2f}\"/>\n",
                 lay_.x(t.start), y1, lay_.x(t.end), y2);
    }
    out_ << "</g>\n";
  }

  // The time axis' tick spacing (the HTML report's memory chart uses the same ticks).
  double tick_step() const {
    return nice_step(t_end_, std::max(2, static_cast<int>((width_ - 100) / 90)));
  }

  void axis() {
    const double y = axis_y_;
    const double x_end = lay_.x(t_end_);
    fmt::print(out_,
               "<g class=\"axis\" font-size=\"10\" fill=\"#333333\">\n<line x1=\"{:.2f}\" "
               "y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"#333333\"/>\n",
               lay_.x0, y, x_end, y);
    const double step = tick_step();
    for (int i = 0;; ++i) {
      const double t = i * step;
      if (t > t_end_ * (1 + 1e-9)) break;
      const double x = lay_.x(t);
      fmt::print(out_,
                 "<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" "
                 "stroke=\"#333333\"/><text x=\"{:.2f}\" y=\"{:.2f}\" "
                 "text-anchor=\"middle\">{:g}</text>\n",
                 x, y, x, y + 4, x, y + 15, t);
    }
    fmt::print(out_,
               "<text class=\"axis-label\" x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"end\">"
               "time ({})</text>\n</g>\n",
               x_end, y + 29, xml_escape(trace_.time_unit));
  }

  std::ostream& out_;
  const record::RunRecord& rec_;
  const record::Trace& trace_;
  const schedules::Program& program_;
  const TimelineOptions& opt_;
  std::string prefix_;
  int ranks_ = 0;
  int width_ = 1200;
  double height_ = 0, axis_y_ = 0;
  double t_max_ = 0, t_end_ = 1;
  bool deadlocked_ = false;
  Layout lay_;
  std::vector<LegendItem> legend_;
  int legend_rows_ = 1;
  std::vector<std::string> title_lines_;
  double legend_y_ = 30;
  std::map<std::pair<int, int>, int> sender_;  // (rank, pos) of a receive -> the sending rank
  DeadlockMarks deadlock_{rec_};
};

}  // namespace

void write_svg_timeline(std::ostream& out, const record::RunRecord& rec,
                        const TimelineOptions& options, bool fragment) {
  if (!rec.trace) throw std::invalid_argument("svg timeline: the run record has no trace");
  if (!rec.program) throw std::invalid_argument("svg timeline: the run record has no program");
  Drawer(out, rec, options).draw(fragment);
}

}  // namespace ppsim::viz
