#pragma once
// `ppsim report`: one self-contained HTML page comparing run records (simulated or measured):
// a sortable table, one SVG timeline per run on a shared time scale, memory over time per rank,
// bubble fraction against microbatches for a sweep, and the cycle of a deadlocked run in words.
// Charts are drawn by Chart.js, embedded in the page; nothing is fetched from the network.
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "ppsim/record/run_record.hpp"

namespace ppsim::viz {

// A point of a search's Pareto chart (`ppsim search --report`): one finished candidate.
struct ParetoPoint {
  std::string label;
  std::int64_t memory = 0;  // its busiest rank's peak, bytes
  double makespan = 0;
  bool within_limit = true, front = false, best = false;
};

struct HtmlReportOptions {
  std::string title = "ppsim report";
  // Counter samples kept per rank in a memory chart (about two per 4 px of a 1200 px chart);
  // beyond it each time bucket keeps its minimum and maximum, so peaks stay visible while the
  // page stays small (32 ranks x 256 microbatches: ~0.5 MB of chart data per run).
  std::size_t max_memory_points = 600;
  // A search's candidates: drawn as makespan against peak memory, the front joined, the limit a
  // vertical line (bytes; 0 = none). Empty: no such chart.
  std::vector<ParetoPoint> pareto;
  std::int64_t memory_limit = 0;
};

// Runs without a trace appear in the table only. Runs are drawn in the order given.
void write_html_report(std::ostream& out, const std::vector<record::RunRecord>& runs,
                       const HtmlReportOptions& options = {});

// The version of the embedded Chart.js ("3.9.1"), as its file header states it.
std::string chart_js_version();

}  // namespace ppsim::viz
