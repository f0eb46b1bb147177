#pragma once
// A config made ready to run: its Program (generated and lowered, or parsed) and its model with
// every stage's costs resolved. The simulator, the executor and the CLI all start here.
#include <memory>
#include <optional>

#include "ppsim/config/config.hpp"
#include "ppsim/config/model.hpp"
#include "ppsim/config/resources.hpp"
#include "ppsim/schedules/program.hpp"

namespace ppsim::config {

struct Prepared {
  Config config;
  std::shared_ptr<const schedules::Program> program;
  Model model;
  // With `model` and `hardware`: what the costs and memory were derived from (docs/MODEL.md).
  std::optional<model::Derivation> derivation;
};

// The derivation for `config` run as `program` (stages, ranks); throws ConfigError naming the key.
model::Derivation derive(const Config& config, const schedules::Program& program);

// Throws ConfigError naming the key for parameters the generator or lowering cannot honour, for a
// program whose estimated memory exceeds `limits` (checked before anything is built) and for
// numbers whose times or byte sums would overflow (docs/LIMITS.md).
Prepared prepare(const Config& config, const ResourceLimits& limits = {});

}  // namespace ppsim::config
