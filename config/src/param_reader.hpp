#pragma once
// Reads the parameters an extension declares (a generator's from `schedule`, a comm style's from
// `comm`) out of a config section, with one wording for every mistake.
#include <fmt/format.h>

#include <string>
#include <string_view>
#include <vector>

#include "ppsim/config/reader.hpp"
#include "ppsim/schedules/params.hpp"

namespace ppsim::config {

// The one wording for a key the chosen extension does not declare while others do:
// "not a parameter of schedule '1f1b' (used by: interleaved-1f1b)".
inline std::string not_a_parameter_of(std::string_view what, std::string_view owner,
                                      const std::vector<std::string>& users) {
  return fmt::format("not a parameter of {} '{}' (used by: {})", what, owner,
                     fmt::join(users, ", "));
}

inline void read_params(Reader& r, const std::vector<schedules::ParamSpec>& specs,
                        const std::string& owner, schedules::Params& out) {
  for (const auto& spec : specs) {
    const nlohmann::json* v = r.get(spec.name);
    if (!v) {
      if (spec.required)
        r.missing(spec.name,
                  fmt::format("expected an integer >= {} ({})", spec.min, spec.description));
      continue;
    }
    if (!spec.keyword.empty() && v->is_string() && v->get<std::string>() == spec.keyword) {
      out.set(spec.name, spec.keyword_value);
      continue;
    }
    if (v->is_boolean() && spec.min == 0 && spec.max == 1) {  // a 0/1 flag: true / false too
      out.set(spec.name, v->get<bool>() ? 1 : 0);
      continue;
    }
    if (v->is_number_integer() && v->get<long long>() >= spec.min &&
        v->get<long long>() <= spec.max) {
      out.set(spec.name, v->get<long long>());
      continue;
    }
    std::string expected =
        spec.min == spec.max ? fmt::format("{} ({} takes only {})", spec.min, owner, spec.min)
        : spec.max >= 1'000'000'000 ? fmt::format("an integer >= {}", spec.min)
                                    : fmt::format("an integer in [{}, {}]", spec.min, spec.max);
    if (!spec.keyword.empty()) expected += fmt::format(" or \"{}\"", spec.keyword);
    if (spec.min == 0 && spec.max == 1) expected += " or true/false";
    r.fail(spec.name, fmt::format("expected {}, got {}", expected, Reader::describe(*v)));
  }
}

}  // namespace ppsim::config
