// `ppsim model CONFIG`: the costs and memory derived from the config's `model` and `hardware`
// (docs/MODEL.md), stage by stage, and the peak memory each schedule family needs at its M.
#include <fmt/format.h>

#include <iostream>

#include "commands.hpp"
#include "ppsim/base/excerpt.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/config/reader.hpp"
#include "ppsim/config/sweep.hpp"
#include "ppsim/model/cluster.hpp"
#include "ppsim/schedules/generator.hpp"
#include "ppsim/sim/analysis.hpp"
#include "ppsim/sim/simulator.hpp"
#include "ppsim/viz/json_report.hpp"

namespace ppsim::cli {

namespace {

using nlohmann::json;

// One schedule family at the config's P and M (its default chunks), or why it cannot run.
struct FamilyRun {
  std::string schedule;
  std::optional<record::RunRecord> run;
  std::string error;  // the ConfigError that kept it from running
};

std::vector<FamilyRun> run_families(const config::Config& base, const CommonOptions& common) {
  std::vector<FamilyRun> out;
  std::vector<config::Config> points;
  std::vector<std::size_t> slot;
  for (const auto& g : schedules::Registry::instance().all()) {
    FamilyRun f{g.name, std::nullopt, ""};
    try {
      config::SweepAxes axes{{g.name}, {}, {}};
      if (const auto* chunks = schedules::find_param(g.params, "chunks"); chunks && chunks->max > 1)
        axes.chunks = {static_cast<int>(chunks->default_value)};
      auto one = config::sweep(base, axes);
      points.push_back(std::move(one.front()));
      slot.push_back(out.size());
    } catch (const config::ConfigError& e) {
      f.error = e.message();
    }
    out.push_back(std::move(f));
  }
  std::vector<std::optional<record::RunRecord>> runs(points.size());
  std::vector<std::string> errors(points.size());
  for_each_point(points, common, [&](std::size_t i) {
    try {
      runs[i] = sim::analyze(points[i], {.max_memory = common.max_memory});
    } catch (const config::ConfigError& e) {
      errors[i] = e.message();
    } catch (const sim::SimulationError& e) {  // e.g. a given B without I/W for zb
      errors[i] = e.what();
    }
  });
  for (std::size_t i = 0; i < points.size(); ++i) {
    out[slot[i]].run = std::move(runs[i]);
    out[slot[i]].error = errors[i];
  }
  return out;
}

std::string gb(double bytes) {
  return fmt::format("{:.2f} GB", bytes / 1e9);
}

// The busiest rank's peak and that rank.
std::pair<std::int64_t, int> peak_of(const record::RunRecord& r) {
  std::pair<std::int64_t, int> best{0, 0};
  for (const auto& m : r.metrics->per_rank)
    if (m.peak_memory_bytes > best.first) best = {m.peak_memory_bytes, m.rank};
  return best;
}

// Achieved FLOP/s ÷ peak per kind when the config gives costs (measured, e.g. by
// `real --calibrate`) in place of the derived ones; nullopt where it gives none.
struct Achieved {
  std::optional<double> forward, backward_input, backward_weight;
};

Achieved achieved(const config::Prepared& p) {
  const auto& d = *p.derivation;
  const double unit = config::microseconds_per_unit(p.config.time_unit) * 1e-6;
  const double peak = p.config.hardware->hardware.gpu.peak_flops;
  double flops[3] = {0, 0, 0}, secs[3] = {0, 0, 0}, derived[3] = {0, 0, 0};
  for (std::size_t s = 0; s < d.stages.size(); ++s) {
    const auto& f = d.stages[s];
    const auto& c = p.model.costs.stages[s];
    if (!c.split) continue;
    const double fl[3] = {f.flops_forward, f.flops_backward_input, f.flops_backward_weight};
    const double t[3] = {c.forward, c.backward_input, c.backward_weight};
    const double dt[3] = {f.forward, f.backward_input, f.backward_weight};
    for (int k = 0; k < 3; ++k) {
      flops[k] += fl[k];
      secs[k] += t[k] * unit;
      derived[k] += dt[k];
    }
  }
  Achieved out;
  std::optional<double>* slots[3] = {&out.forward, &out.backward_input, &out.backward_weight};
  for (int k = 0; k < 3; ++k)
    if (secs[k] > 0 && std::abs(secs[k] - derived[k]) > 1e-9 * derived[k])
      *slots[k] = flops[k] / secs[k] / peak;
  return out;
}

model::Parallel parallel_of(const config::Prepared& p) {
  const model::Layout& l = p.config.model_section->layout;
  return {l.tensor_parallel, l.context_parallel, l.expert_parallel, l.data_parallel,
          p.program->ranks()};
}

constexpr model::Axis kAxes[] = {model::Axis::tensor, model::Axis::context, model::Axis::expert,
                                 model::Axis::data, model::Axis::pipeline};

std::string placement_text(const config::Prepared& p) {
  const model::Derivation& d = *p.derivation;
  const model::Parallel par = parallel_of(p);
  std::string groups;
  for (model::Axis a : kAxes) {
    const model::GroupSpan g = model::span(par, a, d.gpus_per_node);
    if (g.size <= 1) continue;
    groups +=
        fmt::format(", {} {} ({})", model::to_string(a), g.size,
                    g.crosses_nodes() ? fmt::format("{} nodes, {} a node", g.nodes, g.per_node)
                                      : std::string("one node"));
  }
  return fmt::format(
      "  cluster   {} GPUs in nodes of {}, order {}{}; intra-node {} {:.4g} GB/s, inter-node {} "
      "{:.4g} GB/s\n",
      par.world(), d.gpus_per_node, model::rank_order(), groups, d.intra_node.name,
      d.intra_node.bandwidth / 1e9, d.inter_node.name, d.inter_node.bandwidth / 1e9);
}

std::string step_text(const config::Prepared& p, const std::optional<record::RunRecord>& run) {
  if (!run || !run->step) return "  step      not simulated (the schedule did not run)\n";
  const record::StepSummary& s = run->step->summary;
  const record::StepBreakdown& b = s.breakdown;
  auto ms = [](double x) { return fmt::format("{:.4g}", x * 1e3); };
  return fmt::format(
      "  step      {} ms ({}): compute {} + tp {} + cp {} + ep {} + bubble {} + dp {} + "
      "optimizer {} ms on rank {}\n"
      "            global batch {}, {:.4g} tokens/s, {:.4g} TFLOP/s per GPU, MFU {:.1f}%\n",
      ms(s.time), p.config.kind, ms(b.compute), ms(b.tp_comm), ms(b.cp_comm), ms(b.ep_comm),
      ms(b.pp_bubble), ms(b.dp_exposed), ms(b.optimizer), run->step->critical_rank, s.global_batch,
      s.tokens_per_second, s.tflops_per_gpu, s.mfu * 100);
}

json step_json(const config::Prepared& p, const std::optional<record::RunRecord>& run) {
  const model::Derivation& d = *p.derivation;
  const model::Parallel par = parallel_of(p);
  json groups = json::object();
  for (model::Axis a : kAxes) {
    const model::GroupSpan g = model::span(par, a, d.gpus_per_node);
    groups[model::to_string(a)] = {{"size", g.size}, {"nodes", g.nodes}, {"per_node", g.per_node}};
  }
  json placement = {{"order", model::rank_order()},
                    {"gpus", par.world()},
                    {"gpus_per_node", d.gpus_per_node},
                    {"groups", groups}};
  if (!run || !run->step) return {{"placement", placement}};
  return {{"placement", placement}, {"step", viz::to_json(*run->step, p.config.kind)}};
}

std::string text_report(const config::Prepared& p, const std::vector<FamilyRun>& families,
                        const std::optional<record::RunRecord>& step) {
  const config::Config& c = p.config;
  const model::Transformer& m = c.model_section->transformer;
  const model::Layout& l = c.model_section->layout;
  const model::Hardware& hw = c.hardware->hardware;
  const model::Derivation& d = *p.derivation;
  const char* recompute = l.recompute == model::Recompute::full        ? "full"
                          : l.recompute == model::Recompute::selective ? "selective"
                                                                       : "none";
  std::string out = fmt::format("{}: {} P={} V={} S={} M={}\n", base::excerpt(c.name, 200), c.kind,
                                p.program->ranks(), p.program->stages() / p.program->ranks(),
                                p.program->stages(), p.program->microbatches());
  out += fmt::format(
      "  model     {} layers, hidden {}, {} heads ({} kv), ffn {}{}, vocab {}, seq {}, micro-batch "
      "{}, {} bytes/value{}\n",
      m.layers, m.hidden, m.heads, m.query_groups(), m.ffn(), m.swiglu ? " swiglu" : "", m.vocab,
      m.sequence_length, m.micro_batch_size, m.dtype_bytes,
      m.experts > 0 ? fmt::format(", {} experts top-{} of {}", m.experts, m.top_k, m.moe_ffn_hidden)
                    : "");
  out += fmt::format("  layout    t={}{} d={}{} ({:.4g} bytes/param), recompute {}\n",
                     l.tensor_parallel, l.sequence_parallel ? " (sequence parallel)" : "",
                     l.data_parallel, l.distributed_optimizer ? " distributed optimizer" : "",
                     d.bytes_per_param, recompute);
  out += fmt::format(
      "  hardware  {}: {:.4g} TFLOP/s {}, memory {}; p2p {} {:.4g} GB/s, "
      "{:.3g} us\n",
      hw.gpu.name, hw.gpu.peak_flops / 1e12,
      d.per_op
          ? std::string("(per-op costs)")
          : fmt::format("x {:.3g} = {:.4g} TFLOP/s", hw.flops_efficiency, d.achieved_flops / 1e12),
      hw.memory_bytes > 0 ? gb(static_cast<double>(hw.memory_bytes)) : std::string("unlimited"),
      d.link.name, d.link.bandwidth / 1e9, d.link.latency * 1e6);
  if (d.per_op) out += placement_text(p) + step_text(p, step);
  out += fmt::format(
      "  boundary  {} bytes per transfer: {:.4g} {}\n\n", d.boundary_bytes,
      p.model.network.latency +
          (p.model.network.bandwidth > 0
               ? static_cast<double>(p.model.network.boundary_bytes) / p.model.network.bandwidth
               : 0.0),
      c.time_unit);
  const std::string u = c.time_unit;
  out += fmt::format(
      "  {:>5} {:>4} {:>6} {:>10} {:>10} {:>11} {:>10} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9}\n",
      "stage", "rank", "layers", "params", "static", "activ/mb", "w-stash", "F TFLOP", "I TFLOP",
      "W TFLOP", "F " + u, "I " + u, "W " + u);
  for (const auto& f : d.stages) {
    const auto& cost = p.model.costs.stages[static_cast<std::size_t>(f.stage)];
    out += fmt::format(
        "  {:>5} {:>4} {:>6} {:>10.4g} {:>10} {:>11} {:>10} {:>8.4g} {:>8.4g} {:>8.4g} {:>9.4g} "
        "{:>9.4g} {:>9.4g}\n",
        f.stage, p.program->rank_of(f.stage), f.layers, f.params,
        gb(static_cast<double>(f.static_bytes)), gb(static_cast<double>(f.activation_bytes)),
        gb(static_cast<double>(f.weight_stash_bytes)), f.flops_forward / 1e12,
        f.flops_backward_input / 1e12, f.flops_backward_weight / 1e12, cost.forward,
        cost.backward_input, cost.backward_weight);
  }
  const Achieved a = achieved(p);
  if (a.forward || a.backward_input || a.backward_weight) {
    auto pct = [](const std::optional<double>& x) {
      return x ? fmt::format("{:.1f}%", *x * 100) : std::string("derived");
    };
    out += fmt::format(
        "\n  achieved efficiency of the given costs (FLOP/s / peak): F {}, I {}, W {}\n",
        pct(a.forward), pct(a.backward_input), pct(a.backward_weight));
  }
  out +=
      fmt::format("\n  schedules at M={} ({}; peak = busiest rank):\n", p.program->microbatches(),
                  c.default_comm ? std::string("each with its default comm")
                                 : fmt::format("all with comm style {}", c.lowering.style));
  out += fmt::format("  {:<18} {:>2} {:>10} {:>5} {:>12} {:>9} {:>7}  {}\n", "schedule", "V",
                     "peak", "rank", "makespan", "step s", "bubble", "verdict");
  for (const auto& f : families) {
    if (!f.run || !f.run->metrics) {
      const std::string why = f.run ? f.run->verdict().text() : base::excerpt(f.error, 90);
      out += fmt::format("  {:<18} {:>10} {:>5} {:>12} {:>9} {:>7}  {}\n", f.schedule, "-", "-",
                         "-", "-", "-", why);
      continue;
    }
    const auto [peak, rank] = peak_of(*f.run);
    const std::string step_s =
        f.run->step ? fmt::format("{:.4g}", f.run->step->summary.time) : std::string("-");
    out += fmt::format("  {:<18} {:>2} {:>10} {:>5} {:>12.6g} {:>9} {:>7.4f}  {}\n", f.schedule,
                       f.run->program->chunks(), gb(static_cast<double>(peak)), rank,
                       f.run->metrics->makespan, step_s, f.run->metrics->bubble_fraction,
                       f.run->verdict().text());
  }
  return out;
}

json json_report(const config::Prepared& p, const std::vector<FamilyRun>& families,
                 const std::optional<record::RunRecord>& step) {
  const model::Derivation& d = *p.derivation;
  const auto& hw = p.config.hardware->hardware;
  json stages = json::array();
  for (const auto& f : d.stages) {
    const auto& cost = p.model.costs.stages[static_cast<std::size_t>(f.stage)];
    stages.push_back({{"stage", f.stage},
                      {"rank", p.program->rank_of(f.stage)},
                      {"layers", f.layers},
                      {"params", f.params},
                      {"static_bytes", f.static_bytes},
                      {"activation_bytes", f.activation_bytes},
                      {"weight_stash_bytes", f.weight_stash_bytes},
                      {"flops_forward", f.flops_forward},
                      {"flops_backward_input", f.flops_backward_input},
                      {"flops_backward_weight", f.flops_backward_weight},
                      {"forward", cost.forward},
                      {"backward_input", cost.backward_input},
                      {"backward_weight", cost.backward_weight}});
  }
  json schedules = json::array();
  for (const auto& f : families) {
    json one = {{"schedule", f.schedule}};
    if (f.run && f.run->metrics) {
      const auto [peak, rank] = peak_of(*f.run);
      one["peak_memory_bytes"] = peak;
      one["rank"] = rank;
      one["chunks"] = f.run->program->chunks();
      one["makespan"] = f.run->metrics->makespan;
      if (f.run->step) one["step_time"] = f.run->step->summary.time;
      one["bubble_fraction"] = f.run->metrics->bubble_fraction;
      one["verdict"] = f.run->verdict().text();
    } else {
      one["verdict"] = f.run ? f.run->verdict().text() : "not run";
      if (!f.error.empty()) one["error"] = f.error;
    }
    schedules.push_back(std::move(one));
  }
  json out = {
      {"name", p.config.name},
      {"schedule", p.config.kind},
      {"ranks", p.program->ranks()},
      {"microbatches", p.program->microbatches()},
      {"time_unit", p.config.time_unit},
      {"boundary_bytes", d.boundary_bytes},
      {"bytes_per_param", d.bytes_per_param},
      {"hardware",
       {{"gpu", hw.gpu.name},
        {"peak_flops", hw.gpu.peak_flops},
        {"flops_efficiency", hw.flops_efficiency},
        {"memory_bytes", hw.memory_bytes},
        {"p2p",
         {{"name", d.link.name}, {"bandwidth", d.link.bandwidth}, {"latency", d.link.latency}}}}},
      {"stages", stages},
      {"schedules", schedules}};
  if (d.per_op) out.update(step_json(p, step));
  const Achieved a = achieved(p);
  json eff = json::object();
  if (a.forward) eff["forward"] = *a.forward;
  if (a.backward_input) eff["backward_input"] = *a.backward_input;
  if (a.backward_weight) eff["backward_weight"] = *a.backward_weight;
  if (!eff.empty()) out["achieved_efficiency"] = eff;
  return out;
}

}  // namespace

int cmd_model(const std::string& path, bool json_out, const std::string& calibration,
              const CommonOptions& common) {
  return run_guarded(path, [&] {
    CommonOptions with = common;
    if (!calibration.empty()) with.calibration = calibration;
    const config::Config cfg = load_with_calibration(path, with);
    if (!cfg.hardware)
      throw config::ConfigError(path, "hardware",
                                "is required by `ppsim model`: with a `model` section it derives "
                                "the costs and memory (docs/MODEL.md), e.g. \"hardware\": "
                                "{\"gpu\": \"h100-sxm\"}");
    const config::Prepared prepared =
        config::prepare(cfg, {common.max_memory, config::Workload::run});
    const std::vector<FamilyRun> families = run_families(cfg, common);
    // The config's own schedule, for the whole step.
    std::optional<record::RunRecord> step;
    if (prepared.derivation->per_op) {
      step = sim::analyze(prepared, {.max_memory = common.max_memory});
      if (!step->step) step.reset();
    }
    if (json_out)
      std::cout << viz::json_text(json_report(prepared, families, step)) << "\n";
    else
      std::cout << text_report(prepared, families, step);
    return kOk;
  });
}

}  // namespace ppsim::cli
