#pragma once
// Top-level config sections owned by other libraries (e.g. `real` for the executor). A library
// registers its section's reader; load_config checks the section strictly and keeps its JSON for
// the owner, so adding a section touches neither this library nor the simulator.
#include <functional>
#include <string>
#include <vector>

#include "ppsim/base/registry.hpp"
#include "ppsim/config/reader.hpp"

namespace ppsim::config {

struct Section {
  std::string name;
  std::string description;
  std::function<void(Reader&)> check;  // reads (and so validates) every key; throws ConfigError
};

// Filled at run time by the owners (real::register_section); none are built in.
using SectionRegistry = base::Registry<Section>;
inline void register_builtins(SectionRegistry&) {}

}  // namespace ppsim::config
