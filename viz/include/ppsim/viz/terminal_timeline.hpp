#pragma once
// A compact timeline for the terminal: one line per rank, one character per column of time
// (F, B, I, W, X for overlapped F&B, '.' idle, '-' blocked in communication, '!' where a rank
// blocked for good), then a time axis. Takes the run record, like every writer.
#include <string>

#include "ppsim/record/run_record.hpp"

namespace ppsim::viz {

struct TerminalTimelineOptions {
  int width = 100;     // characters per line, labels included
  bool color = false;  // ANSI background colours per kind (for a TTY)
};

// Needs rec.trace; throws std::invalid_argument if the record has no trace.
std::string terminal_timeline(const record::RunRecord& rec,
                              const TerminalTimelineOptions& options = {});

}  // namespace ppsim::viz
