#pragma once
// The subcommands of `ppsim`. Each returns the process exit code: 0 ok, 1 the schedule is wrong,
// 2 bad input or usage (docs/CLI.md).
#include <cstdint>
#include <string>
#include <vector>

#include "ppsim/config/resources.hpp"

namespace ppsim::cli {

struct CommonOptions {
  std::vector<std::string> overrides;                       // --set key=value
  std::uint64_t max_memory = config::default_max_memory();  // --max-memory; 0 = no limit
};

int cmd_run(const std::string& config, bool json, const std::string& trace_file,
            const CommonOptions& common);
int cmd_compare(const std::vector<std::string>& configs, bool json, bool csv,
                const std::vector<std::string>& schedules, const std::vector<int>& microbatches,
                const std::vector<int>& chunks, const CommonOptions& common);
int cmd_check(const std::vector<std::string>& configs, bool json, const CommonOptions& common);
int cmd_list();
int cmd_export(const std::string& config, const CommonOptions& common);

}  // namespace ppsim::cli
