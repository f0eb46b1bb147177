#pragma once
// The executor's settings: the config's `real` section (registered with config::SectionRegistry,
// so neither the config library nor the simulator knows it), then the command line's overrides.
#include <cstdint>
#include <string>

#include "ppsim/config/config.hpp"

namespace ppsim::real {

struct Settings {
  std::string backend = "host";      // a TransportRegistry name
  std::string compute = "emulated";  // a ComputeRegistry name
  double time_scale = 1e-3;          // seconds of wall clock per time unit; 0: no delays
  double memory_scale = 0;           // real bytes per modelled byte in (0, 1]; 0: chosen (see docs)
  int iterations = 1;                // measured runs (the median one is reported)
  int warmup = 0;                    // runs before them, not reported
  double hang_timeout = 2.0;  // seconds with every unfinished rank blocked and nothing moving
  // The process's memory limit (--max-memory; not a config key), 0: none. Real buffers count
  // against it beside the estimate of the run's own tables.
  std::uint64_t max_memory = 0;
};

// Bounds of the settings (each one an error naming the key or option beyond it).
inline constexpr double kMaxTimeScale = 10.0;  // seconds of wall clock per time unit
inline constexpr double kMinTimeScale = 1e-9;  // the steady clock's resolution
// The longest run the host clock and the traces represent exactly: 2^53 ns, about 104 days.
inline constexpr double kMaxRunSeconds = 9007199.254740992;
inline constexpr int kMaxIterations = 1000;
inline constexpr int kMaxWarmup = 100;
inline constexpr double kMaxHangTimeout = 86400.0;  // seconds

// Registers the `real` section with config::SectionRegistry (idempotent). Call before loading a
// config that may hold one: until then load_config rejects the key `real` as unknown.
void register_settings_section();

// The `real` section of `config` (defaults where absent). Throws config::ConfigError naming the
// key.
Settings settings_of(const config::Config& config);

// "1ms", "250us", "0.5s", "0" -> seconds; throws std::invalid_argument saying what is expected.
double parse_duration(const std::string& text);
// parse_duration() at most kMaxTimeScale.
double parse_time_scale(const std::string& text);

}  // namespace ppsim::real
