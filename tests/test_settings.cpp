// The executor's settings (real/settings.hpp): the config's `real` section read strictly, every
// bad value an error naming the file and the key, and durations as "1ms", "250us", "0.5s", "0".
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "config_test.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/real/settings.hpp"

namespace {

using namespace ppsim::test::config_test;

json with_real(json section) {
  return minimal_with("real", std::move(section));
}

real::Settings settings(const json& section) {
  real::register_settings_section();
  return real::settings_of(config::parse_config(with_real(section), kSource));
}

}  // namespace

// Each bad value: a ConfigError from loading, naming the file and "real.KEY" and what is expected.
#define CHECK_REAL_ERROR(section, key_, expected_)                                          \
  do {                                                                                      \
    real::register_settings_section();                                                      \
    const config::ConfigError e_ =                                                          \
        error_of([&] { (void)config::parse_config(with_real(section), kSource); });         \
    INFO("what(): " << e_.what());                                                          \
    CHECK(e_.source() == kSource);                                                          \
    CHECK(e_.key() == std::string("real.") + key_);                                         \
    CHECK_THAT(e_.what(), StartsWith(kSource + ": key 'real." + std::string(key_) + "'") && \
                              Contains(expected_));                                         \
  } while (false)

TEST_CASE("settings.s_ms_us_ns_bare", "[settings]") {
  // parse_duration: s, ms, us, ns and a bare 0, in seconds
  CHECK(real::parse_duration("1ms") == Approx(1e-3));
  CHECK(real::parse_duration("250us") == Approx(250e-6));
  CHECK(real::parse_duration("0.5s") == Approx(0.5));
  CHECK(real::parse_duration("10ns") == Approx(10e-9));
  CHECK(real::parse_duration("1e3us") == Approx(1e-3));
  CHECK(real::parse_duration("0") == 0);
  CHECK(real::parse_duration("0ms") == 0);
}

TEST_CASE("settings.parse_duration_refuses_what_non", "[settings]") {
  // parse_duration refuses what is not a non-negative number with a unit
  for (const std::string bad :
       {"", "1", "ms", "-1ms", "1 ms", " 1ms", "1ms ", "nanms", "infs", "1e999s", "1msx", "1.2.3ms",
        "0x10ms", "1m", "1h", "1MS", "+1ms", ".5s", "00"}) {
    INFO("text: '" << bad << "'");
    const auto e = error_of<std::invalid_argument>([&] { real::parse_duration(bad); });
    CHECK_THAT(e.what(), Contains("expected a duration") && Contains("s, ms, us or ns"));
  }
}

TEST_CASE("settings.most_10_s_wall_clock", "[settings]") {
  // parse_time_scale: at most 10 s of wall clock per time unit
  CHECK(real::parse_time_scale("10s") == Approx(10.0));
  CHECK(real::parse_time_scale("0") == 0);
  const auto e = error_of<std::invalid_argument>([] { real::parse_time_scale("10.5s"); });
  CHECK_THAT(e.what(), Contains("at most 10 s"));
}

TEST_CASE("settings.documented_defaults", "[settings]") {
  // no real section: the documented defaults
  real::register_settings_section();
  const auto s = real::settings_of(config::parse_config(minimal(), kSource));
  CHECK(s.backend == "host");
  CHECK(s.compute == "emulated");
  CHECK(s.time_scale == Approx(1e-3));
  CHECK(s.memory_scale == 0);
  CHECK(s.iterations == 1);
  CHECK(s.warmup == 0);
  CHECK(s.hang_timeout == Approx(2.0));
  // An empty section is the same as none.
  const auto empty = settings(json::object());
  CHECK(empty.time_scale == s.time_scale);
  CHECK(empty.iterations == s.iterations);
}

TEST_CASE("settings.key_real_section_read", "[settings]") {
  // every key of the real section is read
  const auto s = settings({{"backend", "host"},
                           {"compute", "emulated"},
                           {"time_scale", "250us"},
                           {"memory_scale", 0.25},
                           {"iterations", 5},
                           {"warmup", 2},
                           {"hang_timeout", 0.5}});
  CHECK(s.backend == "host");
  CHECK(s.compute == "emulated");
  CHECK(s.time_scale == Approx(250e-6));
  CHECK(s.memory_scale == 0.25);
  CHECK(s.iterations == 5);
  CHECK(s.warmup == 2);
  CHECK(s.hang_timeout == 0.5);
  // Bounds are inclusive.
  const auto edge = settings({{"time_scale", "10s"},
                              {"memory_scale", 1},
                              {"iterations", 1000},
                              {"warmup", 100},
                              {"hang_timeout", 86400}});
  CHECK(edge.time_scale == 10);
  CHECK(edge.memory_scale == 1);
  CHECK(edge.iterations == 1000);
  CHECK(edge.warmup == 100);
  CHECK(edge.hang_timeout == 86400);
  CHECK(settings({{"time_scale", "0"}}).time_scale == 0);
}

TEST_CASE("settings.register_settings_section_idempotent", "[settings]") {
  // register_settings_section is idempotent
  real::register_settings_section();
  real::register_settings_section();
  CHECK(settings({{"iterations", 3}}).iterations == 3);
}

TEST_CASE("settings.bad_values_real_section_name", "[settings]") {
  // bad values in the real section name the file and the key
  CHECK_REAL_ERROR(json({{"backend", "carrier-pigeon"}}), "backend", "unknown backend");
  CHECK_REAL_ERROR(json({{"backend", 3}}), "backend", "expected a string");
  CHECK_REAL_ERROR(json({{"compute", "abacus"}}), "compute", "unknown compute");
  CHECK_REAL_ERROR(json({{"time_scale", "fast"}}), "time_scale", "expected a duration");
  CHECK_REAL_ERROR(json({{"time_scale", "-1ms"}}), "time_scale", "expected a duration");
  CHECK_REAL_ERROR(json({{"time_scale", 0.001}}), "time_scale", "such as \"1ms\"");
  CHECK_REAL_ERROR(json({{"time_scale", "11s"}}), "time_scale", "at most 10 s");
  CHECK_REAL_ERROR(json({{"memory_scale", 0}}), "memory_scale", "(0, 1]");
  CHECK_REAL_ERROR(json({{"memory_scale", 1.5}}), "memory_scale", "(0, 1]");
  CHECK_REAL_ERROR(json({{"memory_scale", -0.5}}), "memory_scale", "(0, 1]");
  CHECK_REAL_ERROR(json({{"memory_scale", "half"}}), "memory_scale", "expected a number");
  CHECK_REAL_ERROR(json({{"iterations", 0}}), "iterations", "expected an integer >= 1");
  CHECK_REAL_ERROR(json({{"iterations", 2.5}}), "iterations", "expected an integer >= 1");
  CHECK_REAL_ERROR(json({{"iterations", 1001}}), "iterations", "1..1000");
  CHECK_REAL_ERROR(json({{"warmup", -1}}), "warmup", "expected an integer >= 0");
  CHECK_REAL_ERROR(json({{"warmup", 101}}), "warmup", "0..100");
  CHECK_REAL_ERROR(json({{"hang_timeout", 0}}), "hang_timeout", "expected seconds in (0, 86400]");
  CHECK_REAL_ERROR(json({{"hang_timeout", -2}}), "hang_timeout", "expected seconds in (0, 86400]");
  CHECK_REAL_ERROR(json({{"hang_timeout", 86401}}), "hang_timeout", "(0, 86400]");
  CHECK_REAL_ERROR(json({{"hang_timeout", "2s"}}), "hang_timeout", "expected a number");
  CHECK_REAL_ERROR(json({{"hang_timout", 2}}), "hang_timout", "unknown key");
}

TEST_CASE("settings.real_section_object_error_naming", "[settings]") {
  // a real section that is not an object is an error naming it
  real::register_settings_section();
  const auto e = error_of([] { (void)config::parse_config(with_real(json(5)), kSource); });
  CHECK(e.key() == "real");
  CHECK_THAT(e.what(), Contains("expected an object"));
}

TEST_CASE("settings.bad_real_value_set_blamed", "[settings]") {
  // a bad real value from --set is blamed on the flag
  real::register_settings_section();
  json j = with_real(json::object());
  const std::string assignment = "real.iterations=0";
  config::apply_override(j, assignment);
  const auto e = error_of([&] { (void)config::parse_config(j, kSource, {assignment}); });
  CHECK(e.source() == "--set real.iterations=0");
  CHECK(e.key() == "real.iterations");
}
