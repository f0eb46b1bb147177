#include "ppsim/config/config.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "param_reader.hpp"
#include "ppsim/config/reader.hpp"
#include "ppsim/config/section.hpp"
#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/generator.hpp"

namespace ppsim::config {

using nlohmann::json;

ConfigError::ConfigError(const std::string& source, const std::string& key,
                         const std::string& message)
    : std::runtime_error(key.empty() ? fmt::format("{}: {}", source, message)
                                     : fmt::format("{}: key '{}': {}", source, key, message)),
      source_(source),
      key_(key) {}

namespace {

// The 1-based byte where parsing `text` fails, for errors that do not carry it (a number too large
// for a double is an out_of_range error without position): the start of the offending token.
std::size_t failure_byte(const std::string& text) {
  struct Locator : json::json_sax_t {
    std::size_t byte = 0;
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(json::number_integer_t) override { return true; }
    bool number_unsigned(json::number_unsigned_t) override { return true; }
    bool number_float(json::number_float_t, const json::string_t&) override { return true; }
    bool string(json::string_t&) override { return true; }
    bool binary(json::binary_t&) override { return true; }
    bool start_object(std::size_t) override { return true; }
    bool key(json::string_t&) override { return true; }
    bool end_object() override { return true; }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t position, const std::string& token,
                     const json::exception&) override {
      byte = position > token.size() ? position - token.size() + 1 : position;
      return false;
    }
  } locator;
  json::sax_parse(text, &locator);
  return locator.byte;
}

}  // namespace

json parse_json_text(const std::string& text, const std::string& source) {
  std::size_t byte = 0;
  std::string what;
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    byte = e.byte;
    what = e.what();
  } catch (const json::out_of_range& e) {
    byte = failure_byte(text);
    what = e.what();
  }
  // Locate the byte nlohmann stopped at as line:column.
  const std::size_t at = std::min<std::size_t>(byte == 0 ? 0 : byte - 1, text.size());
  int line = 1, col = 1;
  for (std::size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  if (auto p = what.find("] "); what.starts_with("[json.exception.") && p != std::string::npos)
    what = what.substr(p + 2);
  if (auto p = what.find(": "); what.starts_with("parse error") && p != std::string::npos)
    what = what.substr(p + 2);
  throw ConfigError(fmt::format("{}:{}:{}", source, line, col), "",
                    fmt::format("malformed JSON: {}", what));
}

void apply_override(json& config, const std::string& assignment) {
  const std::string source = fmt::format("--set {}", assignment);
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError(source, "", "expected KEY=VALUE, e.g. comm.style=blocking");
  const std::string path = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  json value;
  try {
    value = json::parse(text);
  } catch (const json::exception&) {  // not JSON (or a number out of range): take it as text
    value = text;
  }
  json* node = &config;
  std::size_t start = 0;
  while (true) {
    const auto dot = path.find('.', start);
    const std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty()) throw ConfigError(source, path, "empty key component");
    // null: a section the config does not have yet, e.g. --set comm.style=blocking without "comm".
    if (!node->is_object() && !node->is_null())
      throw ConfigError(source, path, "cannot set a key inside a non-object value");
    node = &(*node)[part];
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  *node = value;
}

namespace {}  // namespace

Reader::Reader(const json& j, std::string source, std::string prefix)
    : j_(j), source_(std::move(source)), prefix_(std::move(prefix)) {
  if (!j_.is_object())
    throw ConfigError(source_,
                      prefix_.empty() ? "(top level)" : prefix_.substr(0, prefix_.size() - 1),
                      fmt::format("expected an object, got {}", describe(j_)));
}

std::string Reader::describe(const json& v) {
  std::string d = v.dump();
  if (d.size() > 40) d = d.substr(0, 37) + "...";
  return fmt::format("{} {}", v.type_name(), d);
}

const json* Reader::get(const std::string& k) {
  known_.insert(k);
  auto it = j_.find(k);
  if (it == j_.end() || it->is_null()) return nullptr;
  return &*it;
}
bool Reader::has(const std::string& k) const {
  return j_.contains(k) && !j_.at(k).is_null();
}

double Reader::number(const std::string& k, double def, bool allow_negative) {
  const json* v = get(k);
  if (!v) return def;
  if (!v->is_number()) fail(k, fmt::format("expected a number, got {}", describe(*v)));
  const double x = v->get<double>();
  if (!std::isfinite(x)) fail(k, "expected a finite number");
  if (!allow_negative && x < 0) fail(k, fmt::format("expected a number >= 0, got {}", x));
  return x;
}
std::optional<double> Reader::opt_number(const std::string& k) {
  if (!has(k)) {
    known_.insert(k);
    return std::nullopt;
  }
  return number(k, 0);
}
std::int64_t Reader::bytes(const std::string& k, std::int64_t def) {
  const json* v = get(k);
  if (!v) return def;
  if (!v->is_number() || v->get<double>() < 0 || std::floor(v->get<double>()) != v->get<double>() ||
      v->get<double>() > 9.0e18)
    fail(k, fmt::format("expected a whole number of bytes >= 0, got {}", describe(*v)));
  return v->is_number_integer() ? v->get<std::int64_t>()
                                : static_cast<std::int64_t>(v->get<double>());
}
int Reader::integer(const std::string& k, int def, int min, bool required) {
  const json* v = get(k);
  if (!v) {
    if (required) fail(k, fmt::format("is required: expected an integer >= {}", min));
    return def;
  }
  if (!v->is_number_integer() || v->get<long long>() < min || v->get<long long>() > 1'000'000'000)
    fail(k, fmt::format("expected an integer >= {}, got {}", min, describe(*v)));
  return static_cast<int>(v->get<long long>());
}
std::string Reader::string(const std::string& k, std::string def, bool required) {
  const json* v = get(k);
  if (!v) {
    if (required) fail(k, "is required: expected a string");
    return def;
  }
  if (!v->is_string()) fail(k, fmt::format("expected a string, got {}", describe(*v)));
  return v->get<std::string>();
}
bool Reader::boolean(const std::string& k, bool def) {
  const json* v = get(k);
  if (!v) return def;
  if (!v->is_boolean()) fail(k, fmt::format("expected true or false, got {}", describe(*v)));
  return v->get<bool>();
}
std::string Reader::one_of(const std::string& k, std::string def,
                           std::initializer_list<std::string_view> allowed) {
  return one_of(k, std::move(def), std::vector<std::string>(allowed.begin(), allowed.end()));
}
std::string Reader::one_of(const std::string& k, std::string def,
                           const std::vector<std::string>& allowed) {
  std::string v = string(k, def);
  for (const auto& a : allowed)
    if (v == a) return v;
  fail(k, fmt::format("expected one of {}, got \"{}\"", fmt::join(allowed, ", "), v));
}

void Reader::reject_unknown(const std::function<std::string(const std::string&)>& hint) const {
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    if (known_.count(it.key())) continue;
    const std::string why = hint ? hint(it.key()) : std::string();
    if (!why.empty()) fail(it.key(), why);
    fail(it.key(), fmt::format("unknown key; known keys here: {}", fmt::join(known_, ", ")));
  }
}

namespace {

CostSpec read_costs(Reader& r) {
  CostSpec c;
  c.forward = r.opt_number("forward");
  c.backward = r.opt_number("backward");
  c.backward_input = r.opt_number("backward_input");
  c.backward_weight = r.opt_number("backward_weight");
  return c;
}

}  // namespace

Config parse_config(const json& j, const std::string& source) {
  Config c;
  c.source = source;
  c.raw = j;
  Reader top(j, source, "");
  c.name = top.string("name", std::filesystem::path(source).stem().string());
  c.time_unit = top.one_of("time_unit", "ms", {"s", "ms", "us", "ns"});

  const json* sched = top.get("schedule");
  if (!sched)
    top.fail("schedule", "is required: expected an object with at least kind, ranks, microbatches");
  {
    Reader s(*sched, source, "schedule.");
    c.kind = s.string("kind", "", true);
    const ProgramSource* src = SourceRegistry::instance().for_kind(c.kind);
    if (!src) {
      std::vector<std::string> names = schedules::Registry::instance().names();
      for (const auto& one : SourceRegistry::instance().all())
        if (one.name != "generated") names.push_back(one.name);
      s.fail("kind", fmt::format("unknown schedule \"{}\"; expected one of {}", c.kind,
                                 fmt::join(names, ", ")));
    }
    c.program = src->read(s, c.kind);
  }
  if (const json* costs = top.get("costs")) {
    Reader r(*costs, source, "costs.");
    c.costs = read_costs(r);
    if (const json* per = r.get("per_stage")) {
      Reader ps(*per, source, "costs.per_stage.");
      for (auto it = per->begin(); it != per->end(); ++it) {
        int stage = -1;
        try {
          std::size_t used = 0;
          stage = std::stoi(it.key(), &used);
          if (used != it.key().size()) stage = -1;
        } catch (const std::exception&) {
        }
        if (stage < 0)
          ps.fail(it.key(), "expected a stage number as key, e.g. \"3\": {\"forward\": 1.5}");
        Reader one(it.value(), source, fmt::format("costs.per_stage.{}.", it.key()));
        c.stage_costs[stage] = read_costs(one);
        one.reject_unknown();
        ps.get(it.key());
      }
    }
    r.reject_unknown();
  }

  if (const json* comm = top.get("comm")) {
    Reader r(*comm, source, "comm.");
    const auto& styles = schedules::LoweringRegistry::instance();
    c.lowering.style = r.one_of("style", "async", styles.names());
    c.network.latency = r.number("latency", 0);
    c.network.bandwidth = r.number("bandwidth", 0);
    c.network.boundary_bytes = r.bytes("boundary_bytes", 0);
    c.network.eager_limit = r.bytes("eager_limit", 0);
    c.network.matching =
        r.one_of("matching", "tag", {"tag", "fifo"}) == "tag" ? Matching::tag : Matching::fifo;
    // The chosen style's own parameters, as it declares them.
    read_params(r, styles.find(c.lowering.style)->params, c.lowering.style, c.lowering.params);
    r.reject_unknown([&](const std::string& key) -> std::string {
      std::vector<std::string> users;
      for (const auto& st : styles.all())
        if (schedules::find_param(st.params, key)) users.push_back(st.name);
      if (users.empty()) return "";
      return fmt::format("a parameter of comm style {}, not of \"{}\"", fmt::join(users, ", "),
                         c.lowering.style);
    });
  }
  // Defaults of the style's parameters, so reports and sweeps see the values in force.
  c.lowering.params =
      schedules::resolve(schedules::LoweringRegistry::instance().find(c.lowering.style)->params,
                         c.lowering.params, c.lowering.style);

  if (const json* mem = top.get("memory")) {
    Reader r(*mem, source, "memory.");
    c.memory.activation_bytes = r.bytes("activation_bytes", 0);
    c.memory.weight_stash_bytes = r.bytes("weight_stash_bytes", 0);
    c.memory.static_bytes = r.bytes("static_bytes", 0);
    c.memory.deallocate_outputs = r.boolean("deallocate_outputs", false);
    if (c.memory.weight_stash_bytes > c.memory.activation_bytes)
      r.fail("weight_stash_bytes",
             fmt::format("must not exceed activation_bytes ({}), got {}", c.memory.activation_bytes,
                         c.memory.weight_stash_bytes));
    r.reject_unknown();
  }
  for (const auto& section : SectionRegistry::instance().all()) {
    if (const json* v = top.get(section.name)) {
      Reader r(*v, source, section.name + ".");
      section.check(r);
      c.sections[section.name] = *v;
    }
  }
  top.reject_unknown();
  return c;
}

std::string_view to_string(Matching m) {
  return m == Matching::tag ? "tag" : "fifo";
}

SectionRegistry& SectionRegistry::instance() {
  static SectionRegistry registry;
  return registry;
}
void SectionRegistry::add(Section section) {
  for (auto& s : sections_)
    if (s.name == section.name) {
      s = std::move(section);
      return;
    }
  sections_.push_back(std::move(section));
}
const Section* SectionRegistry::find(std::string_view name) const {
  for (const auto& s : sections_)
    if (s.name == name) return &s;
  return nullptr;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path, "", "cannot open file");
  std::ostringstream text;
  text << in.rdbuf();
  json j = parse_json_text(text.str(), path);
  for (const auto& o : overrides) apply_override(j, o);
  return parse_config(j, path);
}

double microseconds_per_unit(const std::string& unit) {
  if (unit == "s") return 1e6;
  if (unit == "ms") return 1e3;
  if (unit == "us") return 1.0;
  return 1e-3;  // ns
}

}  // namespace ppsim::config
