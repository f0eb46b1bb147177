#pragma once
// JSON run configs (docs/CONFIG.md): loading, strict checking and command-line overrides.
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ppsim/config/error.hpp"
#include "ppsim/config/model.hpp"
#include "ppsim/config/source.hpp"
#include "ppsim/schedules/lowering.hpp"

namespace ppsim::config {

struct CostSpec {  // fields left empty fall back to the level above
  std::optional<double> forward, backward, backward_input, backward_weight;
};

struct Config {
  std::string source;  // where it came from, for messages
  std::string name;
  std::string time_unit = "ms";
  std::string kind;                            // schedule.kind as written
  std::shared_ptr<const ProgramSpec> program;  // what the source of that kind read
  schedules::LoweringOptions lowering;
  CostSpec costs;
  std::map<int, CostSpec> stage_costs;
  NetworkOptions network;
  MemoryOptions memory;
  std::map<std::string, nlohmann::json> sections;  // registered sections (section.hpp), checked
  nlohmann::json raw;                              // the JSON it was parsed from (after overrides)

  std::string comm_style() const { return program ? program->comm_style(lowering) : ""; }
};

// Parse text; errors carry `source` and, for malformed JSON, line and column.
nlohmann::json parse_json_text(const std::string& text, const std::string& source);
// Apply "a.b.c=value" (value parsed as JSON, else taken as a string).
void apply_override(nlohmann::json& config, const std::string& assignment);
Config parse_config(const nlohmann::json& json, const std::string& source);
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// Microseconds per time unit (Chrome traces are in microseconds).
double microseconds_per_unit(const std::string& time_unit);

}  // namespace ppsim::config
