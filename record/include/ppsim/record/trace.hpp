#pragma once
// The timeline of one run, in one schema whether the simulator produced it or the executor
// measured it, so that one set of writers draws both and one comparer diffs them.
#include <cstdint>
#include <string>
#include <vector>

namespace ppsim::record {

enum class SpanKind : std::uint8_t {
  compute,  // a compute op ran on [start, end)
  blocked,  // a blocking comm op or WAIT held the rank on [start, end) (end == start: no wait)
  post,     // an asynchronous send or receive was posted at start (== end)
};

struct Span {
  int rank;
  int pos;  // index into the program's op list for that rank
  SpanKind kind;
  double start, end;
};

// One message, with both of its ends. Times of the transfer itself (the link busy from start to
// end); the posts of each side are the ops' own spans.
struct TransferEvent {
  int src_rank, src_pos;  // the send op
  int dst_rank, dst_pos;  // the receive op
  double start, end;
  std::int64_t bytes;
};

// Dynamic memory (activation stashes and communication buffers; static bytes are per rank in
// RankTimeline) and in-flight microbatches of a rank, sampled whenever either changes.
struct CounterSample {
  int rank;
  double time;
  std::int64_t memory_bytes;
  int inflight;
};

// When a rank began and stopped issuing ops, and how it stopped.
struct RankTimeline {
  double start = 0;  // when it issued its first op (0 for a rank without ops)
  double end = 0;    // when its last op ended, or when it blocked for good
  bool finished = true;
  int stuck_pos = -1;             // the op it blocked in for good (finished == false)
  std::int64_t static_bytes = 0;  // weights and optimizer state of the stages it holds
};

struct Trace {
  std::string time_unit = "ms";
  std::string origin = "simulated";  // or "measured"
  std::string clock = "model";       // "model": simulated time; "steady_clock": wall clock
  std::vector<RankTimeline> ranks;
  std::vector<Span> spans;  // per rank in issue order; ranks one after another
  std::vector<TransferEvent> transfers;
  std::vector<CounterSample> counters;
};

}  // namespace ppsim::record
