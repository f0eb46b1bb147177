#pragma once
// Chrome trace event JSON (Perfetto, chrome://tracing): one process per rank, compute and
// communication on separate threads, flow arrows send -> receive, memory and in-flight counters.
// From a whole run record it also carries the config and the metrics as trace metadata
// ("otherData", shown by chrome://tracing's Metadata button, and the args of a global "run" event
// at time 0 that Perfetto shows), and, when the run hung, an instant event where each rank blocked
// for good.
#include <ostream>
#include <span>
#include <string>

#include "ppsim/record/run_record.hpp"
#include "ppsim/record/trace.hpp"
#include "ppsim/schedules/program.hpp"

namespace ppsim::viz {

// The file format (viz/trace_format.hpp); JSON unless asked otherwise.
struct TraceFormat;

struct ChromeTraceOptions {
  double us_per_unit = 1000.0;  // trace timestamps are microseconds; configs default to ms
  std::string title;            // empty with a run record: the config's name
};

// Needs rec.trace; throws std::invalid_argument if the record has no trace.
void write_chrome_trace(std::ostream& out, const record::RunRecord& rec,
                        const ChromeTraceOptions& options);
void write_chrome_trace(std::ostream& out, const record::RunRecord& rec,
                        const ChromeTraceOptions& options, const TraceFormat& format);

void write_chrome_trace(std::ostream& out, const record::Trace& trace,
                        const schedules::Program& program, const ChromeTraceOptions& options);
void write_chrome_trace(std::ostream& out, const record::Trace& trace,
                        const schedules::Program& program, const ChromeTraceOptions& options,
                        const TraceFormat& format);

// Several runs in one trace, one process group each (e.g. a simulated and a measured run of one
// config): run k's ranks are processes named "<label> rank N", after the ranks of the runs
// before it; otherData holds each run's metadata under "runs".
struct LabelledRun {
  const record::RunRecord* record;
  std::string label;
};
void write_chrome_trace(std::ostream& out, std::span<const LabelledRun> runs,
                        const ChromeTraceOptions& options);
void write_chrome_trace(std::ostream& out, std::span<const LabelledRun> runs,
                        const ChromeTraceOptions& options, const TraceFormat& format);

}  // namespace ppsim::viz
