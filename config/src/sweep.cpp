#include "ppsim/config/sweep.hpp"

#include "ppsim/schedules/generator.hpp"

#include <fmt/format.h>

namespace ppsim::config {

bool sweep_requested(const SweepAxes& a) {
  return !a.kinds.empty() || !a.microbatches.empty() || !a.chunks.empty();
}

namespace {
const schedules::ParamSpec* chunks_param(const std::string& kind) {
  const auto* g = schedules::Registry::instance().find(kind);
  return g ? schedules::find_param(g->params, "chunks") : nullptr;
}
// Whether the generator's declared `chunks` parameter allows more than one chunk per rank.
bool takes_chunks(const std::string& kind) {
  const auto* chunks = chunks_param(kind);
  return chunks && chunks->max > 1;
}
// The chunks per rank a schedule section asks for: its own value, else the generator's default.
int chunks_of(const std::string& kind, const nlohmann::json& schedule) {
  if (schedule.contains("chunks")) return schedule["chunks"].get<int>();
  const auto* chunks = chunks_param(kind);
  return chunks ? static_cast<int>(chunks->default_value) : 1;
}
}  // namespace

std::vector<Config> sweep(const Config& base, const SweepAxes& axes) {
  if (!base.program->sweepable())
    throw ConfigError(base.source, "schedule.kind",
                      fmt::format("a {} schedule cannot be swept", base.kind));
  const auto& sched = base.raw.at("schedule");
  const int v0 = chunks_of(base.kind, sched);
  // Chunks the config asks for hold for every swept schedule that takes them; otherwise each
  // schedule runs at its own default (interleaved 1F1B at 2, not at 1F1B's 1).
  const bool chunks_given = sched.contains("chunks") && takes_chunks(base.kind);
  const auto kinds = axes.kinds.empty() ? std::vector<std::string>{base.kind} : axes.kinds;
  const auto ms = axes.microbatches.empty() ? std::vector<int>{sched.at("microbatches").get<int>()}
                                            : axes.microbatches;
  std::vector<Config> out;
  for (const auto& kind : kinds) {
    const bool chunked = takes_chunks(kind);
    // A schedule built for a fixed number of chunks (zbv, dualpipev: 2) runs with that number.
    const auto* spec = chunks_param(kind);
    const bool fixed = chunked && spec->min == spec->max;
    const auto vs = !chunked               ? std::vector<int>{1}
                    : fixed                ? std::vector<int>{static_cast<int>(spec->min)}
                    : !axes.chunks.empty() ? axes.chunks
                    : chunks_given         ? std::vector<int>{v0}
                                           : std::vector<int>{chunks_of(kind, {})};
    for (int m : ms) {
      for (int v : vs) {
        nlohmann::json j = base.raw;
        j["schedule"]["kind"] = kind;
        j["schedule"]["microbatches"] = m;
        if (chunked)
          j["schedule"]["chunks"] = v;
        else
          j["schedule"].erase("chunks");
        // Keep only the parameters the swept schedule takes.
        if (const auto* g = schedules::Registry::instance().find(kind)) {
          std::vector<std::string> drop;
          for (const auto& item : j["schedule"].items())
            if (item.key() != "kind" && !schedules::find_param(g->params, item.key()))
              drop.push_back(item.key());
          for (const auto& key : drop) j["schedule"].erase(key);
        }
        // Costs derived from a model follow the stages by themselves (docs/MODEL.md).
        if (v != v0 && base.hardware && !base.model_section->layout.layers_per_stage.empty())
          throw ConfigError(base.source, "model.layers_per_stage",
                            "names the layers of one chunk layout; a sweep over chunks cannot "
                            "remap them");
        if (v != v0 && !base.hardware) {
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
          if (costs.contains("overlapped_fb") && costs["overlapped_fb"].is_number())
            scale_key(costs, "overlapped_fb", 0.0, false);
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
        out.back().overrides = base.overrides;
      }
    }
  }
  return out;
}

}  // namespace ppsim::config
