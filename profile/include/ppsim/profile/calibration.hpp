#pragma once
// A calibration fragment measured on one stage layout, applied to a program of another: the
// 1F1B run that was profiled, predicting interleaved 1F1B or DualPipeV on the same ranks.
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ppsim/config/prepare.hpp"
#include "ppsim/model/model.hpp"
#include "ppsim/real/collective_fit.hpp"
#include "ppsim/schedules/program.hpp"

namespace ppsim::profile {

// The fragment's `costs` (per_stage, launch_overhead, start_offset) for `target`, whose stages
// sit on the same ranks in another layout (`source_ranks[s]`: the rank source stage s ran on).
// Each rank's layers are assumed split evenly over the stages it runs: a target stage costs its
// rank's measured total over the number of stages it runs there (F, and I and W or B). A
// backward measured only whole is split by the target model's own I:W ratio where it has one
// (ZB-H1 from a 1F1B profile), else kept whole. Throws config::ConfigError naming `file` when the
// rank counts differ.
nlohmann::json map_costs(const nlohmann::json& costs, const std::vector<int>& source_ranks,
                         const schedules::Program& target, const model::CostModel& target_model,
                         const std::string& file);

// The fragment's `collectives`: each measured collective's fit (real::fit_collectives) as
// {"ranks", "all_reduce": {"latency", "bus_bandwidth", "samples"}, ...}; null without samples.
nlohmann::json collectives_fragment(const std::vector<real::CollectiveSample>& samples);

// A calibration fragment (`whole`: `import-profile -o`'s, or `real --calibrate --json` output whose
// `calibrated` it is, read from `file`) as --set overrides: `costs=...` and `comm.latency`,
// `comm.bandwidth`; `collectives` as `hardware.collectives.latency` and `bus_efficiency` (the
// all-reduce's bus bandwidth over the target's `intra_node` bandwidth) where the target has a
// hardware section. With a `layout`, the costs go through map_costs for the config `target()`
// prepares. Throws config::ConfigError naming `file` and the key.
std::vector<std::string> calibration_overrides(const nlohmann::json& whole, const std::string& file,
                                               const std::function<config::Prepared()>& target);

}  // namespace ppsim::profile
