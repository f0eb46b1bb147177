#pragma once
// The subcommands of `ppsim`. Each returns the process exit code (docs/CLI.md, "Exit codes"):
// 0 ok, 1 a schedule is wrong, 2 bad input, usage or an output that could not be written. Failures
// of stdout itself are found by main (StandardOutput), which then exits 2.
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ppsim/config/resources.hpp"

namespace ppsim::cli {

constexpr int kOk = 0, kWrong = 1, kBadInput = 2;
// `real` only: a rank failed (threw), and the run was interrupted (SIGINT/SIGTERM, 128 + 2).
constexpr int kRankFailed = 3, kInterrupted = 130;

// A bad command-line value found after parsing (exit 2); what() names the option.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CommonOptions {
  std::vector<std::string> overrides;                       // --set key=value
  std::uint64_t max_memory = config::default_max_memory();  // --max-memory; 0 = no limit
};

// The sweep options of `compare` as typed (each may repeat and holds a comma-separated list);
// checked by cmd_compare so that an empty or bad element is an error naming the option.
struct SweepOptions {
  std::vector<std::string> schedules, microbatches, chunks;
};

int cmd_run(const std::string& config, bool json, const std::string& trace_file,
            const CommonOptions& common);
int cmd_compare(const std::vector<std::string>& configs, bool json, bool csv,
                const SweepOptions& sweep, const CommonOptions& common);
int cmd_check(const std::vector<std::string>& configs, bool json, const CommonOptions& common);
int cmd_list();
int cmd_export(const std::string& config, const CommonOptions& common);

// `ppsim real` (docs/EXECUTOR.md). Values as typed, checked by cmd_real so that errors name the
// option; each given one overrides the config's `real` section.
struct RealOptions {
  std::optional<std::string> backend, compute, time_scale, memory_scale, iterations, warmup,
      hang_timeout;
  std::string trace_file;
  bool json = false;
  bool calibrate = false;
};
int cmd_real(const std::string& config, const RealOptions& options, const CommonOptions& common);

// Runs `body` with the CLI's error policy: bad input and output errors are printed as
// "ppsim: error: MESSAGE" naming `source` and give kBadInput.
int guarded_command(const std::string& source, const std::function<int()>& body);

// A comma-separated list option split into its elements; throws UsageError naming `option` for an
// empty element. parse_positive_list also requires integers in 1..2^31-1.
std::vector<std::string> split_list(const std::string& option, const std::vector<std::string>& raw);
std::vector<int> parse_positive_list(const std::string& option,
                                     const std::vector<std::string>& raw);

}  // namespace ppsim::cli
