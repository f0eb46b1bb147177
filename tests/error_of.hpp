#pragma once
// The exception a statement throws, for tests that check its message, file and key.
#include <catch2/catch.hpp>
#include <stdexcept>

#include "ppsim/config/error.hpp"

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

}  // namespace ppsim::test
