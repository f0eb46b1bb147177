#include "ppsim/profile/calibration.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>

#include "ppsim/base/excerpt.hpp"
#include "ppsim/config/error.hpp"
#include "ppsim/config/reader.hpp"
#include "ppsim/config/resources.hpp"

namespace ppsim::profile {

namespace {

using nlohmann::json;

// The cost keys of a stage, in the fragment as in a config's `costs` (docs/CONFIG.md#costs).
enum Kind { kF, kB, kI, kW, kPair, kKinds };
constexpr std::array<const char*, kKinds> kKindKeys = {"forward", "backward", "backward_input",
                                                       "backward_weight", "overlapped_fb"};

// One `per_stage` entry of a fragment, its times in the config's unit.
struct StageEntry {
  std::string key;  // the fragment's key of the entry, for errors
  std::array<std::optional<double>, kKinds> t;
  std::optional<json> fraction;  // overlapped_fb given as {"fraction": x}
  bool whole_b() const { return t[kB] || (t[kI] && t[kW]); }
  double b() const { return t[kI] && t[kW] ? *t[kI] + *t[kW] : t[kB].value_or(0); }
};

// The fragment being read: its file, its unit's factor to the config's, and the config it is
// applied to, prepared once when first needed.
class Fragment {
 public:
  Fragment(std::string file, const std::function<config::Prepared()>& target)
      : file_(std::move(file)), target_(target) {}
  const config::Prepared& target() {
    if (!prepared_) prepared_ = target_();
    return *prepared_;
  }
  const std::string& file() const { return file_; }
  double scale = 1;  // config time units per fragment time unit

  // A time of the fragment in the config's unit: a number >= 0 that stays under the bound that
  // keeps times exact (config::kMaxTime), so that a bad value is blamed on this file and key.
  double time(config::Reader& r, const std::string& k) {
    const double v = r.number(k, 0) * scale;
    if (!(v <= config::kMaxTime))
      r.fail(k, fmt::format("{:.4g} {} is above the bound of {:.0e} time units that keeps times "
                            "exact",
                            v, target().config.time_unit, config::kMaxTime));
    return v;
  }

 private:
  std::string file_;
  const std::function<config::Prepared()>& target_;
  std::optional<config::Prepared> prepared_;
};

std::string assign(const std::string& key, double v) {
  return fmt::format("{}={}", key, json(v).dump());
}

// A per_stage key: a stage number written one way only ("3", not "03", "+3" or " 3"), as the
// config reader takes it, so that no entry is silently another stage's or none.
std::optional<int> stage_number(const std::string& k) {
  if (k.empty() || k.size() > 9 || (k.size() > 1 && k[0] == '0')) return std::nullopt;
  if (k.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoi(k);
}

// `{"fraction": x}` with 0 < x <= 1, checked here so that its errors name the fragment.
json fraction_of(const json& v, config::Reader& r) {
  config::Reader f(v, r.source(), r.key("overlapped_fb."));
  const json* x = f.get("fraction");
  f.reject_unknown();
  if (!x || !x->is_number() || !(x->get<double>() > 0 && x->get<double>() <= 1))
    f.fail("fraction", "expected a number with 0 < x <= 1 (of the pair's F + B)");
  return v;
}

// A stage's (or the top level's) cost keys; unknown keys are errors.
StageEntry read_entry(config::Reader& r, Fragment& fr) {
  StageEntry e;
  for (int k = 0; k < kKinds; ++k) {
    const json* v = r.get(kKindKeys[k]);
    if (!v) continue;
    if (k == kPair && v->is_object())
      e.fraction = fraction_of(*v, r);
    else
      e.t[k] = fr.time(r, kKindKeys[k]);
  }
  return e;
}

// The entry's keys as assignments to `prefix` (costs.per_stage.N.), key by key. A backward
// measured only whole is split by the target's own I:W ratio where the target has one, so that
// a 1F1B profile drives ZB-H1.
void emit(const StageEntry& e, const model::StageCost* own, const std::string& prefix,
          std::vector<std::string>& out) {
  const bool split_b = e.t[kB] && !e.t[kI] && !e.t[kW] && own && own->split &&
                       own->backward_input + own->backward_weight > 0;
  for (int k = 0; k < kKinds; ++k) {
    if (!e.t[k] || (k == kB && split_b)) continue;
    out.push_back(assign(prefix + kKindKeys[k], *e.t[k]));
  }
  if (split_b) {
    const double share = own->backward_input / (own->backward_input + own->backward_weight);
    out.push_back(assign(prefix + "backward_input", *e.t[kB] * share));
    out.push_back(assign(prefix + "backward_weight", *e.t[kB] * (1 - share)));
  }
  if (e.fraction) out.push_back(prefix + "overlapped_fb=" + e.fraction->dump());
}

// Stages measured on `source_ranks` carried to the target's layout on the same ranks: each
// rank's measured total over the stages it runs there, per kind. A kind is carried when every
// stage gives it and left to the config when none does; some but not all is an error, since a
// rank's total would miss a stage.
void map_costs(const std::vector<StageEntry>& entries, const std::vector<int>& source_ranks,
               Fragment& fr, const std::string& per_key, std::vector<std::string>& out) {
  const schedules::Program& target = *fr.target().program;
  const int ranks = target.ranks();
  // Which kinds every stage gives: F, B (whole, or I and W), I and W, a timed pair.
  auto gives = [](const StageEntry& e, int k) {
    if (k == kB) return e.whole_b();
    if (k == kI || k == kW) return e.t[kI] && e.t[kW];
    return e.t[k].has_value();
  };
  std::array<bool, kKinds> carried{};
  for (int k : {kF, kB, kI, kPair}) {
    int n = 0;
    for (const auto& e : entries) n += gives(e, k) ? 1 : 0;
    if (k == kI && n < static_cast<int>(entries.size())) continue;  // then B goes whole
    carried[k] = n > 0;
    if (n == 0 || n == static_cast<int>(entries.size())) continue;
    for (const auto& e : entries)
      if (!gives(e, k))
        throw config::ConfigError(
            fr.file(), per_key + e.key,
            fmt::format("{} while other stages {}: to carry a fragment to another layout, every "
                        "stage of layout.stage_ranks needs each kind of cost or none does",
                        e.t == StageEntry{}.t && !e.fraction
                            ? std::string("not measured")
                            : fmt::format("gives no {}", k == kB ? "backward (or backward_input "
                                                                   "and backward_weight)"
                                                                 : kKindKeys[k]),
                        e.t == StageEntry{}.t && !e.fraction ? "are" : "do"));
  }
  carried[kW] = carried[kI];
  for (const auto& e : entries)
    if (e.fraction)
      throw config::ConfigError(fr.file(), per_key + e.key + ".overlapped_fb",
                                "a fraction cannot be carried to another layout; give a time");
  std::vector<StageEntry> totals(static_cast<std::size_t>(ranks));
  std::vector<int> runs(static_cast<std::size_t>(ranks), 0);
  for (std::size_t s = 0; s < entries.size(); ++s) {
    StageEntry& t = totals[static_cast<std::size_t>(source_ranks[s])];
    const StageEntry& e = entries[s];
    for (int k = 0; k < kKinds; ++k) {
      if (!carried[k]) continue;
      const double v = k == kB ? e.b() : *e.t[k];
      t.t[k] = t.t[k].value_or(0) + v;
    }
  }
  for (int s = 0; s < target.stages(); ++s) ++runs[static_cast<std::size_t>(target.rank_of(s))];
  for (int s = 0; s < target.stages(); ++s) {
    const auto r = static_cast<std::size_t>(target.rank_of(s));
    StageEntry c = totals[r];
    for (auto& v : c.t)
      if (v) *v /= runs[r];
    if (carried[kI]) c.t[kB].reset();  // I and W say it
    emit(c, &fr.target().model.costs.stages[static_cast<std::size_t>(s)],
         fmt::format("costs.per_stage.{}.", s), out);
  }
}

// `costs`: the top-level keys as given, `per_stage` key by key (or carried by map_costs when the
// fragment's layout differs from the target's).
void read_costs(const json& costs, const std::vector<int>& source_ranks, config::Reader& parent,
                Fragment& fr, std::vector<std::string>& out) {
  config::Reader c(costs, fr.file(), parent.key("costs."));
  const StageEntry top = read_entry(c, fr);
  emit(top, nullptr, "costs.", out);
  for (const char* k : {"launch_overhead", "start_offset"})
    if (c.has(k)) out.push_back(assign(std::string("costs.") + k, fr.time(c, k)));
  std::vector<StageEntry> entries;
  std::vector<int> stages;
  if (const json* per = c.get("per_stage")) {
    config::Reader ps(*per, fr.file(), c.key("per_stage."));
    const int bound = source_ranks.empty() ? fr.target().program->stages()
                                           : static_cast<int>(source_ranks.size());
    for (auto it = per->begin(); it != per->end(); ++it) {
      const std::optional<int> s = stage_number(it.key());
      if (!s || *s >= bound)
        ps.fail(it.key(),
                fmt::format("expected a stage number {}0..{}, written without sign, leading "
                            "zeros, spaces or decimals",
                            source_ranks.empty() ? "of the config, " : "of layout.stage_ranks, ",
                            bound - 1));
      config::Reader one(it.value(), fr.file(), ps.key(it.key() + "."));
      entries.push_back(read_entry(one, fr));
      entries.back().key = it.key();
      stages.push_back(*s);
      one.reject_unknown();
      ps.get(it.key());
    }
  }
  c.reject_unknown();
  if (entries.empty()) return;
  std::vector<int> target_ranks;
  if (!source_ranks.empty())
    for (int s = 0; s < fr.target().program->stages(); ++s)
      target_ranks.push_back(fr.target().program->rank_of(s));
  if (source_ranks.empty() || source_ranks == target_ranks) {
    // The same stages: each entry sets the keys it gives and no other.
    for (std::size_t i = 0; i < entries.size(); ++i)
      emit(entries[i], &fr.target().model.costs.stages[static_cast<std::size_t>(stages[i])],
           fmt::format("costs.per_stage.{}.", stages[i]), out);
    return;
  }
  std::vector<StageEntry> by_stage(source_ranks.size());
  for (std::size_t s = 0; s < by_stage.size(); ++s) by_stage[s].key = std::to_string(s);
  for (std::size_t i = 0; i < entries.size(); ++i)
    by_stage[static_cast<std::size_t>(stages[i])] = entries[i];
  map_costs(by_stage, source_ranks, fr, c.key("per_stage."), out);
}

// The `collectives` a `real --calibrate` run measured (real::CollectiveFit per collective) as
// the hardware section's constants of the config it is applied to: the all-reduce's latency per
// call, and its bus bandwidth as a share of the config's NVLink. A config without a hardware
// section has no collectives to time: nothing is set. Seconds, whatever the time unit.
std::vector<std::string> collective_overrides(const json& j, const std::string& prefix,
                                              Fragment& fr) {
  config::Reader c(j, fr.file(), prefix);
  c.integer("ranks", 0, 2, true);
  double latency = -1, bus = 0;
  for (model::Collective k : {model::Collective::all_reduce, model::Collective::all_gather,
                              model::Collective::reduce_scatter, model::Collective::all_to_all,
                              model::Collective::broadcast}) {
    const json* v = c.get(model::to_string(k));
    if (!v) continue;
    config::Reader f(*v, fr.file(), c.key(std::string(model::to_string(k)) + "."));
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
  const config::Prepared& t = fr.target();
  if (!t.config.hardware) return {};
  std::vector<std::string> out{fmt::format("hardware.collectives.latency={}", latency)};
  const double nvlink = t.config.hardware->hardware.intra_node.bandwidth;
  if (bus > 0 && nvlink > 0)
    out.push_back(
        fmt::format("hardware.collectives.bus_efficiency={}", std::min(1.0, bus / nvlink)));
  return out;
}

std::vector<int> read_layout(const json& layout, config::Reader& r) {
  config::Reader l(layout, r.source(), r.key("layout."));
  const json* ranks = l.get("stage_ranks");
  if (!ranks || !ranks->is_array() || ranks->empty())
    l.fail("stage_ranks", "expected the rank of each stage, e.g. [0, 1, 2, 3]");
  std::vector<int> source_ranks;
  for (const auto& v : *ranks) {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > 1 << 20)
      l.fail("stage_ranks", fmt::format("expected ranks >= 0, got {}", base::excerpt(v.dump())));
    source_ranks.push_back(v.get<int>());
  }
  l.reject_unknown();
  return source_ranks;
}

// A layout measured on the target's ranks, each of which ran a stage: costs are carried per rank.
void check_ranks(const std::vector<int>& source_ranks, Fragment& fr, const std::string& key) {
  const int ranks = *std::max_element(source_ranks.begin(), source_ranks.end()) + 1;
  if (ranks != fr.target().program->ranks())
    throw config::ConfigError(
        fr.file(), key,
        fmt::format("the calibration was measured on {} ranks and this config has {}: costs per "
                    "rank cannot be carried over",
                    ranks, fr.target().program->ranks()));
  for (int r = 0; r < ranks; ++r)
    if (std::find(source_ranks.begin(), source_ranks.end(), r) == source_ranks.end())
      throw config::ConfigError(
          fr.file(), key, fmt::format("rank {} runs no stage: its costs are not measured", r));
}

}  // namespace

json collectives_fragment(const std::vector<real::CollectiveSample>& samples) {
  const auto fits = real::fit_collectives(samples);
  if (fits.empty()) return nullptr;
  json out = {{"ranks", fits.begin()->second.ranks}};
  for (const auto& [c, f] : fits)
    out[model::to_string(c)] = {
        {"latency", f.latency}, {"bus_bandwidth", f.bus_bandwidth}, {"samples", f.samples}};
  return out;
}

std::vector<std::string> calibration_overrides(const json& whole, const std::string& file,
                                               const std::function<config::Prepared()>& target) {
  const bool wrapped = whole.is_object() && whole.contains("calibrated");
  const json& frag = wrapped ? whole["calibrated"] : whole;
  config::Reader r(frag, file, wrapped ? "calibrated." : "");
  Fragment fr(file, target);
  // Times are in the fragment's unit, converted to the config's; without one, the config's.
  if (r.has("time_unit")) {
    const std::string unit = r.one_of("time_unit", "", {"s", "ms", "us", "ns"});
    fr.scale = config::microseconds_per_unit(unit) /
               config::microseconds_per_unit(fr.target().config.time_unit);
  }
  r.get("time_unit");
  std::vector<std::string> out;
  std::vector<int> source_ranks;
  if (const json* layout = r.get("layout")) {
    source_ranks = read_layout(*layout, r);
    check_ranks(source_ranks, fr, r.key("layout.stage_ranks"));
  }
  if (const json* costs = r.get("costs")) read_costs(*costs, source_ranks, r, fr, out);
  if (const json* comm = r.get("comm")) {
    config::Reader c(*comm, file, r.key("comm."));
    if (c.has("latency")) out.push_back(assign("comm.latency", fr.time(c, "latency")));
    // Bytes per time unit: per config unit, a fragment's ms is 1000 of its us.
    if (c.has("bandwidth"))
      out.push_back(assign("comm.bandwidth", c.number("bandwidth", 0) / fr.scale));
    c.reject_unknown();
  }
  bool collectives = false;
  if (const json* coll = r.get("collectives")) {
    collectives = true;
    for (auto& o : collective_overrides(*coll, r.key("collectives."), fr))
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
