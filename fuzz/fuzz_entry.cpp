#include "fuzz_entry.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <new>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "ppsim/config/config.hpp"
#include "ppsim/config/hf_config.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/profile/calibration.hpp"
#include "ppsim/profile/kineto.hpp"
#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/program.hpp"
#include "ppsim/schedules/torch_csv.hpp"
#include "ppsim/search/search.hpp"
#include "ppsim/sim/analysis.hpp"
#include "ppsim/sim/simulator.hpp"
#include "ppsim/viz/chrome_trace.hpp"
#include "ppsim/viz/json_report.hpp"
#include "ppsim/viz/summary_table.hpp"

namespace ppsim::fuzz {

namespace {

using nlohmann::json;

// Caps that keep one pipeline execution in the millisecond range.
constexpr std::int64_t kMaxDimension = 16;     // ranks, microbatches, chunks, group size
constexpr std::int64_t kMaxProduct = 512;      // ranks * microbatches * chunks
constexpr std::size_t kMaxOpsText = 2048;      // custom op-list characters
constexpr std::size_t kMaxDigits = 3;          // ids in custom op lists and routes < 1000
constexpr std::size_t kMaxProgramOps = 20000;  // ops of the prepared program

struct Split {
  std::string json_text;
  std::vector<std::string> overrides;
};

Split split_input(std::string_view bytes) {
  Split s;
  std::size_t nul = bytes.find('\0');
  s.json_text = std::string(bytes.substr(0, nul));
  while (nul != std::string_view::npos) {
    bytes.remove_prefix(nul + 1);
    nul = bytes.find('\0');
    s.overrides.emplace_back(bytes.substr(0, nul));
  }
  return s;
}

// An error the CLI reports as bad input must name where it comes from: the file (with line:column
// for malformed JSON), or the
// `--set` flag for a malformed assignment.
void require_source(const config::ConfigError& e) {
  const bool named = e.source().starts_with(kSource) || e.source().starts_with("--set");
  if (!named || std::string_view(e.what()).find(e.source()) == std::string_view::npos)
    throw std::logic_error(fmt::format("ConfigError without the file name: {}", e.what()));
}

// Runs body; the errors cli/commands.cpp's guarded() reports as exit 2 become `rejected`.
template <typename F>
Outcome guarded(F&& body) {
  try {
    return body();
  } catch (const config::ConfigError& e) {
    require_source(e);
    return Outcome::rejected;
  } catch (const sim::SimulationError&) {
    return Outcome::rejected;
  } catch (const std::bad_alloc&) {
    return Outcome::rejected;
  } catch (const std::length_error&) {
    return Outcome::rejected;
  } catch (const std::filesystem::filesystem_error&) {
    return Outcome::rejected;
  }
}

config::Config read_config(const Split& in) {
  json j = config::parse_json_text(in.json_text, kSource);
  for (const auto& o : in.overrides) config::apply_override(j, o);
  return config::parse_config(j, kSource);
}

bool too_long_number(std::string_view text) {
  std::size_t run = 0;
  for (char c : text) {
    run = (c >= '0' && c <= '9') ? run + 1 : 0;
    if (run > kMaxDigits) return true;
  }
  return false;
}

bool big_number(const json& v, std::int64_t cap) {
  if (v.is_number_integer()) return v.get<std::int64_t>() > cap;
  if (v.is_number_unsigned()) return true;
  if (v.is_number_float()) return !(v.get<double>() <= static_cast<double>(cap));
  return false;
}

bool any_big_number(const json& v, std::int64_t cap) {
  if (v.is_structured()) {
    for (const auto& x : v)
      if (any_big_number(x, cap)) return true;
    return false;
  }
  return big_number(v, cap);
}

// Whether the config's (overridden) schedule section asks for more than one fast execution.
bool too_big(const json& j) {
  if (!j.is_object() || !j.contains("schedule") || !j["schedule"].is_object()) return false;
  const json& s = j["schedule"];
  std::int64_t product = 1;
  for (const char* key : {"ranks", "microbatches", "chunks", "microbatch_group_size"}) {
    if (!s.contains(key)) continue;
    if (big_number(s[key], kMaxDimension)) return true;
    if (s[key].is_number_integer() && std::string_view(key) != "microbatch_group_size")
      product *= std::max<std::int64_t>(1, s[key].get<std::int64_t>());
  }
  if (product > kMaxProduct) return true;
  if (s.contains("ops")) {
    std::size_t length = 0;
    const json& ops = s["ops"];
    for (const auto& line : ops.is_array() ? ops : json::array({ops})) {
      if (!line.is_string()) continue;
      const auto& text = line.get_ref<const std::string&>();
      length += text.size();
      if (too_long_number(text)) return true;
    }
    if (length > kMaxOpsText) return true;
  }
  if (s.contains("routes") && any_big_number(s["routes"], 999)) return true;
  return false;
}

// Byte counts in a report are sums of non-negative sizes: a negative one is an overflow.
bool negative_bytes(const json& j) {
  if (j.is_object()) {
    for (const auto& [key, value] : j.items())
      if ((key.ends_with("bytes") && value.is_number() && value.get<double>() < 0) ||
          negative_bytes(value))
        return true;
  } else if (j.is_array()) {
    for (const auto& value : j)
      if (negative_bytes(value)) return true;
  }
  return false;
}

// The engine on a program validation has not passed (simulate() is a library call, and running it
// beside validation needs it, docs/ARCHITECTURE.md): it may refuse one, never crash or hang on it.
void simulate_unvalidated(const schedules::Program& program, const model::Model& model) {
  try {
    (void)sim::simulate(program, model);
  } catch (const sim::SimulationError&) {
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
}

}  // namespace

Outcome config_entry(std::string_view bytes) {
  const Split in = split_input(bytes);
  return guarded([&] {
    read_config(in);
    return Outcome::accepted;
  });
}

Outcome oplist_entry(std::string_view bytes) {
  schedules::Program p;
  try {
    p = schedules::Program::parse(bytes);
  } catch (const schedules::ParseError&) {
    return Outcome::rejected;
  } catch (const schedules::ParameterError&) {
    return Outcome::rejected;
  }
  const std::string text = p.to_text();
  std::string again;
  try {
    again = schedules::Program::parse(text).to_text();
  } catch (const std::exception& e) {
    throw std::logic_error(
        fmt::format("to_text of an accepted program does not parse: {}\n{}", e.what(), text));
  }
  if (again != text)
    throw std::logic_error(fmt::format("to_text -> parse -> to_text changed\n{}\n{}", text, again));
  // Under each p2p semantics and matching, with a finite link so that transfers queue.
  const std::size_t cells =
      static_cast<std::size_t>(p.stages()) * static_cast<std::size_t>(p.microbatches());
  if (p.ranks() <= kMaxDimension && cells <= static_cast<std::size_t>(kMaxProduct)) {
    model::Model model{model::CostModel::uniform(p.stages(), {}), {}, {}, {}};
    model.network.bandwidth = 4;
    model.network.boundary_bytes = 8;
    model.memory.activation_bytes = 16;
    for (auto semantics : {model::P2pSemantics::mpi, model::P2pSemantics::nccl})
      for (auto matching : {model::Matching::tag, model::Matching::fifo}) {
        model.network.semantics = semantics;
        model.network.matching = matching;
        simulate_unvalidated(p, model);
      }
  }
  return Outcome::accepted;
}

Outcome torch_csv_entry(std::string_view bytes) {
  schedules::TorchCsv csv;
  try {
    csv = schedules::parse_torch_csv(bytes);
  } catch (const schedules::ParseError&) {
    return Outcome::rejected;
  } catch (const schedules::ParameterError&) {
    return Outcome::rejected;
  }
  // Cell for cell: blanks where they stood, rows padded, as `export --format torch-csv` writes.
  const std::string text =
      schedules::write_torch_csv(csv.program, csv.form, csv.steps, csv.cells, "\n");
  std::string again;
  try {
    const schedules::TorchCsv back = schedules::parse_torch_csv(text);
    if (back.form != csv.form) throw std::logic_error("the form changed");
    again = schedules::write_torch_csv(back.program, back.form, back.steps, back.cells, "\n");
  } catch (const std::exception& e) {
    throw std::logic_error(
        fmt::format("an accepted CSV written back does not read again: {}\n{}", e.what(), text));
  }
  if (again != text)
    throw std::logic_error(fmt::format("write -> parse -> write changed\n{}\n{}", text, again));
  return Outcome::accepted;
}

Outcome pipeline_entry(std::string_view bytes) {
  const Split in = split_input(bytes);
  return guarded([&] {
    // Caps are read from the overridden JSON before the config builds anything.
    json j = config::parse_json_text(in.json_text, kSource);
    for (const auto& o : in.overrides) config::apply_override(j, o);
    if (too_big(j)) return Outcome::skipped;
    const config::Config cfg = config::parse_config(j, kSource);
    const config::Prepared prepared = config::prepare(cfg);
    if (prepared.program->total_ops() > kMaxProgramOps) return Outcome::skipped;
    simulate_unvalidated(*prepared.program, prepared.model);
    const record::RunRecord run = sim::analyze(prepared, {.trace = true});
    (void)viz::summary_text(run);
    (void)viz::check_text(run, kSource);
    const json report = viz::to_json(run);
    (void)report.dump(2);
    if (negative_bytes(report)) throw std::logic_error("a negative byte count in the report");
    (void)viz::check_json(run, kSource).dump(2);
    if (run.trace) {
      std::ostringstream out;
      viz::write_chrome_trace(out, *run.trace, *run.program,
                              {config::microseconds_per_unit(cfg.time_unit), cfg.name});
      if (!json::accept(out.str()))
        throw std::logic_error("the Chrome trace written is not valid JSON");
    }
    (void)run.program->to_text();
    return Outcome::accepted;
  });
}

Outcome search_result_entry(std::string_view bytes) {
  try {
    const auto j = config::parse_json_text(std::string(bytes), kSource);
    const search::SearchResult r = search::from_json(j, kSource);
    const auto once = search::to_json(r);
    if (search::to_json(search::from_json(once, kSource)) != once)
      throw std::logic_error("a search result does not survive to_json -> from_json");
    if (r.shard.count == 1) search::merge({r});
    return Outcome::accepted;
  } catch (const config::ConfigError&) {
    return Outcome::rejected;
  }
}

// The same bytes as a calibration fragment over interleaved 1F1B at P = 4 (another layout than
// a 1F1B fragment's, so map_costs runs): the overrides it gives load and simulate.
Outcome calibration_entry(std::string_view bytes) {
  static const config::Prepared target = config::prepare(config::parse_config(
      nlohmann::json::parse(R"({"schedule": {"kind": "interleaved-1f1b", "ranks": 4,
                                             "microbatches": 8, "chunks": 2}})"),
      kSource));
  try {
    const nlohmann::json whole = config::parse_json_text(std::string(bytes), kSource);
    const auto sets = profile::calibration_overrides(whole, kSource, [] { return target; });
    nlohmann::json j = target.config.raw;
    for (const auto& set : sets) config::apply_override(j, set);
    (void)sim::analyze(config::prepare(config::parse_config(j, kSource, sets)));
    return Outcome::accepted;
  } catch (const config::ConfigError&) {
    return Outcome::rejected;
  }
}

Outcome profile_entry(std::string_view bytes) {
  const Outcome fragment = calibration_entry(bytes);
  try {
    const auto t = profile::parse_trace(bytes, kSource, profile::default_patterns());
    const auto im = profile::import_traces({t}, {});
    if (!im.measured.metrics || im.measured.program->total_ops() == 0)
      throw std::logic_error("an accepted profile has no measured run");
    return Outcome::accepted;
  } catch (const profile::ProfileError&) {
    return fragment;
  }
}

Outcome hf_config_entry(std::string_view bytes) {
  config::HfModel hf;
  try {
    hf = config::parse_hf_config(config::parse_json_text(std::string(bytes), kSource), kSource);
  } catch (const config::ConfigError& e) {
    require_source(e);
    return Outcome::rejected;
  }
  const model::Transformer& m = hf.transformer;
  const bool moe_ok = m.experts == 0 ? m.top_k == 0 : m.top_k >= 1 && m.top_k <= m.experts;
  if (m.layers < 1 || m.hidden < 1 || m.heads < 1 || m.hidden % m.heads != 0 || m.kv_heads < 1 ||
      m.heads % m.kv_heads != 0 || m.ffn_hidden < 1 || m.vocab < 1 || m.sequence_length < 0 ||
      !moe_ok || hf.architecture.empty())
    throw std::logic_error("parse_hf_config accepted a network the model cannot take");
  return Outcome::accepted;
}

Outcome run_entry(const std::string& target, std::string_view bytes) {
  if (target == "hf_config") return hf_config_entry(bytes);
  if (target == "profile") return profile_entry(bytes);
  if (target == "search_result") return search_result_entry(bytes);
  if (target == "config") return config_entry(bytes);
  if (target == "oplist") return oplist_entry(bytes);
  if (target == "torch_csv") return torch_csv_entry(bytes);
  if (target == "pipeline") return pipeline_entry(bytes);
  throw std::invalid_argument("unknown fuzz target " + target);
}

}  // namespace ppsim::fuzz
