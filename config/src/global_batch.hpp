#pragma once
// model.global_batch_size, Megatron's key: it fixes the microbatches of a step, M = global batch /
// (micro_batch_size · data_parallel), written into the schedule before the config is read.
#include <nlohmann/json.hpp>
#include <string>

namespace ppsim::config {

// `j` with schedule.microbatches set from model.global_batch_size (unchanged without one).
// Throws ConfigError naming model.global_batch_size when it does not divide, or
// schedule.microbatches when a given M disagrees.
nlohmann::json with_global_batch(const nlohmann::json& j, const std::string& source);

}  // namespace ppsim::config
