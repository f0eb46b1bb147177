// Any registered generator, by name or alias: its declared parameters are read from the schedule
// section, then the program is lowered with comm.style.
#include <fmt/format.h>

#include "../param_reader.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/generator.hpp"

namespace ppsim::config::sources {

namespace {

class GeneratedSpec : public ProgramSpec {
 public:
  GeneratedSpec(std::string kind, schedules::ScheduleParams params)
      : kind_(std::move(kind)), params_(std::move(params)) {}
  schedules::Program build(const schedules::LoweringOptions& lowering,
                           const std::string& source) const override {
    schedules::Program compute;
    try {
      compute = schedules::generate(kind_, params_);
    } catch (const schedules::ParameterError& e) {
      throw ConfigError(source, "schedule." + e.key(), e.what());
    }
    try {
      return schedules::lower(compute, lowering);
    } catch (const schedules::ParameterError& e) {
      throw ConfigError(source, "comm." + e.key(), e.what());
    }
  }
  std::string comm_style(const schedules::LoweringOptions& lowering) const override {
    return lowering.style;
  }
  bool sweepable() const override { return true; }
  schedules::LoweringOptions default_comm() const override {
    const schedules::Generator& g = *schedules::Registry::instance().find(kind_);
    const schedules::DefaultComm& d = g.default_comm;
    schedules::LoweringOptions out;
    out.style = d.style;
    if (d.params) {
      try {  // the generator's own defaults filled in (chunks, ...)
        out.params = d.params(schedules::resolve(g.params, params_, kind_));
      } catch (const schedules::ParameterError&) {
        // Bad schedule parameters are reported by build(), naming the key.
      }
    }
    return out;
  }

 private:
  std::string kind_;
  schedules::ScheduleParams params_;
};

std::shared_ptr<const ProgramSpec> read(Reader& s, const std::string& kind) {
  const schedules::Generator* g = schedules::Registry::instance().find(kind);
  schedules::ScheduleParams params;
  read_params(s, g->params, g->name, params);
  s.reject_unknown([&](const std::string& key) -> std::string {
    std::vector<std::string> users;
    for (const auto& other : schedules::Registry::instance().all())
      if (schedules::find_param(other.params, key)) users.push_back(other.name);
    if (users.empty()) return "";
    return not_a_parameter_of("schedule", g->name, users);
  });
  return std::make_shared<GeneratedSpec>(g->name, std::move(params));
}

}  // namespace

void register_generated(SourceRegistry& registry) {
  registry.add(
      {"generated", "a registered schedule generator (ppsim list), lowered by comm.style",
       [](std::string_view kind) { return schedules::Registry::instance().find(kind) != nullptr; },
       read});
}

}  // namespace ppsim::config::sources
