#pragma once
// JSON run configs (docs/CONFIG.md): loading, strict checking, command-line overrides, building.
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ppsim/schedules/generator.hpp"
#include "ppsim/schedules/lowering.hpp"
#include "ppsim/sim/options.hpp"

namespace ppsim::sim {

// Bad input: names the source (file or command-line flag), the key or line:column, and what was
// expected. what() is the full message.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(const std::string& source, const std::string& key, const std::string& message);
  const std::string& source() const { return source_; }
  const std::string& key() const { return key_; }

 private:
  std::string source_, key_;
};

struct CostSpec {  // fields left empty fall back to the level above
  std::optional<double> forward, backward, backward_input, backward_weight;
};

struct Config {
  std::string source;  // where it came from, for messages
  std::string name;
  std::string time_unit = "ms";
  std::string kind;  // schedule generator name, or "custom"
  schedules::ScheduleParams params;
  std::vector<std::string> custom_ops;  // kind "custom": one op line per rank
  schedules::LoweringOptions lowering;
  CostSpec costs;
  std::map<int, CostSpec> stage_costs;
  NetworkOptions network;
  MemoryOptions memory;
  nlohmann::json raw;  // the JSON it was parsed from (after overrides)
};

// Parse text; errors carry `source` and, for malformed JSON, line and column.
nlohmann::json parse_json_text(const std::string& text, const std::string& source);
// Apply "a.b.c=value" (value parsed as JSON, else taken as a string).
void apply_override(nlohmann::json& config, const std::string& assignment);
Config parse_config(const nlohmann::json& json, const std::string& source);
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// Microseconds per time unit (Chrome traces are in microseconds).
double microseconds_per_unit(const std::string& time_unit);

struct BuiltRun {
  schedules::Program program;  // lowered, with comm ops
  SimOptions options;
};
// Generate + lower + resolve costs; generator parameter errors become ConfigErrors on schedule.*.
BuiltRun build(const Config& config);

}  // namespace ppsim::sim
