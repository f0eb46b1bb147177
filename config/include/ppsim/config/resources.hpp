#pragma once
// The resource model (docs/LIMITS.md): what a config will cost in memory, estimated from its
// parameters before anything is generated, and the bounds on numbers that keep times and byte
// sums exact. prepare() applies both, so library users are protected as the CLI is.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ppsim/config/config.hpp"
#include "ppsim/config/model.hpp"
#include "ppsim/schedules/program.hpp"

namespace ppsim::config {

// What will be done with the program; each keeps different tables per op.
enum class Workload {
  program,  // generate and lower only (export)
  run,      // validate and simulate (check, run, compare)
  trace,    // run and record the timeline (run --trace)
};
std::string_view to_string(Workload w);

// Measured peak resident bytes per op of the lowered program (docs/LIMITS.md), rounded up.
double bytes_per_op(Workload w);
// Resident bytes of the process before any program exists.
inline constexpr double kBaseBytes = 16.0 * 1024 * 1024;

// Resident bytes per rank beside its ops (per-rank tables, timelines and the report's rank rows),
// measured with 1F1B at M=1 and 200k to 1M ranks (docs/LIMITS.md), rounded up.
inline constexpr double kBytesPerRank = 2560;
// The default limit's ceiling: a config from anywhere (CI over other people's files) cannot take
// more of the machine than this unless --max-memory says so.
inline constexpr std::uint64_t kDefaultMaxMemoryCap = std::uint64_t{2} << 30;

// Half of physical memory, lowered to the cgroup's memory.max and RLIMIT_AS when they are set,
// and at most kDefaultMaxMemoryCap.
std::uint64_t default_max_memory();

struct ResourceLimits {
  std::uint64_t max_memory = default_max_memory();  // bytes; 0 = unlimited
  Workload workload = Workload::run;
};

// An upper bound on the lowered program's op count, from the config alone.
struct OpEstimate {
  double ops = 0;
  double ranks = 0;
  std::string key;      // the key that makes it big, e.g. "schedule.microbatches"
  std::string formula;  // e.g. "schedule.ranks=4 x schedule.microbatches=8 x 8 ops"
};
OpEstimate estimate_ops(const Config& config);
// The peak resident bytes the estimate predicts for `workload`.
double estimated_bytes(const OpEstimate& estimate, Workload workload);

// Ops per (stage, microbatch) the estimate assumes: 3 compute kinds, 4 comm ops and their WAITs
// (the built-in lowerings give 5.5 to 7.7).
inline constexpr double kOpsPerStageMicrobatch = 8.0;
// Hard index bound, separate from memory: endpoint ids and op positions are 32-bit.
inline constexpr double kMaxOps = 2147483647.0;

// Throws ConfigError naming the key when the estimate exceeds the index bound or the limit.
void check_resources(const Config& config, const ResourceLimits& limits);
// Threads for running `configs` at once (at most `jobs`, at least 1): each is checked against the
// whole limit, so no more run together than the largest estimate fits into the limit.
unsigned jobs_within_memory(const std::vector<Config>& configs, const ResourceLimits& limits,
                            unsigned jobs);

// Bounds on numbers: beyond them sums lose exactness or overflow (docs/LIMITS.md).
inline constexpr double kMaxTime = 1e15;                // any time, in time units
inline constexpr std::int64_t kMaxBytes = 1LL << 53;    // one byte count
inline constexpr std::int64_t kMaxByteSum = 1LL << 62;  // a sum of byte counts
// Throws ConfigError naming the key when a run of `program` under `model` could reach a time
// above kMaxTime or a byte sum above kMaxByteSum, or runs an I or W op on a stage whose costs
// give only a full backward (one pass over the ops serves both).
void check_numbers(const Config& config, const schedules::Program& program, const Model& model);

// "512M", "8G", "1.5GiB", "1000000": bytes (K/M/G/T are powers of 1024). Throws
// std::invalid_argument with the reason.
std::uint64_t parse_bytes(std::string_view text);

}  // namespace ppsim::config
