#pragma once
// A trace written while the run happens: an Observer that encodes each event as it arrives into
// a reusable buffer and hands it to the stream, so its memory does not grow with the run. The
// file formats are registered (trace_format.hpp): json (Chrome trace event JSON, as
// write_chrome_trace), json.gz (the same bytes gzip-compressed) and pftrace (Perfetto's protobuf
// TrackEvents, several times smaller and faster to load).
// The same content in each: a process per rank, compute and comm-op tracks, one track per peer
// and direction for transfers with flows send -> receive, memory and in-flight counters (a sample
// only when the value changed), and from a run record the config, metrics and verdict, and where
// each rank blocked for good. docs/TRACES.md describes the formats.
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ppsim/record/observer.hpp"
#include "ppsim/record/run_record.hpp"
#include "ppsim/schedules/program.hpp"
#include "ppsim/schedules/semantics.hpp"
#include "ppsim/viz/chrome_trace.hpp"
#include "ppsim/viz/trace_format.hpp"

namespace ppsim::viz {

namespace detail {
class ByteSink;
class TraceEncoder;
}  // namespace detail

class TraceStream : public record::Observer {
 public:
  TraceStream(std::ostream& out, const TraceFormat& format);
  ~TraceStream() override;
  TraceStream(const TraceStream&) = delete;
  TraceStream& operator=(const TraceStream&) = delete;

  // Starts the next run's process group, after the ranks of the runs before it: ranks are
  // processes "<label> rank N" ("rank N" without a label). The program must outlive the run.
  void begin_run(const schedules::Program& program, const ChromeTraceOptions& options,
                 const std::string& label = "");
  // Ends the current run. With a record: a global "run" instant whose args are the run's
  // metadata (config, metrics, verdict, deadlock), and an instant where each rank blocked for
  // good. Returns that metadata (null without a record).
  nlohmann::json end_run(const record::RunRecord* rec);
  // Writes the end of the file; other_data: the members of the JSON form's otherData.
  void close(const std::string& other_data);
  // One run from its record: end_run, then otherData as write_chrome_trace(rec) writes it.
  void finish(const record::RunRecord& rec);

  // Events of a single-threaded producer (on_begin with concurrent == false; the simulator).
  void on_begin(int ranks, bool concurrent) override;
  void on_compute(int rank, int pos, double start, double end) override;
  void on_blocked(int rank, int pos, double start, double end) override;
  void on_post(int rank, int pos, double time) override;
  void on_transfer(const record::TransferEvent& t) override;
  void on_counter(int rank, double time, std::int64_t memory_bytes, int inflight) override;
  void on_rank_end(int rank, const record::RankTimeline& timeline) override;

 private:
  struct RankState {
    int last_pos = -1;  // the last op with a span, and when it started
    double last_start = 0;
    std::int64_t memory = -1;  // the last counter values written (-1: none yet)
    int inflight = -1;
    // Send/recv threads named so far (tids, sorted): a rank has few peers, and a table by tid
    // would hold a bit per rank of the run on every rank (5 GiB at 200,000 ranks).
    std::vector<int> named;
    record::RankTimeline timeline;
    bool ended = false;
  };
  RankState& rank_state(int rank);
  std::string_view op_text(int rank, const schedules::Op& op);
  void name_thread(int rank, int tid, std::string_view head, int peer);

  std::unique_ptr<detail::ByteSink> sink_;
  std::unique_ptr<detail::TraceEncoder> enc_;
  const schedules::Program* program_ = nullptr;
  std::unique_ptr<schedules::Semantics> sem_;
  ChromeTraceOptions options_;
  std::string prefix_;
  int pid_base_ = 0, next_pid_base_ = 0;
  std::uint64_t flows_ = 0;
  std::vector<RankState> ranks_;
  std::string text_;  // scratch for op texts
  char plain_[64];    // the same, for plain ops
  bool closed_ = false;
};

}  // namespace ppsim::viz
