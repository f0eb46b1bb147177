#include "ppsim/config/source.hpp"

namespace ppsim::config {

const ProgramSource* source_for_kind(std::string_view kind) {
  return SourceRegistry::instance().find_if(
      [&](const ProgramSource& s) { return s.handles(kind); });
}

}  // namespace ppsim::config
