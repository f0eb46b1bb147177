#pragma once
// Everything known about one run of one config: what ran, what was wrong with it, its metrics,
// why it hung, and (when recorded) its timeline. Simulator and executor produce it; writers
// (viz/) draw it without knowing which produced it.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ppsim/record/deadlock.hpp"
#include "ppsim/record/metrics.hpp"
#include "ppsim/record/step.hpp"
#include "ppsim/record/trace.hpp"
#include "ppsim/schedules/diagnostic.hpp"
#include "ppsim/schedules/program.hpp"

namespace ppsim::record {

struct RunInfo {
  std::string name;        // the config's name
  std::string source;      // the config file (or sweep point) it came from
  std::string schedule;    // generator name, or "custom"
  std::string comm_style;  // lowering style, or "custom" for hand-written communication
  std::string matching;    // "tag" or "fifo"
  std::string time_unit = "ms";
  std::string origin = "simulated";  // or "measured"
  std::string semantics = "mpi";     // comm.semantics: "mpi" or "nccl"
  // Generated schedules: the lowering in force with its parameters ("async, prefetch 1"), and
  // the one the schedule gets when the config sets no comm.style; empty for the others.
  std::string lowering = {}, default_lowering = {};

  // "async/tag", "batched/fifo"; under NCCL's model (always fifo) "batched/nccl".
  std::string comm_label() const;
  // The comm style as the pictures title it: "async", or "async, nccl" under NCCL's model.
  std::string style_title() const;
};

enum class VerdictKind { ok, errors, deadlock, hang, invalid, out_of_memory };

struct Verdict {
  VerdictKind kind = VerdictKind::ok;
  std::size_t count = 0;     // errors, cycles, unmatched ops or invalid diagnostics
  std::string text() const;  // "ok", "DEADLOCK (1 cycle)", "HANG (2 unmatched)", ...
};

// A rank whose peak exceeds the memory it has (hardware.memory_bytes), and what the peak holds.
struct OutOfMemory {
  int rank = 0;
  std::int64_t peak = 0, limit = 0;
  std::int64_t static_bytes = 0, activation_bytes = 0, buffer_bytes = 0;
  bool split = true;  // false (a measured run): activation_bytes holds stashes and buffers both
  // "rank 0 peaks at 91.20 GiB, above its 74.51 GiB: static 38.10 GiB, activations ..."
  std::string describe() const;
};

struct RunRecord {
  RunInfo info;
  std::shared_ptr<const schedules::Program> program;
  std::vector<schedules::Diagnostic> diagnostics;  // static ones first, then those of the run
  std::optional<RunMetrics> metrics;  // absent when fatal diagnostics kept it from running
  std::optional<Deadlock> deadlock;
  std::optional<Trace> trace;  // when the run was recorded
  // Simulated runs: the rank held longest by its own sends (blocked after every receive it waited
  // for had arrived), and for how long in all; the lowering stalled that rank for that time.
  struct SendHold {
    int rank = -1;
    double time = 0;
  };
  std::optional<SendHold> send_hold;
  std::vector<OutOfMemory> out_of_memory;  // each rank over its memory, in rank order
  std::optional<StepTiming> step;          // simulated runs of a config with a `model` section

  Verdict verdict() const;
  bool ok() const { return verdict().kind == VerdictKind::ok; }
};

// Each rank of `metrics` whose peak exceeds `limit` (bytes; 0 = none), with the parts of its peak.
// `split`: the metrics say which part of the peak is stashes (a simulated run's do).
std::vector<OutOfMemory> out_of_memory(const RunMetrics& metrics, std::int64_t limit, bool split);

}  // namespace ppsim::record
