#include "ppsim/profile/calibration.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ppsim/base/excerpt.hpp"
#include "ppsim/config/error.hpp"
#include "ppsim/config/reader.hpp"

namespace ppsim::profile {

namespace {
struct Totals {  // one rank's measured costs, summed over its stages
  double f = 0, b = 0, i = 0, w = 0;
  bool split = true;  // every stage gave I and W
};
double number(const nlohmann::json& stage, const char* key) {
  return stage.contains(key) && stage[key].is_number() ? stage[key].get<double>() : 0.0;
}
}  // namespace

nlohmann::json map_costs(const nlohmann::json& costs, const std::vector<int>& source_ranks,
                         const schedules::Program& target, const model::CostModel& target_model,
                         const std::string& file) {
  int ranks = 0;
  for (const int r : source_ranks) ranks = std::max(ranks, r + 1);
  if (ranks != target.ranks())
    throw config::ConfigError(
        file, "layout.stage_ranks",
        fmt::format("the calibration was measured on {} ranks and this config has {}: costs per "
                    "rank cannot be carried over",
                    ranks, target.ranks()));
  std::vector<Totals> totals(static_cast<std::size_t>(ranks));
  const nlohmann::json& per = costs.at("per_stage");
  // Carried over, an entry is read here and not by the config reader: checked as strictly.
  for (const auto& [key, c] : per.items()) {
    const std::string at = "costs.per_stage." + base::excerpt(key, 40);
    if (key.empty() || key.size() > 9 || key.find_first_not_of("0123456789") != std::string::npos ||
        std::stoul(key) >= source_ranks.size())
      throw config::ConfigError(
          file, at, fmt::format("expected a stage of the layout, 0..{}", source_ranks.size() - 1));
    if (!c.is_object()) throw config::ConfigError(file, at, "expected an object of costs");
    for (const auto& [k, v] : c.items())
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
        throw config::ConfigError(file, at + "." + base::excerpt(k, 40), "expected a number >= 0");
  }
  for (std::size_t s = 0; s < source_ranks.size(); ++s) {
    const std::string key = std::to_string(s);
    if (!per.contains(key)) continue;
    const nlohmann::json& c = per[key];
    Totals& t = totals[static_cast<std::size_t>(source_ranks[s])];
    t.f += number(c, "forward");
    const bool split = c.contains("backward_input") && c.contains("backward_weight");
    t.split = t.split && split;
    t.i += number(c, "backward_input");
    t.w += number(c, "backward_weight");
    t.b +=
        split ? number(c, "backward_input") + number(c, "backward_weight") : number(c, "backward");
  }
  std::vector<int> chunks(static_cast<std::size_t>(ranks), 0);
  std::vector<int> target_ranks;
  for (int s = 0; s < target.stages(); ++s) {
    ++chunks[static_cast<std::size_t>(target.rank_of(s))];
    target_ranks.push_back(target.rank_of(s));
  }
  // The same layout: each stage keeps its own costs (only a whole backward may be split).
  const bool same = target_ranks == source_ranks;
  nlohmann::json stages = nlohmann::json::object();
  for (int s = 0; s < target.stages(); ++s) {
    Totals t = totals[static_cast<std::size_t>(target.rank_of(s))];
    double n = chunks[static_cast<std::size_t>(target.rank_of(s))];
    if (same) {
      const std::string key = std::to_string(s);
      if (!per.contains(key)) continue;  // the config's own
      const nlohmann::json& c = per[key];
      t = {number(c, "forward"), number(c, "backward"), number(c, "backward_input"),
           number(c, "backward_weight"), c.contains("backward_input")};
      if (t.split) t.b = t.i + t.w;
      n = 1;
    }
    nlohmann::json c = {{"forward", t.f / n}};
    const model::StageCost& own = target_model.stages[static_cast<std::size_t>(s)];
    if (t.split) {
      c["backward_input"] = t.i / n;
      c["backward_weight"] = t.w / n;
    } else if (own.split && own.backward_input + own.backward_weight > 0) {
      const double share = own.backward_input / (own.backward_input + own.backward_weight);
      c["backward_input"] = t.b / n * share;
      c["backward_weight"] = t.b / n * (1 - share);
    } else {
      c["backward"] = t.b / n;
    }
    if (same && per[std::to_string(s)].contains("overlapped_fb"))
      c["overlapped_fb"] = per[std::to_string(s)]["overlapped_fb"];
    stages[std::to_string(s)] = std::move(c);
  }
  nlohmann::json out = costs;
  out["per_stage"] = std::move(stages);
  return out;
}

namespace {

// The `collectives` a `real --calibrate` run measured (real::CollectiveFit per collective) as
// the hardware section's constants of the config it is applied to: the all-reduce's latency per
// call, and its bus bandwidth as a share of the config's NVLink. A config without a hardware
// section has no collectives to time: nothing is set.
std::vector<std::string> collective_overrides(const nlohmann::json& j, const std::string& prefix,
                                              const std::string& file,
                                              const std::function<config::Prepared()>& target) {
  config::Reader c(j, file, prefix);
  c.integer("ranks", 0, 2, true);
  double latency = -1, bus = 0;
  for (model::Collective k : {model::Collective::all_reduce, model::Collective::all_gather,
                              model::Collective::reduce_scatter, model::Collective::all_to_all,
                              model::Collective::broadcast}) {
    const nlohmann::json* v = c.get(model::to_string(k));
    if (!v) continue;
    config::Reader f(*v, file, c.key(std::string(model::to_string(k)) + "."));
    const double lat = f.number("latency", 0);
    const double bw = f.number("bus_bandwidth", 0);
    f.integer("samples", 0, 0);
    if (!(lat >= 0 && lat <= 1))
      f.fail("latency", fmt::format("expected seconds per call in [0, 1], got {}", lat));
    if (!(bw >= 0 && bw <= 1e15))
      f.fail("bus_bandwidth", fmt::format("expected bytes per second in [0, 1e15], got {}", bw));
    f.reject_unknown();
    if (k == model::Collective::all_reduce) latency = lat, bus = bw;
  }
  c.reject_unknown();
  if (latency < 0) c.fail("all_reduce", "is required: the all-reduce's latency and bandwidth");
  const config::Prepared t = target();
  if (!t.config.hardware) return {};
  std::vector<std::string> out{fmt::format("hardware.collectives.latency={}", latency)};
  const double nvlink = t.config.hardware->hardware.intra_node.bandwidth;
  if (bus > 0 && nvlink > 0)
    out.push_back(
        fmt::format("hardware.collectives.bus_efficiency={}", std::min(1.0, bus / nvlink)));
  return out;
}

}  // namespace

nlohmann::json collectives_fragment(const std::vector<real::CollectiveSample>& samples) {
  const auto fits = real::fit_collectives(samples);
  if (fits.empty()) return nullptr;
  nlohmann::json out = {{"ranks", fits.begin()->second.ranks}};
  for (const auto& [c, f] : fits)
    out[model::to_string(c)] = {
        {"latency", f.latency}, {"bus_bandwidth", f.bus_bandwidth}, {"samples", f.samples}};
  return out;
}

std::vector<std::string> calibration_overrides(const nlohmann::json& whole, const std::string& file,
                                               const std::function<config::Prepared()>& target) {
  const bool wrapped = whole.is_object() && whole.contains("calibrated");
  const nlohmann::json& frag = wrapped ? whole["calibrated"] : whole;
  config::Reader r(frag, file, wrapped ? "calibrated." : "");
  std::vector<std::string> out;
  std::vector<int> source_ranks;
  if (const nlohmann::json* layout = r.get("layout")) {
    config::Reader l(*layout, file, r.key("layout."));
    const nlohmann::json* ranks = l.get("stage_ranks");
    if (!ranks || !ranks->is_array() || ranks->empty())
      l.fail("stage_ranks", "expected the rank of each stage, e.g. [0, 1, 2, 3]");
    for (const auto& v : *ranks) {
      if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > 1 << 20)
        l.fail("stage_ranks", fmt::format("expected ranks >= 0, got {}", base::excerpt(v.dump())));
      source_ranks.push_back(v.get<int>());
    }
    l.reject_unknown();
  }
  if (const nlohmann::json* costs = r.get("costs")) {
    nlohmann::json carried = *costs;
    if (!source_ranks.empty() && costs->is_object() && costs->contains("per_stage") &&
        (*costs)["per_stage"].is_object()) {
      const config::Prepared t = target();
      carried = map_costs(*costs, source_ranks, *t.program, t.model.costs, file);
    }
    out.push_back("costs=" + carried.dump());
  }
  if (const nlohmann::json* comm = r.get("comm")) {
    config::Reader c(*comm, file, r.key("comm."));
    for (const char* key : {"latency", "bandwidth"})
      if (const nlohmann::json* v = c.get(key))
        out.push_back(fmt::format("comm.{}={}", key, v->dump()));
    c.reject_unknown();
  }
  bool collectives = false;
  if (const nlohmann::json* coll = r.get("collectives")) {
    collectives = true;
    for (auto& o : collective_overrides(*coll, r.key("collectives."), file, target))
      out.push_back(std::move(o));
  }
  r.reject_unknown();
  if (out.empty() && !collectives)
    r.fail("costs",
           "a calibration fragment gives costs, comm or collectives (`ppsim real --calibrate "
           "--json`, `ppsim import-profile -o`)");
  return out;
}

}  // namespace ppsim::profile
