// The winner as written (`search -o FILE`): a config or a PyTorch CSV, each checked to run to the
// candidate's makespan and peaks before it is offered; and the digest shards are matched by.
#include <fmt/format.h>

#include <filesystem>

#include "candidates.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/torch_csv.hpp"
#include "ppsim/search/search.hpp"
#include "ppsim/sim/analysis.hpp"
#include "ppsim/sim/simulator.hpp"

namespace ppsim::search {

using nlohmann::json;

namespace {

// Comm keys that name or parameterize a lowering: meaningless once the ops are written out.
constexpr const char* kStyleKeys[] = {"style",          "prefetch", "overlap_p2p_comm",
                                      "parity_batches", "merge_bw", "runtime"};

// "routes" as the custom source reads them; none for one route.
json routes_json(const schedules::Routes& routes, int microbatches) {
  json out = json::array();
  for (int k = 0; k < routes.count(); ++k) {
    json mbs = json::array();
    for (int m = 0; m < microbatches; ++m)
      if (routes.route_of(m) == k) mbs.push_back(m);
    out.push_back({{"stages", routes.path(k)}, {"microbatches", mbs}});
  }
  return out;
}

// A relative model.hf_config is read beside the config: written elsewhere, it must be absolute.
void anchor_paths(json& j, const std::string& source) {
  if (!j.contains("model") || !j["model"].is_object()) return;
  json& m = j["model"];
  if (!m.contains("hf_config") || !m["hf_config"].is_string()) return;
  const std::filesystem::path p = m["hf_config"].get<std::string>();
  if (p.is_relative())
    m["hf_config"] = std::filesystem::absolute(std::filesystem::path(source).parent_path() / p)
                         .lexically_normal()
                         .string();
}

}  // namespace

namespace detail {

std::string reproduces(const json& form, const Candidate& c, const config::ResourceLimits& limits) {
  try {
    const record::RunRecord run =
        sim::analyze(config::parse_config(form, "winner"), {.max_memory = limits.max_memory});
    if (!run.metrics) return "it does not run: " + run.verdict().text();
    if (run.verdict().text() != c.verdict)
      return fmt::format("it runs as '{}', not '{}'", run.verdict().text(), c.verdict);
    std::vector<std::int64_t> peaks;
    for (const auto& r : run.metrics->per_rank) peaks.push_back(r.peak_memory_bytes);
    if (run.metrics->makespan != c.makespan || peaks != c.peak_memory_bytes)
      return fmt::format("it runs to {:.6g} (peak {}), not {:.6g} (peak {})", run.metrics->makespan,
                         run.metrics->peak_memory_bytes, c.makespan, c.peak());
    return "";
  } catch (const config::ConfigError& e) {
    return e.message();
  } catch (const sim::SimulationError& e) {
    return e.what();
  }
}

json csv_config(const json& config, const std::string& csv) {
  json j = config;
  json rows = json::array();
  std::string row;
  for (char ch : csv) {
    if (ch == '\r') continue;
    if (ch != '\n') {
      row += ch;
      continue;
    }
    rows.push_back(row);
    row.clear();
  }
  json schedule = {{"kind", "torch-csv"}, {"rows", rows}};
  if (j.contains("comm") && j["comm"].is_object()) {
    for (const char* key : {"merge_bw", "runtime"})
      if (j["comm"].contains(key)) schedule[key] = j["comm"][key];
    for (const char* key : kStyleKeys) j["comm"].erase(key);
  }
  j["schedule"] = schedule;
  return j;
}

std::string csv_of(const json& config, const config::ResourceLimits& limits) {
  const config::Prepared p = config::prepare(config::parse_config(config, "winner"), limits);
  if (!p.program->routes().is_linear())
    throw config::ConfigError("winner", "schedule",
                              fmt::format("its microbatches take {} routes (a PyTorch CSV has one)",
                                          p.program->routes().count()));
  try {
    return schedules::write_torch_csv(*p.program, schedules::TorchCsvForm::compute_only);
  } catch (const schedules::ParameterError& e) {
    throw config::ConfigError("winner", "schedule", e.what());
  }
}

void check_csv(Candidate& c, const config::ResourceLimits& limits) {
  try {
    const std::string why = reproduces(csv_config(c.config, csv_of(c.config, limits)), c, limits);
    if (!why.empty()) c.inexpressible = "read back from the CSV, " + why;
  } catch (const config::ConfigError& e) {
    c.inexpressible = e.message();
  }
}

}  // namespace detail

json winner_config(const SearchResult& result, const Candidate& c,
                   const config::ResourceLimits& limits) {
  if (!c.finished || !c.config.is_object())
    throw config::ConfigError(result.source, "best", "the candidate has no runnable config");
  std::vector<json> forms;
  if (c.family != "constructed") {
    // A family's lowered op lists, with its routes, run as written whatever its generator
    // later becomes.
    try {
      const config::Prepared p = config::prepare(config::parse_config(c.config, "winner"), limits);
      json ops = json::array();
      const std::string text = p.program->to_text();
      for (std::size_t at = 0; at < text.size();) {
        std::size_t end = text.find('\n', at);
        if (end == std::string::npos) end = text.size();
        ops.push_back(text.substr(at, end - at));
        at = end + 1;
      }
      json schedule = {{"kind", "custom"}, {"ops", ops}};
      if (!p.program->routes().is_linear())
        schedule["routes"] = routes_json(p.program->routes(), p.program->microbatches());
      json j = c.config;
      j["schedule"] = schedule;
      if (j.contains("comm") && j["comm"].is_object())
        for (const char* key : kStyleKeys) j["comm"].erase(key);
      forms.push_back(std::move(j));
    } catch (const config::ConfigError&) {
    }
  }
  forms.push_back(c.config);  // as verified: a generated or compute-only custom schedule
  std::string why;
  for (json& form : forms) {
    anchor_paths(form, result.source);
    const std::string miss = detail::reproduces(form, c, limits);
    if (miss.empty()) return form;
    if (why.empty()) why = miss;
  }
  throw config::ConfigError(result.source, "best",
                            "no config written reproduces the search's best: " + why);
}

std::string winner_csv(const Candidate& c, const config::ResourceLimits& limits) {
  if (!c.expressible()) throw config::ConfigError("winner", "schedule", c.inexpressible);
  return detail::csv_of(c.config, limits);
}

std::string digest_of(std::string_view bytes) {
  std::uint64_t h = 14695981039346656037ULL;
  for (const char ch : bytes) {
    h ^= static_cast<unsigned char>(ch);
    h *= 1099511628211ULL;
  }
  return fmt::format("{:016x}", h);
}

std::string inputs_digest(const std::vector<config::Config>& points, std::uint64_t max_memory) {
  std::string text = fmt::format("max_memory {}\n", max_memory);
  for (const auto& p : points)
    text += p.raw.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  return digest_of(text);
}

}  // namespace ppsim::search
