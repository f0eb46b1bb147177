#pragma once
// The exception a statement throws, for tests that check its message, file and key.
#include <catch2/catch.hpp>
#include <stdexcept>
#include <string>

#include "ppsim/config/error.hpp"
#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/program.hpp"

namespace ppsim::test {

// The E that `f` throws; fails the test when it throws none.
template <typename E = config::ConfigError, typename F>
E error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e;
  }
  FAIL("expected an exception, none was thrown");
  throw std::logic_error("unreachable");
}

// The ParseError that reading `text` as an op list throws.
inline schedules::ParseError parse_error_of(const std::string& text) {
  INFO("no ParseError for: " << text.substr(0, 80));
  return error_of<schedules::ParseError>([&] { schedules::Program::parse(text); });
}

}  // namespace ppsim::test
