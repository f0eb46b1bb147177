#pragma once
// SVG timeline of one run: one row per rank, a box per compute op coloured by kind (chunks as
// shades), transfers as thin lines between rows, idle time as gaps, a legend and a time axis.
// Takes the run record, so a simulated and a measured run are drawn by the same code.
#include <ostream>
#include <string>

#include "ppsim/record/run_record.hpp"

namespace ppsim::viz {

struct TimelineOptions {
  double time_end = -1;  // right end of the time axis (shared scale across several timelines); <0:
                         // this run's makespan
  int width = 1200;      // pixels of the drawing
  bool interactive = false;  // add per-box hover details (<title> and data-* attributes: op text,
                             // start, end, waited-for) for the HTML report
  std::string id_prefix;     // prefix for element ids, unique per timeline on one HTML page
};

// An SVG document (or, with `fragment`, an <svg> element without the XML prolog, for inlining in
// HTML). Needs rec.trace; throws std::invalid_argument if the record has no trace.
void write_svg_timeline(std::ostream& out, const record::RunRecord& rec,
                        const TimelineOptions& options = {}, bool fragment = false);

}  // namespace ppsim::viz
