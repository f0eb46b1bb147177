#pragma once
// The subcommands of `ppsim`. Each returns the process exit code (docs/CLI.md, "Exit codes"):
// 0 ok, 1 a schedule is wrong, 2 bad input, usage or an output that could not be written. Failures
// of stdout itself are found by main (StandardOutput), which then exits 2.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "ppsim/config/resources.hpp"

namespace ppsim::cli {

constexpr int kOk = 0, kWrong = 1, kBadInput = 2;

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

// A comma-separated list option split into its elements; throws UsageError naming `option` for an
// empty element. parse_positive_list also requires integers in 1..2^31-1.
std::vector<std::string> split_list(const std::string& option, const std::vector<std::string>& raw);
std::vector<int> parse_positive_list(const std::string& option,
                                     const std::vector<std::string>& raw);

}  // namespace ppsim::cli
