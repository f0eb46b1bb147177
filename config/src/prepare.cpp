#include "ppsim/config/prepare.hpp"

#include <fmt/format.h>

#include <cmath>

namespace ppsim::config {

namespace {

StageCost resolve(const Config& c, const CostSpec& s, const std::string& key) {
  auto pick = [](const std::optional<double>& a, const std::optional<double>& b) {
    return a ? a : b;
  };
  const auto f = pick(s.forward, c.costs.forward);
  // A stage that splits B does not inherit a full B from above, and a stage that gives a full B
  // does not inherit the split: otherwise the check below would blame a key the user never wrote.
  const bool own_split = s.backward_input || s.backward_weight;
  const std::optional<double> none;
  const auto b = own_split && !s.backward ? none : pick(s.backward, c.costs.backward);
  const auto bi = s.backward && !own_split ? none : pick(s.backward_input, c.costs.backward_input);
  const auto bw =
      s.backward && !own_split ? none : pick(s.backward_weight, c.costs.backward_weight);
  StageCost out;
  out.forward = f.value_or(1.0);
  // The stage's own overlapped_fb (either form) replaces the top-level one.
  const bool own_overlap = s.overlapped_fb || s.overlapped_fb_fraction;
  const CostSpec& o = own_overlap ? s : c.costs;
  if (o.overlapped_fb) out.overlapped_fb = *o.overlapped_fb;
  if (o.overlapped_fb_fraction) out.overlapped_fb_fraction = *o.overlapped_fb_fraction;
  if (bi.has_value() != bw.has_value())
    throw ConfigError(c.source, key + (bi ? "backward_weight" : "backward_input"),
                      "give both backward_input and backward_weight, or only backward");
  if (bi) {
    out.backward_input = *bi;
    out.backward_weight = *bw;
    out.backward = *bi + *bw;
    if (b && std::abs(*b - out.backward) > 1e-9 * std::max(1.0, std::abs(*b)))
      throw ConfigError(c.source, key + "backward",
                        fmt::format("must equal backward_input + backward_weight = {}, got {}",
                                    out.backward, *b));
  } else if (b) {
    out.backward = *b;
    out.backward_input = out.backward_weight = 0;
    out.split = false;
  }
  return out;
}

Prepared prepare_unblamed(const Config& c, const ResourceLimits& limits) {
  check_resources(c, limits);  // before the program takes any memory
  Prepared run;
  run.config = c;
  auto program = std::make_shared<const schedules::Program>(c.program->build(c.lowering, c.source));
  run.program = program;
  const int S = program->stages();
  for (const auto& [stage, spec] : c.stage_costs) {
    if (stage >= S)
      throw ConfigError(c.source, fmt::format("costs.per_stage.{}", stage),
                        fmt::format("stage out of range: the schedule has stages 0..{}", S - 1));
  }
  run.model.costs.stages.reserve(static_cast<std::size_t>(S));
  const StageCost base = resolve(c, CostSpec{}, "costs.");
  for (int s = 0; s < S; ++s) {
    auto it = c.stage_costs.find(s);
    run.model.costs.stages.push_back(
        it == c.stage_costs.end() ? base
                                  : resolve(c, it->second, fmt::format("costs.per_stage.{}.", s)));
  }
  run.model.network = c.network;
  run.model.memory = c.memory;
  check_numbers(c, *program, run.model);
  return run;
}

}  // namespace

Prepared prepare(const Config& c, const ResourceLimits& limits) {
  try {
    return prepare_unblamed(c, limits);
  } catch (const ConfigError& e) {
    // A value that came from --set is blamed on the flag, as parse_config does.
    if (e.source() == c.source && !e.key().empty()) {
      const std::string blame = c.source_of(e.key());
      if (blame != c.source) throw ConfigError(blame, e.key(), e.message());
    }
    throw;
  }
}

}  // namespace ppsim::config
