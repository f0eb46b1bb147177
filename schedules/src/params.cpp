#include "ppsim/schedules/params.hpp"

#include <fmt/format.h>

#include "ppsim/schedules/error.hpp"

namespace ppsim::schedules {

const ParamSpec* find_param(const std::vector<ParamSpec>& specs, std::string_view name) {
  for (const auto& s : specs)
    if (s.name == name) return &s;
  return nullptr;
}

Params resolve(const std::vector<ParamSpec>& specs, const Params& given, std::string_view owner) {
  for (const auto& [name, value] : given.values()) {
    if (find_param(specs, name)) continue;
    std::vector<std::string> known;
    for (const auto& s : specs) known.push_back(s.name);
    throw ParameterError(name, fmt::format("{} does not take '{}'; its parameters: {}", owner, name,
                                           fmt::join(known, ", ")));
  }
  Params out;
  for (const auto& s : specs) {
    if (!given.has(s.name)) {
      if (s.required)
        throw ParameterError(s.name,
                             fmt::format("{} needs '{}' ({})", owner, s.name, s.description));
      out.set(s.name, s.default_value);
      continue;
    }
    const std::int64_t v = given.get(s.name);
    const bool keyword = !s.keyword.empty() && v == s.keyword_value;
    if (!keyword && (v < s.min || v > s.max))
      throw ParameterError(
          s.name, s.keyword.empty()
                      ? fmt::format("{} must lie in [{}, {}], got {}", s.name, s.min, s.max, v)
                      : fmt::format("{} must lie in [{}, {}] or be \"{}\", got {}", s.name, s.min,
                                    s.max, s.keyword, v));
    out.set(s.name, v);
  }
  return out;
}

}  // namespace ppsim::schedules
