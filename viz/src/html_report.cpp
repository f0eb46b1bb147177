#include "ppsim/viz/html_report.hpp"
#include "ppsim/viz/summary_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "ppsim/base/escape.hpp"
#include "ppsim/base/human_bytes.hpp"
#include "ppsim/viz/palette.hpp"
#include "ppsim/viz/svg_timeline.hpp"

namespace ppsim::viz {

namespace detail {
// viz/cmake/embed_chartjs.cmake generates these from Debian's libjs-chart.js.
extern const char* const kChartJsVersion;
std::string chart_js_source();
}  // namespace detail

std::string chart_js_version() {
  return detail::kChartJsVersion;
}

namespace {

// Character data and attributes alike: tab and newline as they are (base/escape.hpp).
std::string xml_escape(std::string_view s) {
  return base::xml_escape(s, false);
}

// JSON for a <script type="application/json"> element: '<' only occurs inside strings, and
// escaped there it cannot close the element ("</script>") or open a comment.
std::string script_json(const nlohmann::json& j) {
  const std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '<')
      out += "\\u003c";
    else
      out += c;
  }
  return out;
}

// Where a recorded run stops on its time axis: the last op end or the moment it hung.
double run_end(const record::RunRecord& run) {
  double end = run.metrics ? run.metrics->makespan : 0.0;
  if (run.trace)
    for (const auto& r : run.trace->ranks) end = std::max(end, r.end);
  return end;
}

std::string origin_of(const record::RunRecord& run) {
  return run.trace ? run.trace->origin : run.info.origin;
}

// A table cell: shown text, and the value that sorting reads.
std::string cell(const std::string& text, const std::string& sort_key, const char* cls = "") {
  return fmt::format("<td class=\"{}\" data-v=\"{}\">{}</td>", cls, xml_escape(sort_key), text);
}

std::string number_cell(double v, const std::string& text) {
  return cell(text, fmt::format("{}", v), "num");
}

// Per-rank figures: all of them for a few ranks, the maximum and a hover list for many.
template <typename F>
std::string per_rank_cell(const record::RunMetrics& m, F&& value, bool bytes) {
  std::vector<std::string> parts;
  double max = 0;
  for (const auto& r : m.per_rank) {
    const double v = static_cast<double>(value(r));
    max = std::max(max, v);
    parts.push_back(bytes ? base::human_bytes(static_cast<std::int64_t>(v))
                          : fmt::format("{}", static_cast<std::int64_t>(v)));
  }
  const std::string all = fmt::format("{}", fmt::join(parts, " | "));
  const std::string max_text =
      bytes ? base::human_bytes(static_cast<std::int64_t>(max)) : fmt::format("{}", max);
  if (parts.size() <= 8)
    return fmt::format("<td class=\"num per-rank\" data-v=\"{}\" title=\"max {}\">{}</td>", max,
                       xml_escape(max_text), xml_escape(all));
  return fmt::format("<td class=\"num per-rank\" data-v=\"{}\" title=\"{}\">max {} ({} ranks)</td>",
                     max, xml_escape(all), xml_escape(max_text), parts.size());
}

std::string table_row(const record::RunRecord& run, std::size_t index) {
  const auto& p = *run.program;
  std::string row = fmt::format("<tr id=\"row-{}\">", index);
  row += number_cell(static_cast<double>(index + 1), fmt::format("{}", index + 1));
  row += cell(fmt::format("<a href=\"#run-{}\">{}</a>", index, xml_escape(run.info.name)),
              run.info.name, "name");
  row += cell(xml_escape(origin_of(run)), origin_of(run), "origin");
  row += cell(xml_escape(run.info.schedule), run.info.schedule);
  const std::string comm = run.info.comm_label();
  row += cell(xml_escape(comm), comm);
  row += number_cell(p.ranks(), fmt::format("{}", p.ranks()));
  row += number_cell(p.chunks(), fmt::format("{}", p.chunks()));
  row += number_cell(p.microbatches(), fmt::format("{}", p.microbatches()));
  if (run.metrics) {
    const auto& m = *run.metrics;
    // A config with a `model` section: the whole step's time beside the pipeline's.
    const std::string step =
        run.step ? fmt::format(" (step {:.4g} s)", run.step->summary.time) : std::string();
    row += number_cell(
        m.makespan, fmt::format("{:.3f} {}{}", m.makespan, xml_escape(run.info.time_unit), step));
    row += number_cell(m.bubble_fraction, fmt::format("{:.4f}", m.bubble_fraction));
    row += number_cell(m.bubble_vs_ideal, fmt::format("{:.4f}", m.bubble_vs_ideal));
    row += per_rank_cell(
        m, [](const record::RankMetrics& r) { return r.peak_memory_bytes; }, true);
    row += per_rank_cell(
        m, [](const record::RankMetrics& r) { return r.peak_inflight; }, false);
    row +=
        number_cell(static_cast<double>(m.comm_bytes), xml_escape(base::human_bytes(m.comm_bytes)));
  } else {
    for (int i = 0; i < 6; ++i) row += cell("-", "", "num");
  }
  const std::string verdict = run.verdict().text();
  // A run the lowering stalled links to its footnote below the table (lowering_stall).
  const std::string stalled =
      lowering_stall(run).empty()
          ? ""
          : fmt::format(" <a class=\"stall\" href=\"#stall-{}\">[stalled]</a>", index);
  row += cell(xml_escape(verdict) + stalled, verdict, run.ok() ? "verdict ok" : "verdict bad");
  return row + "</tr>\n";
}

// The deadlock of a run in words: each cycle as a chain of waits, then what else is stuck.
std::string deadlock_html(const record::RunRecord& run) {
  const auto& d = *run.deadlock;
  auto op = [](const record::BlockedOp& b) {
    std::string s = fmt::format("rank {} is blocked in <code>{}</code>", b.rank, xml_escape(b.op));
    if (!b.waiting_for.empty())
      s += fmt::format(" (waiting for <code>{}</code>)", xml_escape(b.waiting_for));
    return s;
  };
  std::string out = "<div class=\"deadlock\"><p><strong>";
  out += d.cycle_count() > 0 ? fmt::format("Deadlock: {} wait-for cycle{}.", d.cycle_count(),
                                           d.cycle_count() == 1 ? "" : "s")
                             : std::string("Hang: ranks wait on ranks that have finished.");
  out +=
      "</strong> The timeline stops where the ranks hung; the ops they are stuck in are "
      "highlighted.</p>\n<ul>\n";
  for (std::size_t c = 0; c < d.cycles.size(); ++c) {
    const auto& cycle = d.cycles[c];
    std::vector<std::string> steps;
    for (const auto& b : cycle)
      steps.push_back(fmt::format("{}, which needs rank {}", op(b), b.peer));
    out += fmt::format(
        "<li class=\"cycle\">Cycle {}: {}; so rank {} waits for itself through {} rank{} and "
        "no rank in the cycle can move.</li>\n",
        c + 1, fmt::join(steps, "; "), cycle.empty() ? 0 : cycle.front().rank, cycle.size(),
        cycle.size() == 1 ? "" : "s");
  }
  if (d.cut())
    out += fmt::format("<li>{} more cycles not listed.</li>\n", d.cycle_count() - d.cycles.size());
  for (const auto& b : d.unmatched)
    out += fmt::format("<li class=\"unmatched\">Unmatched: {}, but rank {} has finished.</li>\n",
                       op(b), b.peer);
  for (const auto& b : d.blocked)
    out += fmt::format(
        "<li class=\"blocked\">Waiting on a stuck rank: {}, which needs rank {}.</li>\n", op(b),
        b.peer);
  out += "</ul>\n<pre class=\"describe\">" + xml_escape(d.describe()) + "</pre></div>\n";
  return out;
}

// Memory (static + dynamic) per rank over time, as stepped {x, y} points. Beyond `limit`
// samples a rank keeps the minimum and maximum of each time bucket.
nlohmann::json memory_series(const record::RunRecord& run, std::size_t limit, double& max_bytes) {
  const auto& t = *run.trace;
  const std::size_t ranks = t.ranks.size();
  std::vector<std::vector<std::pair<double, double>>> per(ranks);
  for (std::size_t r = 0; r < ranks; ++r) per[r].push_back({t.ranks[r].start, 0.0});
  for (const auto& c : t.counters)
    if (c.rank >= 0 && static_cast<std::size_t>(c.rank) < ranks)
      per[static_cast<std::size_t>(c.rank)].push_back(
          {c.time, static_cast<double>(c.memory_bytes)});
  nlohmann::json out = nlohmann::json::array();
  max_bytes = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    auto& s = per[r];
    const double base = static_cast<double>(t.ranks[r].static_bytes);
    s.push_back({std::max(t.ranks[r].end, s.back().first), s.back().second});
    std::vector<std::pair<double, double>> kept;
    if (s.size() <= limit || limit < 4) {
      kept = s;
    } else {
      // The first and last samples, and between them the extremes of each bucket in time order.
      const std::size_t buckets = (limit - 2) / 2;
      const double t0 = s.front().first, t1 = s.back().first;
      const double width = t1 > t0 ? (t1 - t0) / static_cast<double>(buckets) : 1.0;
      auto bucket = [&](std::size_t k) {
        return std::min(buckets - 1, static_cast<std::size_t>((s[k].first - t0) / width));
      };
      kept.push_back(s.front());
      for (std::size_t i = 1; i + 1 < s.size();) {
        const std::size_t b = bucket(i);
        std::size_t lo = i, hi = i, j = i;
        for (; j + 1 < s.size() && bucket(j) == b; ++j) {
          if (s[j].second < s[lo].second) lo = j;
          if (s[j].second > s[hi].second) hi = j;
        }
        kept.push_back(s[std::min(lo, hi)]);
        if (lo != hi) kept.push_back(s[std::max(lo, hi)]);
        i = j;
      }
      kept.push_back(s.back());
    }
    nlohmann::json points = nlohmann::json::array();
    for (const auto& [x, y] : kept) {
      points.push_back({{"x", x}, {"y", base + y}});
      max_bytes = std::max(max_bytes, base + y);
    }
    out.push_back(points);
  }
  return out;
}

// Runs of one schedule setup that differ only in microbatches: a line of the sweep chart.
struct SweepKey {
  std::string schedule, comm;
  int ranks, chunks;
  std::string origin;  // a measured sweep is a line of its own beside the simulated one
  auto operator<=>(const SweepKey&) const = default;
};

nlohmann::json sweep_chart(const std::vector<record::RunRecord>& runs) {
  std::map<SweepKey, std::map<int, double>> lines;
  for (const auto& run : runs) {
    if (!run.metrics || !run.ok()) continue;
    const auto& p = *run.program;
    // (style_title: the same style under mpi and nccl semantics is two lines)
    lines[{run.info.schedule, run.info.style_title(), p.ranks(), p.chunks(), origin_of(run)}]
         [p.microbatches()] = run.metrics->bubble_fraction;
  }
  nlohmann::json series = nlohmann::json::array();
  std::set<int> ranks, all_m;
  int m_min = std::numeric_limits<int>::max(), m_max = 0;
  bool several_comm = false;
  for (const auto& [key, points] : lines)
    for (const auto& [k2, p2] : lines)
      if (key.schedule == k2.schedule && key.comm != k2.comm) several_comm = true;
  for (const auto& [key, points] : lines) {
    if (points.size() < 2) continue;
    std::string label = key.schedule;
    if (key.chunks > 1) label += fmt::format(" V={}", key.chunks);
    if (several_comm) label += " " + key.comm;
    label += fmt::format(" (P={})", key.ranks);
    if (key.origin != "simulated") label += " " + key.origin;
    nlohmann::json data = nlohmann::json::array();
    for (const auto& [m, bubble] : points) {
      data.push_back({{"x", m}, {"y", bubble}});
      all_m.insert(m);
      m_min = std::min(m_min, m);
      m_max = std::max(m_max, m);
    }
    series.push_back({{"label", label}, {"data", data}});
    ranks.insert(key.ranks);
  }
  if (series.empty()) return nullptr;
  // The closed form of GPipe and 1F1B with uniform stages and free communication, sampled
  // densely enough to look like the curve it is.
  nlohmann::json reference = nlohmann::json::array();
  for (const int P : ranks) {
    nlohmann::json data = nlohmann::json::array();
    const int samples = 64;
    for (int i = 0; i <= samples; ++i) {
      const double m =
          m_min * std::pow(static_cast<double>(m_max) / m_min, static_cast<double>(i) / samples);
      data.push_back({{"x", m}, {"y", (P - 1) / (m + P - 1)}});
    }
    reference.push_back({{"label", fmt::format("(P-1)/(M+P-1), P={}", P)}, {"data", data}});
  }
  // How far GPipe's and 1F1B's runs sit from the closed form: communication and uneven stages,
  // which it leaves out, separate them (the report says so above the chart).
  double apart = 0;
  for (const auto& [key, points] : lines)
    if (points.size() >= 2 && (key.schedule == "gpipe" || key.schedule == "1f1b") &&
        key.chunks == 1)
      for (const auto& [m, bubble] : points)
        apart = std::max(
            apart, std::abs(bubble - static_cast<double>(key.ranks - 1) / (m + key.ranks - 1)));
  nlohmann::json microbatches = nlohmann::json::array();
  for (const int m : all_m) microbatches.push_back(m);
  return {{"series", series},
          {"microbatches", microbatches},
          {"reference", reference},
          {"closed_form_gap", apart},
          {"log_x", m_max >= 4 * m_min}};
}

constexpr std::string_view kStyle = R"css(
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1a1a1a; }
h1 { font-size: 1.5em; margin-bottom: .2em; }
h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
h3 { font-size: 1.05em; margin: 1.2em 0 .3em; }
.meta { color: #555; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 7px; }
th { background: #f3f3f3; cursor: pointer; user-select: none; white-space: nowrap; }
th[aria-sort=ascending]::after { content: " \25B2"; }
th[aria-sort=descending]::after { content: " \25BC"; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.per-rank { white-space: normal; font-size: 12px; }
td.verdict.ok { color: #2a7a2a; }
td.verdict.bad { color: #c62828; font-weight: 600; }
span.origin { display: inline-block; font-size: 12px; padding: 0 6px; border-radius: 8px;
  background: #e8eef7; color: #2b4c7e; margin-left: .4em; }
span.origin.measured { background: #fbeee0; color: #8a4b08; }
.verdict-tag { font-size: 12px; margin-left: .4em; color: #2a7a2a; }
.verdict-tag.bad { color: #c62828; font-weight: 600; }
p.note { font-size: 13px; color: #8a5a00; margin: .3em 0; }
a.stall { color: #8a5a00; font-size: 12px; }
.timeline { overflow-x: auto; }
.chart { position: relative; width: 100%; max-width: 1200px; height: 260px; }
.chart.memory { max-width: none; }
.memory-scroll { overflow-x: auto; }
.chart.sweep { height: 360px; }
div.deadlock { border-left: 4px solid #d62728; background: #fdf0f0; padding: .4em .8em; max-width: 1180px; }
div.deadlock pre { white-space: pre-wrap; font-size: 12px; }
.invalid { color: #c62828; }
#tooltip { position: fixed; pointer-events: none; background: #222; color: #fff; font-size: 12px;
  padding: 4px 7px; border-radius: 4px; white-space: pre; z-index: 10; }
)css";

// Sorting, the hover tooltip and the charts. The page records what it drew and any error in
// data-* attributes of <body>, which the browser test reads.
constexpr std::string_view kScript = R"js(
(function () {
  'use strict';
  var body = document.body, errors = [];
  function fail(message) { errors.push(String(message)); body.dataset.errors = errors.join(' | '); }
  window.addEventListener('error', function (e) { fail(e.message); });
  document.addEventListener('securitypolicyviolation', function (e) {
    fail('blocked request: ' + e.blockedURI);
  });
  try {
    var data = JSON.parse(document.getElementById('ppsim-data').textContent);
    // Sortable table: click a header; numbers compare as numbers.
    var table = document.getElementById('runs');
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      th.addEventListener('click', function () {
        var asc = th.getAttribute('aria-sort') !== 'ascending';
        Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) {
          h.removeAttribute('aria-sort');
        });
        th.setAttribute('aria-sort', asc ? 'ascending' : 'descending');
        var rows = Array.prototype.slice.call(table.tBodies[0].rows);
        rows.sort(function (a, b) {
          var x = a.cells[col].dataset.v, y = b.cells[col].dataset.v;
          var nx = parseFloat(x), ny = parseFloat(y), r;
          if (x === '' || y === '') r = (x === '') - (y === '');
          else if (!isNaN(nx) && !isNaN(ny)) r = nx - ny;
          else r = x < y ? -1 : x > y ? 1 : 0;
          return asc ? r : -r;
        });
        rows.forEach(function (row) { table.tBodies[0].appendChild(row); });
      });
    });
    // Hover details of timeline boxes: the <title> of the element under the pointer (or of a
    // group around it), moved into data-tip on first use so the browser's own tooltip does not
    // show it a second time.
    var tip = document.getElementById('tooltip');
    function tip_of(el) {
      var t = el.querySelector ? el.querySelector(':scope > title') : null;
      if (t) { el.setAttribute('data-tip', t.textContent); t.remove(); }
      return el.getAttribute ? el.getAttribute('data-tip') : null;
    }
    document.querySelectorAll('.timeline svg').forEach(function (svg) {
      svg.addEventListener('mousemove', function (e) {
        var el = e.target, text = null;
        for (; el && el !== svg && !text; el = el.parentNode) text = tip_of(el);
        if (!text) { tip.hidden = true; return; }
        tip.textContent = text;
        tip.hidden = false;
        tip.style.left = (e.clientX + 12) + 'px';
        tip.style.top = (e.clientY + 12) + 'px';
      });
      svg.addEventListener('mouseleave', function () { tip.hidden = true; });
    });
    var charts = 0, palette = data.rank_colors;
    function color(i) { return palette[i % palette.length]; }
    Chart.defaults.animation = false;
    Chart.defaults.font.size = 12;
    data.memory.forEach(function (m) {
      var canvas = document.getElementById(m.canvas);
      var datasets = m.ranks.map(function (points, r) {
        return { label: 'rank ' + r, data: points, stepped: true, borderColor: color(r),
                 backgroundColor: color(r), borderWidth: 1.5, pointRadius: 0 };
      });
      // The plot area under the timeline's: same left edge, same pixels per time unit.
      var x = { type: 'linear', min: 0, max: data.time_end,
                title: { display: true, text: 'time (' + m.unit + ')' } };
      var y = { beginAtZero: true, title: { display: true, text: 'memory (' + m.y_unit + ')' } };
      var padding = {};
      var svg = canvas.closest('.run').querySelector('svg.ppsim-timeline');
      if (svg && svg.dataset.x0 && svg.dataset.pxPerUnit) {
        var width = parseFloat(svg.getAttribute('width')), x0 = parseFloat(svg.dataset.x0);
        var end = parseFloat(svg.dataset.timeEnd), px = parseFloat(svg.dataset.pxPerUnit);
        canvas.parentNode.style.width = width + 'px';
        x.max = end;
        y.afterFit = function (axis) { axis.width = x0; };
        // The timeline's own ticks: one grid over both.
        var step = parseFloat(svg.dataset.tickStep);
        if (step > 0) {
          x.afterBuildTicks = function (axis) {
            var ticks = [];
            for (var i = 0; i * step <= end * (1 + 1e-9); ++i) ticks.push({ value: i * step });
            axis.ticks = ticks;
          };
          x.ticks = { callback: function (v) { return String(+v.toPrecision(6)); } };
        }
        padding = { left: 0, right: Math.max(0, width - x0 - end * px) };
      }
      new Chart(canvas, { type: 'line', data: { datasets: datasets }, options: {
        maintainAspectRatio: false, parsing: false, layout: { padding: padding },
        interaction: { mode: 'nearest', axis: 'x', intersect: false },
        plugins: { title: { display: true, text: m.title },
                   legend: { display: m.ranks.length <= 16 } },
        scales: { x: x, y: y }
      } });
      ++charts;
    });
    if (data.sweep) {
      var sets = [], ms = data.sweep.microbatches;
      data.sweep.series.forEach(function (s, i) {
        sets.push({ label: s.label, data: s.data, showLine: true, borderColor: color(i),
                    backgroundColor: color(i), pointRadius: 4, pointStyle: 'circle' });
      });
      // The closed form's legend entry is a dashed line, as it is drawn.
      data.sweep.reference.forEach(function (s) {
        sets.push({ label: s.label, data: s.data, showLine: true, borderColor: '#777',
                    backgroundColor: '#777', borderDash: [6, 4], borderWidth: 1.5, pointRadius: 0,
                    pointStyle: 'line' });
      });
      new Chart(document.getElementById('chart-sweep'), { type: 'scatter',
        data: { datasets: sets }, options: { maintainAspectRatio: false,
          plugins: { title: { display: true, text: 'bubble fraction against microbatches' },
                     legend: { labels: { usePointStyle: true, pointStyleWidth: 28, boxHeight: 7 } } },
          scales: { x: { type: data.sweep.log_x ? 'logarithmic' : 'linear',
                         min: ms[0] / 1.15, max: ms[ms.length - 1] * 1.15,
                         // Ticks at the swept microbatch counts, not at powers of ten.
                         afterBuildTicks: function (axis) {
                           axis.ticks = ms.map(function (v) { return { value: v }; });
                         },
                         ticks: { callback: function (v) { return String(v); } },
                         title: { display: true, text: 'microbatches M' } },
                    y: { beginAtZero: true, title: { display: true, text: 'bubble fraction' } } } } });
      ++charts;
    }
    if (data.pareto) {
      var groups = [['on the front', '#0072b2', 'circle'], ['other candidates', '#999999', 'circle'],
                    ['over the limit', '#ee6677', 'crossRot'], ['best', '#e69f00', 'star']];
      var sets = groups.map(function (g) {
        return { label: g[0], data: [], borderColor: g[1], backgroundColor: g[1], pointStyle: g[2],
                 pointRadius: g[0] === 'best' ? 9 : 4 };
      });
      var front = [];
      data.pareto.points.forEach(function (p) {
        var pt = { x: p.memory / 1e9, y: p.makespan, label: p.label };
        sets[p.best ? 3 : !p.within_limit ? 2 : p.front ? 0 : 1].data.push(pt);
        if (p.front) front.push(pt);
      });
      front.sort(function (a, b) { return a.x - b.x; });
      sets.push({ label: 'Pareto front', data: front, showLine: true, borderColor: '#0072b2',
                  pointRadius: 0, borderWidth: 1.5, pointStyle: 'line' });
      if (data.pareto.limit > 0) {
        var ys = data.pareto.points.map(function (p) { return p.makespan; });
        sets.push({ label: 'memory limit', data: [{ x: data.pareto.limit / 1e9, y: Math.min.apply(null, ys) },
                    { x: data.pareto.limit / 1e9, y: Math.max.apply(null, ys) }], showLine: true,
                    borderColor: '#777', borderDash: [6, 4], pointRadius: 0, pointStyle: 'line' });
      }
      new Chart(document.getElementById('chart-pareto'), { type: 'scatter',
        data: { datasets: sets }, options: { maintainAspectRatio: false,
          plugins: { title: { display: true, text: 'makespan against peak memory' },
                     tooltip: { callbacks: { label: function (c) {
                       return (c.raw.label || c.dataset.label) + ': ' + c.raw.y.toPrecision(6) +
                              ' at ' + c.raw.x.toFixed(2) + ' GB'; } } },
                     legend: { labels: { usePointStyle: true, boxHeight: 7 } } },
          scales: { x: { title: { display: true, text: 'peak memory of the busiest rank (GB)' } },
                    y: { title: { display: true, text: 'makespan' } } } } });
      ++charts;
    }
    body.dataset.charts = charts;
    // page.html#selftest (the browser test): hover the first box and sort by makespan, and say
    // what came of it.
    if (location.hash === '#selftest') {
      var box = document.querySelector('.timeline svg rect.op');
      if (box) {
        var at = box.getBoundingClientRect();
        box.dispatchEvent(new MouseEvent('mousemove', { bubbles: true, clientX: at.left + 1,
                                                        clientY: at.top + 1 }));
        body.dataset.hover = tip.hidden ? '' : tip.textContent.split('\n')[0];
      }
      table.tHead.rows[0].cells[8].click();
      body.dataset.sorted = Array.prototype.map.call(table.tBodies[0].rows, function (r) {
        return r.id;
      }).join(' ');
    }
    body.dataset.ready = 'yes';
  } catch (e) {
    fail(e && e.stack ? e.stack : e);
  }
})();
)js";

}  // namespace

void write_html_report(std::ostream& out, const std::vector<record::RunRecord>& runs,
                       const HtmlReportOptions& options) {
  double time_end = 0;
  std::string unit;
  bool mixed_units = false;
  for (const auto& run : runs) {
    time_end = std::max(time_end, run_end(run));
    if (unit.empty()) unit = run.info.time_unit;
    mixed_units = mixed_units || unit != run.info.time_unit;
  }
  if (time_end <= 0) time_end = 1;

  nlohmann::json data;
  data["time_end"] = time_end;
  nlohmann::json colors = nlohmann::json::array();
  // Rank lines: ColorBrewer's Dark2 and two more, none of them an op kind's colour (palette.hpp),
  // so a rank's line never reads as an F or a B.
  for (const char* c : {"#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d",
                        "#666666", "#17becf", "#8c564b"})
    colors.push_back(c);
  data["rank_colors"] = colors;
  data["memory"] = nlohmann::json::array();
  data["sweep"] = sweep_chart(runs);
  if (!options.pareto.empty()) {
    nlohmann::json points = nlohmann::json::array();
    for (const auto& p : options.pareto)
      points.push_back({{"label", p.label},
                        {"memory", p.memory},
                        {"makespan", p.makespan},
                        {"within_limit", p.within_limit},
                        {"front", p.front},
                        {"best", p.best}});
    data["pareto"] = {{"points", points}, {"limit", options.memory_limit}};
  }

  std::ostringstream runs_html;
  std::size_t timelines = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& run = runs[i];
    const std::string origin = origin_of(run);
    runs_html << fmt::format(
        "<div class=\"run\" id=\"run-{}\" data-origin=\"{}\">\n<h3>{}<span class=\"origin "
        "{}\">{}</span><span class=\"verdict-tag{}\">{}</span></h3>\n",
        i, xml_escape(origin), xml_escape(run.info.name), xml_escape(origin), xml_escape(origin),
        run.ok() ? "" : " bad", xml_escape(run.verdict().text()));
    if (run.deadlock) runs_html << deadlock_html(run);
    if (!run.trace) {
      runs_html << "<p class=\"invalid\">Not run: the program is invalid.</p>\n<ul>\n";
      for (const auto& d : run.diagnostics)
        runs_html << fmt::format("<li><code>{}</code>: {}</li>\n", xml_escape(d.kind),
                                 xml_escape(d.message));
      runs_html << "</ul>\n</div>\n";
      continue;
    }
    runs_html << "<div class=\"timeline\">\n";
    write_svg_timeline(runs_html, run,
                       {.time_end = time_end,
                        .width = 1200,
                        .interactive = true,
                        .id_prefix = fmt::format("r{}-", i)},
                       /*fragment=*/true);
    runs_html << "</div>\n";
    ++timelines;
    double max_bytes = 0;
    nlohmann::json series = memory_series(run, options.max_memory_points, max_bytes);
    const bool gib = max_bytes >= 1024.0 * 1024 * 1024;
    const double scale = gib ? 1024.0 * 1024 * 1024 : 1024.0 * 1024;
    // Six significant digits of time and 1/10000 of a MiB or GiB: more than a chart can show,
    // and a third of the bytes of full doubles.
    const double step = std::pow(10.0, std::floor(std::log10(time_end)) - 5);
    for (auto& rank : series)
      for (auto& point : rank) {
        point["x"] = std::round(point["x"].get<double>() / step) * step;
        point["y"] = std::round(point["y"].get<double>() / scale * 1e4) / 1e4;
      }
    const std::string canvas = fmt::format("chart-mem-{}", i);
    data["memory"].push_back(
        {{"canvas", canvas},
         {"title", "memory per rank (static + activations + buffers): " + run.info.name},
         {"unit", run.info.time_unit},
         {"y_unit", gib ? "GiB" : "MiB"},
         {"ranks", std::move(series)}});
    runs_html << fmt::format(
        "<div class=\"memory-scroll\"><div class=\"chart memory\"><canvas "
        "id=\"{}\"></canvas></div></div>\n",
        canvas);
    runs_html << "</div>\n";
  }

  const std::size_t charts =
      data["memory"].size() + (data["sweep"].is_null() ? 0 : 1) + (data.contains("pareto") ? 1 : 0);
  out << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         // Nothing but what the page holds: no fetch can leave it, even by mistake.
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
         "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n"
         "<meta name=\"generator\" content=\"ppsim\">\n";
  out << "<title>" << xml_escape(options.title) << "</title>\n<style>" << kStyle << "</style>\n";
  out << "</head>\n";
  out << fmt::format("<body data-runs=\"{}\" data-timelines=\"{}\" data-expected-charts=\"{}\">\n",
                     runs.size(), timelines, charts);
  out << "<h1>" << xml_escape(options.title) << "</h1>\n";
  out << fmt::format(
      "<p class=\"meta\">{} run{}; times in {}{}. Charts drawn with Chart.js {} (MIT license, "
      "embedded: the page loads nothing from the network). Bubble = 1 - sum(busy) / (P * "
      "makespan); vs ideal = (makespan - max busy) / max busy (docs/METRICS.md).</p>\n",
      runs.size(), runs.size() == 1 ? "" : "s", xml_escape(unit.empty() ? "ms" : unit),
      mixed_units ? " (units differ between runs: see each run)" : "",
      xml_escape(chart_js_version()));

  out << "<h2 id=\"comparison\">Comparison</h2>\n<table id=\"runs\" class=\"sortable\">\n<thead>"
         "<tr>";
  for (const char* h : {"#", "config", "origin", "schedule", "comm", "P", "V", "M", "makespan",
                        "bubble", "bubble vs ideal", "peak memory per rank",
                        "peak in-flight per rank", "comm volume", "verdict"})
    out << "<th scope=\"col\">" << xml_escape(h) << "</th>";
  out << "</tr></thead>\n<tbody>\n";
  for (std::size_t i = 0; i < runs.size(); ++i) out << table_row(runs[i], i);
  out << "</tbody>\n</table>\n";
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (const std::string stall = lowering_stall(runs[i]); !stall.empty())
      out << fmt::format("<p class=\"note\" id=\"stall-{}\">#{} {}: {}</p>\n", i, i + 1,
                         xml_escape(runs[i].info.name), xml_escape(stall));

  if (!data["sweep"].is_null())
    out << "<h2 id=\"sweep\">Bubble fraction against microbatches</h2>\n<p class=\"meta\">The "
           "dashed curve is the closed form (P-1)/(M+P-1) of GPipe and 1F1B with uniform stages "
           "and free communication.</p>\n"
        << (data["sweep"]["closed_form_gap"].get<double>() > 0.005
                ? fmt::format("<p class=\"note\" id=\"sweep-note\">GPipe and 1F1B sit up to {:.3f} "
                              "from the closed form here: these runs pay for communication "
                              "(latency, bandwidth) or uneven stages, which it leaves out.</p>\n",
                              data["sweep"]["closed_form_gap"].get<double>())
                : std::string())
        << "<div class=\"chart sweep\"><canvas id=\"chart-sweep\"></canvas></div>\n";

  if (data.contains("pareto"))
    out << "<h2 id=\"pareto\">Makespan against peak memory</h2>\n<p class=\"meta\">Every "
           "candidate of the search that ran to the end; the front joins those no other beats "
           "on both; the dashed line is the memory limit. The best is the star; its timeline is "
           "below.</p>\n<div class=\"chart sweep\"><canvas id=\"chart-pareto\"></canvas></div>\n";

  out << fmt::format(
      "<h2 id=\"timelines\">Timelines</h2>\n<p class=\"meta\">One shared time axis (0 to {:.3f} "
      "{}); hover a box for the op, its start, end and what it waited for.</p>\n",
      time_end, xml_escape(unit.empty() ? "ms" : unit));
  out << runs_html.str();
  out << "<div id=\"tooltip\" hidden></div>\n";
  out << "<script id=\"ppsim-data\" type=\"application/json\">" << script_json(data)
      << "</script>\n";
  out << "<script>\n" << detail::chart_js_source() << "\n</script>\n";
  out << "<script>" << kScript << "</script>\n</body>\n</html>\n";
}

}  // namespace ppsim::viz
