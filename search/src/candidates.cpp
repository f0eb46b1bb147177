#include "candidates.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <string_view>

#include "ppsim/config/sweep.hpp"
#include "ppsim/schedules/generator.hpp"
#include "ppsim/schedules/lowering.hpp"
#include "ppsim/search/bounds.hpp"
#include "ppsim/search/greedy.hpp"
#include "ppsim/search/improve.hpp"
#include "ppsim/sim/analysis.hpp"
#include "ppsim/sim/simulator.hpp"

namespace ppsim::search::detail {

using nlohmann::json;

namespace {

struct Run {
  std::optional<record::RunRecord> record;
  std::string error;
};

Run simulate(const json& j, const std::string& source, const Context& ctx) {
  Run run;
  try {
    const config::Config c = config::parse_config(j, source);
    run.record = sim::analyze(c, {.max_memory = ctx.limits.max_memory});
  } catch (const config::ConfigError& e) {
    run.error = e.message();
  } catch (const sim::SimulationError& e) {
    run.error = e.what();
  }
  return run;
}

bool finished(const Run& run) {
  if (!run.record || !run.record->metrics) return false;
  const auto kind = run.record->verdict().kind;
  return kind == record::VerdictKind::ok || kind == record::VerdictKind::out_of_memory;
}

std::string verdict_of(const Run& run) {
  return run.record ? run.record->verdict().text() : "not run: " + run.error;
}

// The chunk counts a family is tried with: its fixed count, or 1 (when allowed), 2 and 4.
std::vector<int> chunk_counts(const schedules::Generator& g) {
  const auto* spec = schedules::find_param(g.params, "chunks");
  if (!spec) return {1};
  std::vector<int> out;
  for (int v : {1, 2, 4})
    if (v >= spec->min && v <= spec->max) out.push_back(v);
  return out;
}

}  // namespace

json custom_orders_config(const config::Config& point, const Orders& orders,
                          const std::string& name) {
  json j = point.raw;
  json ops = json::array();
  for (const auto& list : orders) {
    // `2F13`: written by hand, as fmt made this a tenth of a large search.
    std::string line;
    line.reserve(list.size() * 8);
    char digits[16];
    for (const auto& op : list) {
      if (!line.empty()) line += ',';
      line.append(digits, std::to_chars(digits, digits + sizeof digits, op.stage).ptr);
      line += std::string_view(schedules::to_string(op.kind));
      line.append(digits, std::to_chars(digits, digits + sizeof digits, op.microbatch).ptr);
    }
    ops.push_back(line.empty() ? "IDLE" : line);
  }
  j["schedule"] = {{"kind", "custom"}, {"ops", ops}};
  j["name"] = name;
  return j;
}

std::string CommVariant::label() const {
  if (style.empty()) return "";
  if (prefetch < 0) return style + " prefetch all";
  return prefetch ? fmt::format("{} prefetch {}", style, prefetch) : style;
}

void CommVariant::apply(json& config) const {
  if (style.empty()) return;
  if (!config.contains("comm")) config["comm"] = json::object();
  config["comm"]["style"] = style;
  if (prefetch < 0)
    config["comm"]["prefetch"] = "all";
  else if (prefetch)
    config["comm"]["prefetch"] = prefetch;
}

std::vector<CommVariant> comm_variants(const config::Config& base, bool family) {
  if (!base.default_comm) return {{}};
  std::vector<CommVariant> out;
  if (family) out.push_back({});
  for (int ahead : {1, 2, 4}) out.push_back({"async", ahead});
  // Constructed orders are timed with receives posted early: posted at the start, they run as
  // timed (a receive posted later can hold a send a backward waits for).
  if (!family) out.push_back({"async", -1});
  if (base.network.semantics == model::P2pSemantics::nccl)
    for (const char* style : {"torch", "batched", "blocking"}) out.push_back({style, 0});
  return out;
}

bool Context::expired() const {
  if (deadline <= 0 || steady_seconds() <= deadline) return false;
  if (cut_short) cut_short->store(true);
  return true;
}

Candidate verify(const json& config, const std::string& source, const Context& ctx) {
  Candidate c;
  if (ctx.expired()) {
    c.verdict = kTimeLimitVerdict;
    return c;
  }
  const Run run = simulate(config, source, ctx);
  c.verdict = verdict_of(run);
  c.finished = finished(run);
  if (!c.finished) return c;
  const auto& m = *run.record->metrics;
  c.makespan = m.makespan;
  c.bubble_fraction = m.bubble_fraction;
  for (const auto& r : m.per_rank) {
    c.peak_memory_bytes.push_back(r.peak_memory_bytes);
    c.busiest = std::max(c.busiest, r.busy);
  }
  // Under nccl the schedule must also run where every request progresses on its own; not
  // PyTorch's runtime (comm.style torch), written for NCCL: under Gloo it frees send buffers
  // before their waits, which `ppsim check` reports as such.
  const json comm = config.contains("comm") ? config["comm"] : json::object();
  if (comm.is_object() && comm.value("semantics", "") == "nccl" &&
      comm.value("style", "") != "torch") {
    json mpi = config;
    mpi["comm"]["semantics"] = "mpi";
    for (const char* key : {"nccl_buffer_bytes", "nccl_streams", "nccl_max_group_ops"})
      mpi["comm"].erase(key);
    const Run other = simulate(mpi, source + " (mpi)", ctx);
    if (!finished(other)) {
      c.finished = false;
      c.verdict = "under mpi: " + verdict_of(other);
      return c;
    }
  }
  c.config = config;
  if (ctx.format == Format::torch_csv) check_csv(c, ctx.limits);
  return c;
}

std::vector<Task> family_tasks(const config::Config& base) {
  std::vector<Task> tasks;
  const int P = base.raw["schedule"].value("ranks", 0);
  for (const auto& g : schedules::Registry::instance().all()) {
    for (int v : chunk_counts(g)) {
      std::vector<std::int64_t> groups = {0};
      if (schedules::find_param(g.params, "microbatch_group_size")) groups = {0, 2LL * P};
      for (auto group : groups)
        for (const CommVariant& comm : comm_variants(base, true)) {
          std::string label = fmt::format("{}{}{}{}", g.name, v > 1 ? fmt::format(" V={}", v) : "",
                                          group ? fmt::format(", group {}", group) : "",
                                          comm.style.empty() ? "" : ", " + comm.label());
          tasks.push_back({label, [name = g.name, v, group, comm, label](const Context& ctx) {
                             Candidate c;
                             if (ctx.expired()) c.verdict = kTimeLimitVerdict;
                             c.family = name;
                             c.schedule = label;
                             c.origin = "family";
                             if (ctx.expired()) return std::vector<Candidate>{c};
                             json j;
                             try {
                               auto points = config::sweep(*ctx.base, {{name}, {}, {v}});
                               j = points.front().raw;
                             } catch (const config::ConfigError& e) {
                               c.verdict = "not run: " + e.message();
                               return std::vector<Candidate>{c};
                             }
                             if (group) j["schedule"]["microbatch_group_size"] = group;
                             comm.apply(j);
                             j["name"] = fmt::format("{}/search/{}", ctx.base->name, label);
                             Candidate run = verify(j, ctx.base->source + " (" + label + ")", ctx);
                             run.family = c.family;
                             run.schedule = c.schedule;
                             run.origin = c.origin;
                             return std::vector<Candidate>{run};
                           }});
        }
    }
  }
  return tasks;
}

}  // namespace ppsim::search::detail
