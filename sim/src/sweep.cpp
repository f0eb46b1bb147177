#include "ppsim/sim/sweep.hpp"

#include <fmt/format.h>

namespace ppsim::sim {

bool sweep_requested(const SweepAxes& a) {
  return !a.kinds.empty() || !a.microbatches.empty() || !a.chunks.empty();
}

namespace {
bool takes_chunks(const std::string& kind) {
  const auto* g = schedules::Registry::instance().find(kind);
  if (!g) return false;
  for (const auto& p : g->params)
    if (p.name == "chunks") return true;
  return false;
}
}  // namespace

std::vector<Config> sweep(const Config& base, const SweepAxes& axes) {
  if (base.kind == "custom")
    throw ConfigError(base.source, "schedule.kind", "a custom schedule cannot be swept");
  const int v0 = base.params.chunks;
  const auto kinds = axes.kinds.empty() ? std::vector<std::string>{base.kind} : axes.kinds;
  const auto ms =
      axes.microbatches.empty() ? std::vector<int>{base.params.microbatches} : axes.microbatches;
  std::vector<Config> out;
  for (const auto& kind : kinds) {
    const bool chunked = takes_chunks(kind);
    const auto vs = !chunked              ? std::vector<int>{1}
                    : axes.chunks.empty() ? std::vector<int>{v0}
                                          : axes.chunks;
    for (int m : ms) {
      for (int v : vs) {
        nlohmann::json j = base.raw;
        j["schedule"]["kind"] = kind;
        j["schedule"]["microbatches"] = m;
        j["schedule"]["chunks"] = v;
        if (!chunked) j["schedule"].erase("microbatch_group_size");
        if (v != v0) {
          if (j.contains("costs") && j["costs"].contains("per_stage"))
            throw ConfigError(base.source, "costs.per_stage",
                              "per-stage costs name stages of one chunk layout; a sweep over "
                              "chunks cannot remap them");
          const double scale = static_cast<double>(v0) / v;
          auto scale_key = [&](nlohmann::json& obj, const char* key, double def, bool bytes) {
            const double x =
                obj.contains(key) && obj[key].is_number() ? obj[key].get<double>() : def;
            if (bytes)
              obj[key] = static_cast<std::int64_t>(x * scale);
            else
              obj[key] = x * scale;
          };
          auto& costs = j["costs"];
          if (costs.is_null()) costs = nlohmann::json::object();
          const bool split = costs.contains("backward_input") || !costs.contains("backward");
          scale_key(costs, "forward", 1.0, false);
          if (split) {
            scale_key(costs, "backward_input", 1.0, false);
            scale_key(costs, "backward_weight", 1.0, false);
            if (costs.contains("backward")) costs.erase("backward");
          } else {
            scale_key(costs, "backward", 2.0, false);
          }
          if (j.contains("memory")) {
            for (const char* key : {"activation_bytes", "weight_stash_bytes", "static_bytes"})
              if (j["memory"].contains(key)) scale_key(j["memory"], key, 0, true);
          }
        }
        j["name"] = chunked ? fmt::format("{}/{}/M{}/V{}", base.name, kind, m, v)
                            : fmt::format("{}/{}/M{}", base.name, kind, m);
        out.push_back(
            parse_config(j, fmt::format("{} (sweep {} M={} V={})", base.source, kind, m, v)));
      }
    }
  }
  return out;
}

}  // namespace ppsim::sim
