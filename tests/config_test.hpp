#pragma once
// What the tests of config reading share: the names they are written with, the source name the
// errors they check carry, and the smallest config.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "error_of.hpp"

namespace ppsim::test::config_test {

using namespace ppsim;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nlohmann::json;
using test::error_of;

// The file name the configs are read under: their errors begin with it.
inline const std::string kSource = "cfg.json";

// 1F1B on 4 ranks with 8 microbatches, nothing else.
inline json minimal() {
  return json::parse(R"({"schedule": {"kind": "1f1b", "ranks": 4, "microbatches": 8}})");
}

// The minimal config with `section` under `key`.
inline json minimal_with(const std::string& key, json section) {
  json j = minimal();
  j[key] = std::move(section);
  return j;
}

}  // namespace ppsim::test::config_test
