#pragma once
// JSON run configs (docs/CONFIG.md): loading, strict checking and command-line overrides.
#include <cstddef>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ppsim/config/error.hpp"
#include "ppsim/config/model.hpp"
#include "ppsim/config/model_section.hpp"
#include "ppsim/config/source.hpp"
#include "ppsim/schedules/lowering.hpp"

namespace ppsim::config {

struct CostSpec {  // fields left empty fall back to the level above
  std::optional<double> forward, backward, backward_input, backward_weight;
  // `overlapped_fb`: a time, or {"fraction": x} of F + B; at most one of the two is set.
  std::optional<double> overlapped_fb, overlapped_fb_fraction;
};

struct Config {
  std::string source;  // where it came from, for messages
  std::string name;
  std::string time_unit = "ms";
  std::string kind;                            // schedule.kind as written
  std::shared_ptr<const ProgramSpec> program;  // what the source of that kind read
  schedules::LoweringOptions lowering;
  // The config sets no comm.style: the schedule's own default lowering is in force
  // (ProgramSpec::default_comm), with its parameters unless the config gives them.
  bool default_comm = true;
  CostSpec costs;
  std::map<int, CostSpec> stage_costs;
  double launch_overhead = 0.0, start_offset = 0.0;  // costs.launch_overhead, costs.start_offset
  NetworkOptions network;
  MemoryOptions memory;
  // `model` and `hardware` (docs/MODEL.md): with both, prepare() derives costs and memory.
  std::optional<ModelSection> model_section;
  std::optional<HardwareSection> hardware;
  std::map<std::string, nlohmann::json> sections;  // registered sections (section.hpp), checked
  nlohmann::json raw;                              // the JSON it was parsed from (after overrides)
  // The --set assignments applied, as (key path, "--set KEY=VALUE"), in order.
  std::vector<std::pair<std::string, std::string>> overrides;

  std::string comm_style() const { return program ? program->comm_style(lowering) : ""; }
  // Where the value of `key` came from: the last --set that wrote it (or a key around it), else
  // the file. Errors about a key name this source.
  std::string source_of(const std::string& key) const;
};

// Input limits (docs/CONFIG.md#limits).
inline constexpr std::size_t kMaxConfigBytes = std::size_t{16} << 20;  // a config file
inline constexpr int kMaxJsonDepth = 64;  // nested objects/arrays; configs need about 5

// Parse text; errors carry `source` and, for malformed JSON, line and column. Nesting deeper than
// kMaxJsonDepth and a key given twice in one object are errors found while parsing, so that no
// deeper value is ever built.
nlohmann::json parse_json_text(const std::string& text, const std::string& source);
// Reads at most kMaxConfigBytes (+1 to tell it is more); throws ConfigError naming the path and
// the reason (a directory, errno's text, too large).
std::string read_config_file(const std::string& path);
// Apply "a.b.c=value" (value parsed as JSON, else taken as a string), under the same depth and
// duplicate-key rules; errors name "--set a.b.c=value". Returns the key path set.
std::string apply_override(nlohmann::json& config, const std::string& assignment);
// `overrides`: the --set assignments already applied to `json`, so errors about their keys name
// the flag rather than `source`.
Config parse_config(const nlohmann::json& json, const std::string& source,
                    const std::vector<std::string>& overrides = {});
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// Microseconds per time unit (Chrome traces are in microseconds).
double microseconds_per_unit(const std::string& time_unit);

}  // namespace ppsim::config
