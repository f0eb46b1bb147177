#pragma once
// PyTorch profiler (Kineto) Chrome traces of pipeline runs, one file per rank (docs/PROFILES.md):
// the pipeline actions and profiler steps they hold, read into a measured run record and the
// costs they measure; and a measured run written back in that schema.
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ppsim/model/model.hpp"
#include "ppsim/record/run_record.hpp"
#include "ppsim/schedules/op.hpp"

namespace re2 {
class RE2;
}

namespace ppsim::profile {

// A trace the importer cannot use: what() names the file and, where one is to blame, the event
// (`traceEvents[12]`). Exit 2 material.
class ProfileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How a range's name says which action it is. PyTorch pipelining names its ranges `PP:2F0`
// (`_get_profiler_function_name`); a map file adds other frameworks' names.
struct ActionPattern {
  std::string text;  // as written, for messages
  // Matched against the whole name. RE2: time linear in the name, no recursion, whatever the
  // pattern (a map file is input); shared, as RE2 does not copy.
  std::shared_ptr<const re2::RE2> regex;
  // The action's kind: fixed, or read from capture group `kind_group` (F, B, I or W).
  std::optional<schedules::OpKind> kind;
  int kind_group = 0, stage_group = 0, microbatch_group = 0;  // 0: absent (stage: the rank's)
};
std::vector<ActionPattern> default_patterns();
// A map file's bounds: patterns, and the bytes of one; range names longer than
// kMaxActionNameBytes are never actions (kernel names can be long, actions' names are not).
inline constexpr std::size_t kMaxPatterns = 256, kMaxPatternBytes = 1000;
inline constexpr std::size_t kMaxActionNameBytes = 4096;
// {"actions": [{"pattern": "...", "kind": "F" | "group": N, "stage": N, "microbatch": N}]};
// throws ProfileError naming the file and key.
std::vector<ActionPattern> read_map(const std::string& path);

// One range of a trace, as the importer keeps it.
struct RangeEvent {
  std::string name;
  bool device = false;     // the GPU side (gpu_user_annotation), else the CPU range
  double ts = 0, dur = 0;  // microseconds, the rank's own clock
  std::size_t index = 0;   // in traceEvents, for messages
  std::int64_t tid = -1;   // the CPU thread (-1: not given)
};

// A launch on the CPU (cuda_runtime / cuda_driver) and what it ran on the GPU (kernel, memcpy,
// memset), tied by their `correlation` id: the device time of a CPU range whose GPU side has no
// annotation is that of the kernels launched inside it.
struct LaunchEvent {
  double ts = 0;
  std::int64_t correlation = 0, tid = -1;
};
struct DeviceEvent {
  double ts = 0, dur = 0;
  std::int64_t correlation = 0;
};

// A point-to-point op (`record_param_comms` with Collective name send or recv): its peer's
// global rank, its message size, and its CPU range.
struct CommEvent {
  bool send = false;
  int peer = -1;
  std::int64_t bytes = -1;  // -1: the dtype is not one whose size is known
  double ts = 0, dur = 0;
  std::int64_t tid = -1;
  std::size_t index = 0;
};

struct RankTrace {
  std::string file;
  int rank = -1;                   // distributedInfo.rank, or -1 when the file does not say
  int world_size = -1;             // distributedInfo.world_size, or -1
  std::vector<RangeEvent> steps;   // ProfilerStep#N
  std::vector<RangeEvent> ranges;  // ranges whose names a pattern matches
  std::vector<CommEvent> comms;    // sends and receives
  std::vector<LaunchEvent> launches;
  std::vector<DeviceEvent> device;  // GPU activity with a correlation id
  std::size_t events = 0;           // traceEvents read in all
  std::vector<std::string> sample;  // a few other names, for "found instead" messages
};

// What reading one trace may cost. The file is parsed as it is read (never held whole), and only
// what the importer uses is kept, so memory stays bounded whatever the input expands to: a run
// of whitespace or one token over max_gap, an event holding over max_event_values values or a
// kept string over max_string, and a gzip expanding over max_ratio times (past ratio_grace
// bytes) are refused as soon as they are seen.
inline constexpr std::size_t kMaxTraceBytes = std::size_t{2} << 30;
struct ReadLimits {
  std::size_t max_bytes = kMaxTraceBytes;  // uncompressed
  std::size_t max_gap = std::size_t{16} << 20;
  std::size_t max_event_values = std::size_t{1} << 20;
  std::size_t max_string = std::size_t{1} << 20;
  double max_ratio = 256;  // real traces compress 10 to 40 times
  std::size_t ratio_grace = std::size_t{64} << 20;
};
// The reader's own accounting, filled also when it throws.
struct ReadStats {
  std::size_t bytes_read = 0;   // uncompressed bytes parsed
  std::size_t peak_values = 0;  // JSON values held at once while parsing (the event being read)
};

// Reads one trace (`.json` or `.json.gz`), keeping only the profiler steps and the ranges a
// pattern matches. Throws ProfileError.
RankTrace read_trace(const std::string& path, const std::vector<ActionPattern>& patterns,
                     const ReadLimits& limits = {}, ReadStats* stats = nullptr);
// The same from text in memory (`source` names it in messages).
RankTrace parse_trace(std::string_view text, const std::string& source,
                      const std::vector<ActionPattern>& patterns, const ReadLimits& limits = {},
                      ReadStats* stats = nullptr);

struct ImportOptions {
  std::optional<int> step;  // ProfilerStep#N; default the last one in every trace
  std::string time_unit = "ms";
};

struct ImportedRank {
  std::string file;
  int rank = 0;
  int step = -1;             // the profiler step used, -1: the whole trace (no steps in it)
  double offset = 0;         // added to its clock to align it (time unit)
  std::size_t device = 0;    // actions timed on the GPU side (annotation or kernels)
  std::size_t launched = 0;  // of those, timed by the kernels launched inside the CPU range
};

// The point-to-point transfers: each send paired with its receive on the peer (the k-th send
// from a to b with the k-th receive on b from a, as NCCL matches them), timed on the aligned
// clocks from when both ran to when the first ended (the wait for the peer left out).
struct ImportedTransfers {
  std::size_t pairs = 0, unpaired = 0;
  double median = 0;                // transfer time (time unit)
  std::vector<std::int64_t> sizes;  // the distinct message sizes (bytes)
};

struct Imported {
  record::RunRecord measured;  // origin "measured": program, trace, metrics
  std::vector<ImportedRank> ranks;
  ImportedTransfers transfers;
  // comm.latency and comm.bandwidth (bytes per time unit; 0: no bandwidth term): fitted to the
  // transfers (one message size: its median time is the latency), else the one-way hop the
  // actions' own pairs bound.
  double latency = 0, bandwidth = 0;
  // The host's time to launch an op: the median gap before the actions whose input was already
  // there (time unit). Measured and reported; the cost model does not add it yet.
  double launch_overhead = 0;
  // The cost model the trace measures: per-stage F/I/W (or B) means with stalls left out.
  model::Model calibrated;
};

// Traces of one run, one per rank (ranks from distributedInfo, else the order given). Throws
// ProfileError for a trace with no pipeline actions (saying what it holds), a step missing,
// actions that contradict each other (a stage on two ranks, an action twice), and traces of
// different runs or not one per rank (world sizes that differ, a rank missing or twice).
Imported import_traces(const std::vector<RankTrace>& traces, const ImportOptions& options,
                       const std::vector<ActionPattern>& patterns = default_patterns());

// The calibrated costs and network as a config fragment ({"time_unit", "costs": {"per_stage":
// ..., "launch_overhead", "start_offset"}, "comm": {"latency", "bandwidth"}}), as `ppsim real
// --calibrate --json` prints it; `time_unit` is the unit `m`'s times are in (an import's is
// ImportOptions::time_unit). With the program it was measured on, also {"layout":
// {"stage_ranks": [...]}}, so that --calibration can carry it to another layout.
nlohmann::json calibration_fragment(const model::Model& m,
                                    const schedules::Program* measured_on = nullptr,
                                    const std::string& time_unit = ImportOptions{}.time_unit);

// Writes a measured (or simulated) run as Kineto traces, `DIR/rank<r>.json`: one ProfilerStep#0,
// the compute actions as `PP:` ranges on the CPU and GPU side, each transfer as a send and a
// receive (record_param_comms, its launch and its SendRecv kernel), distributedInfo.rank. Times
// in microseconds from `origin_us`. Throws ProfileError when a file cannot be written. Each file
// begins `{"distributedInfo":{"backend":"nccl","rank":R,`: `real --profile-trace` knows its own.
void write_traces(const record::RunRecord& run, const std::string& dir, double origin_us = 0);
// The same traces handed to `sink` one rank at a time, in rank order (its whole file's text),
// for a caller that publishes them with other outputs.
void write_traces(const record::RunRecord& run,
                  const std::function<void(int rank, const std::string& text)>& sink,
                  double origin_us = 0);

}  // namespace ppsim::profile
