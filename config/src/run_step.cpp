#include "ppsim/config/run_step.hpp"

#include "ppsim/schedules/lowering.hpp"
#include "ppsim/schedules/validation.hpp"

namespace ppsim::config {

record::RunRecord start_run(const Prepared& prepared, std::string origin) {
  const Config& c = prepared.config;
  record::RunRecord rec;
  rec.info = {c.name,
              c.source,
              c.kind,
              c.comm_style(),
              std::string(to_string(c.network.matching)),
              c.time_unit,
              std::move(origin)};
  rec.program = prepared.program;
  if (c.comm_style() == c.lowering.style) {  // lowered by a style, not written out
    rec.info.lowering = schedules::describe_lowering(c.lowering.style, c.lowering.params);
    const schedules::LoweringOptions def = c.program->default_comm();
    const auto* style = schedules::LoweringRegistry::instance().find(def.style);
    rec.info.default_lowering = schedules::describe_lowering(
        def.style, style ? schedules::resolve(style->params, def.params, def.style) : def.params);
  }
  // The model is what runs (prepare() copies the config's network into it).
  const model::NetworkOptions& net = prepared.model.network;
  rec.info.semantics = to_string(net.semantics);
  rec.diagnostics = schedules::validate(*prepared.program, model::validate_options(net));
  return rec;
}

bool runnable(const record::RunRecord& started) {
  return !schedules::has_fatal(started.diagnostics);
}

}  // namespace ppsim::config
