#include "ppsim/config/prepare.hpp"

#include <fmt/format.h>

#include <cmath>

#include "ppsim/model/cluster.hpp"

namespace ppsim::config {

namespace {

// `derived`: the stage's costs from the model (docs/MODEL.md), below what the config gives.
StageCost resolve(const Config& c, const CostSpec& s, const std::string& key,
                  const CostSpec& derived = {}) {
  auto pick = [](const std::optional<double>& a, const std::optional<double>& b) {
    return a ? a : b;
  };
  const auto f = pick(pick(s.forward, c.costs.forward), derived.forward);
  // A stage that splits B does not inherit a full B from above, and a stage that gives a full B
  // does not inherit the split: otherwise the check below would blame a key the user never wrote.
  const bool own_split = s.backward_input || s.backward_weight;
  const std::optional<double> none;
  const auto b = own_split && !s.backward ? none : pick(s.backward, c.costs.backward);
  auto bi = s.backward && !own_split ? none : pick(s.backward_input, c.costs.backward_input);
  auto bw = s.backward && !own_split ? none : pick(s.backward_weight, c.costs.backward_weight);
  // A backward the config leaves out entirely is the model's I and W.
  const bool any_backward = b || bi || bw;
  if (!any_backward && derived.backward_input) {
    bi = derived.backward_input;
    bw = derived.backward_weight;
  }
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

// A key the config itself gives (after --set): it wins over the derived value.
bool given(const Config& c, const char* section, const char* key) {
  const auto it = c.raw.find(section);
  return it != c.raw.end() && it->is_object() && it->contains(key) && !it->at(key).is_null();
}

CostSpec derived_costs(const Config& c, const model::StageFigures& f) {
  const double unit = microseconds_per_unit(c.time_unit) * 1e-6;  // seconds per time unit
  CostSpec d;
  d.forward = f.forward / unit;
  d.backward_input = f.backward_input / unit;
  d.backward_weight = f.backward_weight / unit;
  return d;
}

// Memory per stage, the limit, and the link, where the config does not give them.
void apply_derived(const Config& c, const model::Derivation& d, Model& m) {
  const bool act = given(c, "memory", "activation_bytes"),
             stash = given(c, "memory", "weight_stash_bytes"),
             fixed = given(c, "memory", "static_bytes");
  m.memory.per_stage.clear();
  for (const model::StageFigures& f : d.stages)
    m.memory.per_stage.push_back({act ? c.memory.activation_bytes : f.activation_bytes,
                                  stash ? c.memory.weight_stash_bytes : f.weight_stash_bytes,
                                  fixed ? c.memory.static_bytes : f.static_bytes});
  m.memory.limit_bytes = c.hardware->hardware.memory_bytes;
  const double unit = microseconds_per_unit(c.time_unit) * 1e-6;
  const model::Link& link = d.link;
  if (!given(c, "comm", "boundary_bytes")) m.network.boundary_bytes = d.boundary_bytes;
  if (!given(c, "comm", "latency")) m.network.latency = link.latency / unit;
  if (!given(c, "comm", "bandwidth")) m.network.bandwidth = link.bandwidth * unit;
}

// The step after the pipeline (per-op costs only): each stage's buckets, each rank's optimizer
// and parameter all-gather, the tied embedding's ranks, in time units.
void apply_step(const Config& c, const model::Derivation& d, const schedules::Program& p,
                Model& m) {
  if (!d.per_op) return;
  const double unit = microseconds_per_unit(c.time_unit) * 1e-6;
  model::StepPhases& step = m.step;
  step.enabled = true;
  step.overlap_grad_reduce = c.model_section->layout.overlap_grad_reduce;
  step.buckets.assign(d.stages.size(), {});
  step.optimizer.assign(static_cast<std::size_t>(p.ranks()), 0.0);
  step.param_gather.assign(static_cast<std::size_t>(p.ranks()), 0.0);
  for (const model::StageFigures& f : d.stages) {
    auto& mine = step.buckets[static_cast<std::size_t>(f.stage)];
    for (model::GradBucket b : f.buckets) {
      b.duration /= unit;
      mine.push_back(b);
    }
    const auto r = static_cast<std::size_t>(p.rank_of(f.stage));
    step.optimizer[r] += f.optimizer / unit;
    step.param_gather[r] += f.param_gather / unit;
    // Only tied embeddings have two copies to sum.
    if (d.embedding_sync > 0 && f.embedding && step.embedding_first < 0)
      step.embedding_first = p.rank_of(f.stage);
    if (d.embedding_sync > 0 && f.head && step.embedding_last < 0)
      step.embedding_last = p.rank_of(f.stage);
  }
  step.embedding_sync = d.embedding_sync / unit;
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
  run.model.costs.launch_overhead = c.launch_overhead;
  run.model.costs.start_offset = c.start_offset;
  run.model.network = c.network;
  run.model.memory = c.memory;
  if (c.hardware) run.derivation = derive(c, *program);
  const StageCost base = resolve(c, CostSpec{}, "costs.");
  for (int s = 0; s < S; ++s) {
    auto it = c.stage_costs.find(s);
    const CostSpec own = it == c.stage_costs.end() ? CostSpec{} : it->second;
    const std::string key =
        it == c.stage_costs.end() ? "costs." : fmt::format("costs.per_stage.{}.", s);
    if (!run.derivation) {
      run.model.costs.stages.push_back(it == c.stage_costs.end() ? base : resolve(c, own, key));
      continue;
    }
    run.model.costs.stages.push_back(resolve(
        c, own, key, derived_costs(c, run.derivation->stages[static_cast<std::size_t>(s)])));
  }
  if (run.derivation) {
    apply_derived(c, *run.derivation, run.model);
    apply_step(c, *run.derivation, *program, run.model);
  }
  check_numbers(c, *program, run.model);
  return run;
}

}  // namespace

model::Derivation derive(const Config& c, const schedules::Program& program) {
  const ModelSection& ms = *c.model_section;
  model::Hardware hw = c.hardware->hardware;
  model::Layout layout = ms.layout;
  layout.pipeline_parallel = program.ranks();
  // The default link between stages: the nodes' own when the pipeline's ranks share a node,
  // else the network between nodes (ranks placed tensor, context, data, then pipeline).
  if (!c.hardware->link_given) {
    const long long stride =
        1LL * layout.tensor_parallel * layout.context_parallel * layout.data_parallel;
    const bool one_node =
        !model::span_of(program.ranks(), stride, hw.gpus_per_node).crosses_nodes();
    hw.link = one_node ? hw.intra_node : hw.inter_node;
  }
  // Each stage's place along its microbatches' route; every route runs the whole network.
  const schedules::Routes& routes = program.routes();
  std::vector<int> positions(static_cast<std::size_t>(program.stages()), -1);
  int route_stages = program.stages();
  if (!routes.is_linear() && routes.count() > 0) {
    route_stages = static_cast<int>(routes.path(0).size());
    for (int k = 0; k < routes.count(); ++k) {
      const auto& path = routes.path(k);
      if (static_cast<int>(path.size()) != route_stages)
        throw ConfigError(c.source, "model",
                          "the schedule's routes differ in length: costs cannot be derived "
                          "from one network for all of them");
      for (std::size_t i = 0; i < path.size(); ++i)
        positions[static_cast<std::size_t>(path[i])] = static_cast<int>(i);
    }
    for (int& p : positions)
      if (p < 0) p = 0;  // a stage no route passes runs no op: costed as a first stage
  } else {
    for (int s = 0; s < program.stages(); ++s) positions[static_cast<std::size_t>(s)] = s;
  }
  try {
    return model::derive(ms.transformer, layout, hw, positions, route_stages);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(
        c.source, ms.layout.layers_per_stage.empty() ? "model.layers" : "model.layers_per_stage",
        e.what());
  }
}

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
