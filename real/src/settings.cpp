#include "ppsim/real/settings.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "ppsim/config/reader.hpp"
#include "ppsim/config/section.hpp"
#include "ppsim/real/compute.hpp"
#include "ppsim/real/transport.hpp"

namespace ppsim::real {

namespace {

// Reads every key of the section; the load-time check and settings_of() share it, so what loads
// can always be read back.
Settings read_settings(config::Reader& r) {
  Settings s;
  s.backend = r.string("backend", s.backend);
  if (!TransportRegistry::instance().find(s.backend))
    r.fail("backend",
           fmt::format("unknown backend \"{}\"; expected one of {}", config::excerpt(s.backend),
                       fmt::join(TransportRegistry::instance().names(), ", ")));
  s.compute = r.string("compute", s.compute);
  if (!ComputeRegistry::instance().find(s.compute))
    r.fail("compute",
           fmt::format("unknown compute \"{}\"; expected one of {}", config::excerpt(s.compute),
                       fmt::join(ComputeRegistry::instance().names(), ", ")));
  if (const auto* v = r.get("time_scale")) {
    if (!v->is_string())
      r.fail("time_scale", fmt::format("expected a duration per time unit such as \"1ms\", got {}",
                                       config::Reader::describe(*v)));
    try {
      s.time_scale = parse_time_scale(v->get<std::string>());
    } catch (const std::invalid_argument& e) {
      r.fail("time_scale", e.what());
    }
  }
  if (r.has("memory_scale")) {
    const double x = r.number("memory_scale", 0, true);
    if (!(x > 0 && x <= 1))
      r.fail("memory_scale", fmt::format("expected a number in (0, 1], got {}", x));
    s.memory_scale = x;
  } else {
    (void)r.get("memory_scale");  // known, absent
  }
  s.iterations = r.integer("iterations", s.iterations, 1);
  if (s.iterations > kMaxIterations)
    r.fail("iterations",
           fmt::format("expected an integer in 1..{}, got {}", kMaxIterations, s.iterations));
  s.warmup = r.integer("warmup", s.warmup, 0);
  if (s.warmup > kMaxWarmup)
    r.fail("warmup", fmt::format("expected an integer in 0..{}, got {}", kMaxWarmup, s.warmup));
  if (r.has("hang_timeout")) {
    const double t = r.number("hang_timeout", 0, true);
    if (!(t > 0 && t <= kMaxHangTimeout))
      r.fail("hang_timeout",
             fmt::format("expected seconds in (0, {}], got {}", kMaxHangTimeout, t));
    s.hang_timeout = t;
  } else {
    (void)r.get("hang_timeout");
  }
  r.reject_unknown();
  return s;
}

}  // namespace

void register_settings_section() {
  // add() replaces a section of the same name, so calling this again changes nothing.
  config::SectionRegistry::instance().add(
      {"real", "settings of the executor (`ppsim real`, docs/EXECUTOR.md)",
       [](config::Reader& r) { (void)read_settings(r); }});
}

Settings settings_of(const config::Config& config) {
  const auto it = config.sections.find("real");
  if (it == config.sections.end()) return {};
  try {
    config::Reader r(it->second, config.source, "real.");
    return read_settings(r);
  } catch (const config::ConfigError& e) {
    // As load_config does: a bad value that came from --set is blamed on the flag.
    const std::string blame = config.source_of(e.key());
    if (e.source() == config.source && blame != config.source)
      throw config::ConfigError(blame, e.key(), e.message());
    throw;
  }
}

double parse_duration(const std::string& text) {
  const std::string expected =
      "expected a duration: a number >= 0 followed by s, ms, us or ns (e.g. \"1ms\", "
      "\"250us\", \"0.5s\"), or \"0\"";
  if (text == "0") return 0;
  std::size_t unit_at = text.size();
  while (unit_at > 0 && std::isalpha(static_cast<unsigned char>(text[unit_at - 1]))) --unit_at;
  const std::string number = text.substr(0, unit_at);
  const std::string_view unit = std::string_view(text).substr(unit_at);
  double per_unit = 0;
  if (unit == "s")
    per_unit = 1;
  else if (unit == "ms")
    per_unit = 1e-3;
  else if (unit == "us")
    per_unit = 1e-6;
  else if (unit == "ns")
    per_unit = 1e-9;
  const auto bad = [&] {
    return std::invalid_argument(
        fmt::format("'{}' is not a duration; {}", config::excerpt(text, 40), expected));
  };
  // strtod alone would take "inf", "nan", hex and leading blanks: only digits, one '.', and an
  // exponent are a number here.
  if (per_unit == 0 || number.empty() ||
      number.find_first_not_of("0123456789.eE+-") != std::string::npos ||
      !std::isdigit(static_cast<unsigned char>(number[0])))
    throw bad();
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || errno == ERANGE || !std::isfinite(x) || x < 0)
    throw bad();
  return x * per_unit;
}

double parse_time_scale(const std::string& text) {
  const double s = parse_duration(text);
  if (s > 0 && s < kMinTimeScale)  // the clock counts nanoseconds: times would be infinite
    throw std::invalid_argument(
        fmt::format("'{}' is too short: at least 1 ns of wall clock per time unit, or 0 for no "
                    "delays",
                    config::excerpt(text, 40)));
  if (s > kMaxTimeScale)
    throw std::invalid_argument(
        fmt::format("'{}' is too long: at most {} s of wall clock per time unit",
                    config::excerpt(text, 40), kMaxTimeScale));
  return s;
}

}  // namespace ppsim::real
