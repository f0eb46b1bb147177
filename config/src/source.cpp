#include "ppsim/config/source.hpp"

namespace ppsim::config {

// Defined in the file CMake generates from config/src/sources/*.cpp.
void register_builtin_sources(SourceRegistry& registry);

SourceRegistry& SourceRegistry::instance() {
  static SourceRegistry registry = [] {
    SourceRegistry r;
    register_builtin_sources(r);
    return r;
  }();
  return registry;
}

const ProgramSource* SourceRegistry::for_kind(std::string_view kind) const {
  for (const auto& s : sources_)
    if (s.handles(kind)) return &s;
  return nullptr;
}

}  // namespace ppsim::config
