#pragma once
// Chrome trace event JSON (Perfetto, chrome://tracing): one process per rank, compute and
// communication on separate threads, flow arrows send -> receive, memory and in-flight counters.
#include <ostream>
#include <string>

#include "ppsim/record/trace.hpp"
#include "ppsim/schedules/program.hpp"

namespace ppsim::viz {

struct ChromeTraceOptions {
  double us_per_unit = 1000.0;  // trace timestamps are microseconds; configs default to ms
  std::string title;
};

void write_chrome_trace(std::ostream& out, const record::Trace& trace,
                        const schedules::Program& program, const ChromeTraceOptions& options);

}  // namespace ppsim::viz
