#pragma once
// Top-level config sections owned by other libraries (e.g. `real` for the executor). A library
// registers its section's reader; load_config checks the section strictly and keeps its JSON for
// the owner, so adding a section touches neither this library nor the simulator.
#include <functional>
#include <string>
#include <vector>

#include "ppsim/config/reader.hpp"

namespace ppsim::config {

struct Section {
  std::string name;
  std::string description;
  std::function<void(Reader&)> check;  // reads (and so validates) every key; throws ConfigError
};

class SectionRegistry {
 public:
  static SectionRegistry& instance();
  void add(Section section);
  const Section* find(std::string_view name) const;
  const std::vector<Section>& all() const { return sections_; }

 private:
  std::vector<Section> sections_;
};

}  // namespace ppsim::config
