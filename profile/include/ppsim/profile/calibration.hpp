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

// The fragment's `collectives`: each measured collective's fit (real::fit_collectives) as
// {"ranks", "all_reduce": {"latency", "bus_bandwidth", "samples"}, ...}; null without samples.
nlohmann::json collectives_fragment(const std::vector<real::CollectiveSample>& samples);

// A calibration fragment (`whole`: `import-profile -o`'s, or `real --calibrate --json` output whose
// `calibrated` it is, read from `file`) as --set overrides for the config `target()` prepares,
// key by key: each cost the fragment gives (`costs.forward`, `costs.per_stage.N.backward`, ...),
// `comm.latency` and `comm.bandwidth`, converted from the fragment's `time_unit` (the config's
// when it has none) to the config's; `collectives` (seconds) as `hardware.collectives.latency`
// and `bus_efficiency` (the all-reduce's bus bandwidth over the target's `intra_node` bandwidth)
// where the target has a hardware section. With a `layout` that differs from the target's, each
// rank's measured total of a kind is split evenly over the stages it runs there (a whole
// backward by the target's own I:W ratio where it has one). Unknown keys, values out of bounds,
// a stage not measured where a rank's total needs it and another rank count are errors: throws
// config::ConfigError naming `file` and the fragment's key.
std::vector<std::string> calibration_overrides(const nlohmann::json& whole, const std::string& file,
                                               const std::function<config::Prepared()>& target);

}  // namespace ppsim::profile
