#include "ppsim/sim/analysis.hpp"

#include <set>

#include "ppsim/schedules/validation.hpp"

namespace ppsim::sim {

Analysis analyze(const Config& config, Observer* observer) {
  Analysis a{config, build(config), {}, std::nullopt};
  a.errors = schedules::validate(a.run.program);
  if (schedules::has_fatal(a.errors)) return a;
  a.result = simulate(a.run.program, a.run.options, observer);
  // The static report of a hazard kind is complete; the simulator's own sighting adds nothing.
  std::set<std::string> static_kinds;
  for (const auto& d : a.errors) static_kinds.insert(d.kind);
  for (auto& d : a.result->errors)
    if (!static_kinds.count(d.kind)) a.errors.push_back(d);
  a.result->errors.clear();
  return a;
}

}  // namespace ppsim::sim
