#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/generator.hpp"

namespace ppsim::schedules {

// Defined in the file CMake generates from schedules/src/generators/*.cpp.
void register_builtin_generators(Registry& registry);

namespace {
bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}
}  // namespace

Registry& Registry::instance() {
  static Registry registry = [] {
    Registry r;
    register_builtin_generators(r);
    std::sort(r.generators_.begin(), r.generators_.end(),
              [](const Generator& a, const Generator& b) { return a.name < b.name; });
    return r;
  }();
  return registry;
}

void Registry::add(Generator generator) {
  generators_.push_back(std::move(generator));
}

const Generator* Registry::find(std::string_view name) const {
  for (const auto& g : generators_) {
    if (iequals(g.name, name)) return &g;
    for (const auto& alias : g.aliases)
      if (iequals(alias, name)) return &g;
  }
  return nullptr;
}

Program generate(std::string_view kind, const ScheduleParams& params) {
  const Generator* g = Registry::instance().find(kind);
  if (g == nullptr) {
    std::vector<std::string> names;
    for (const auto& gen : Registry::instance().all()) names.push_back(gen.name);
    throw ParameterError("kind", fmt::format("unknown schedule '{}'; known schedules: {}", kind,
                                             fmt::join(names, ", ")));
  }
  check_common_params(params);
  return g->build(params);
}

void check_common_params(const ScheduleParams& p) {
  if (p.ranks < 1)
    throw ParameterError("ranks", fmt::format("ranks must be >= 1, got {}", p.ranks));
  if (p.microbatches < 1)
    throw ParameterError("microbatches",
                         fmt::format("microbatches must be >= 1, got {}", p.microbatches));
  if (p.chunks < 1)
    throw ParameterError("chunks", fmt::format("chunks must be >= 1, got {}", p.chunks));
  if (p.microbatch_group_size < 0)
    throw ParameterError(
        "microbatch_group_size",
        fmt::format("microbatch_group_size must be >= 1, got {}", p.microbatch_group_size));
  // Stage and microbatch indices are 32-bit and the op lists must fit in memory.
  const double compute_ops = 2.0 * p.ranks * p.chunks * p.microbatches;  // double: cannot overflow
  if (compute_ops > 4e8)
    throw ParameterError(
        "microbatches",
        fmt::format("{} ranks x {} chunks x {} microbatches is too large to simulate", p.ranks,
                    p.chunks, p.microbatches));
}

}  // namespace ppsim::schedules
