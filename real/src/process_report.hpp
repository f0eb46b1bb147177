#pragma once
// What one process's rank measured in one iteration (internal to real/), as bytes: under a World
// each process packs its part and process 0 joins the parts into one run, in rank order, as the
// trace recorder joins the threads' buffers of a single process.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ppsim/record/trace.hpp"
#include "ppsim/record/wait_graph.hpp"
#include "ppsim/schedules/diagnostic.hpp"

namespace ppsim::real::detail {

struct ProcessReport {
  int rank = 0;
  record::RankTimeline timeline;
  std::vector<record::Span> spans;
  std::vector<record::TransferEvent> transfers;  // the ones it received
  std::vector<record::CounterSample> counters;
  std::vector<schedules::Diagnostic> diagnostics;
  std::vector<record::WaitEdge> edges;
  std::int64_t real_peak = 0;
  std::string failure;  // the rank threw (empty: it did not)
};

std::string pack(const ProcessReport& report);
// Throws std::runtime_error on bytes pack() did not make (truncated, trailing bytes).
ProcessReport unpack(std::string_view bytes);

}  // namespace ppsim::real::detail
