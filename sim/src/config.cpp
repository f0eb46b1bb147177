#include "ppsim/sim/config.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "ppsim/schedules/error.hpp"

namespace ppsim::sim {

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

namespace {

// Reads one JSON object, remembering which keys were used so unknown ones can be rejected.
class Reader {
 public:
  Reader(const json& j, std::string source, std::string prefix)
      : j_(j), source_(std::move(source)), prefix_(std::move(prefix)) {
    if (!j_.is_object())
      throw ConfigError(source_,
                        prefix_.empty() ? "(top level)" : prefix_.substr(0, prefix_.size() - 1),
                        fmt::format("expected an object, got {}", describe(j_)));
  }

  static std::string describe(const json& v) {
    std::string d = v.dump();
    if (d.size() > 40) d = d.substr(0, 37) + "...";
    return fmt::format("{} {}", v.type_name(), d);
  }

  std::string key(const std::string& k) const { return prefix_ + k; }
  [[noreturn]] void fail(const std::string& k, const std::string& msg) const {
    throw ConfigError(source_, key(k), msg);
  }

  const json* get(const std::string& k) {
    known_.insert(k);
    auto it = j_.find(k);
    if (it == j_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool has(const std::string& k) const { return j_.contains(k) && !j_.at(k).is_null(); }

  double number(const std::string& k, double def, bool allow_negative = false) {
    const json* v = get(k);
    if (!v) return def;
    if (!v->is_number()) fail(k, fmt::format("expected a number, got {}", describe(*v)));
    const double x = v->get<double>();
    if (!std::isfinite(x)) fail(k, "expected a finite number");
    if (!allow_negative && x < 0) fail(k, fmt::format("expected a number >= 0, got {}", x));
    return x;
  }
  std::optional<double> opt_number(const std::string& k) {
    if (!has(k)) {
      known_.insert(k);
      return std::nullopt;
    }
    return number(k, 0);
  }
  std::int64_t bytes(const std::string& k, std::int64_t def) {
    const json* v = get(k);
    if (!v) return def;
    if (!v->is_number() || v->get<double>() < 0 ||
        std::floor(v->get<double>()) != v->get<double>() || v->get<double>() > 9.0e18)
      fail(k, fmt::format("expected a whole number of bytes >= 0, got {}", describe(*v)));
    return v->is_number_integer() ? v->get<std::int64_t>()
                                  : static_cast<std::int64_t>(v->get<double>());
  }
  int integer(const std::string& k, int def, int min, bool required = false) {
    const json* v = get(k);
    if (!v) {
      if (required) fail(k, fmt::format("is required: expected an integer >= {}", min));
      return def;
    }
    if (!v->is_number_integer() || v->get<long long>() < min || v->get<long long>() > 1'000'000'000)
      fail(k, fmt::format("expected an integer >= {}, got {}", min, describe(*v)));
    return static_cast<int>(v->get<long long>());
  }
  std::string string(const std::string& k, std::string def, bool required = false) {
    const json* v = get(k);
    if (!v) {
      if (required) fail(k, "is required: expected a string");
      return def;
    }
    if (!v->is_string()) fail(k, fmt::format("expected a string, got {}", describe(*v)));
    return v->get<std::string>();
  }
  bool boolean(const std::string& k, bool def) {
    const json* v = get(k);
    if (!v) return def;
    if (!v->is_boolean()) fail(k, fmt::format("expected true or false, got {}", describe(*v)));
    return v->get<bool>();
  }
  std::string one_of(const std::string& k, std::string def,
                     std::initializer_list<std::string_view> allowed) {
    std::string v = string(k, def);
    for (auto a : allowed)
      if (v == a) return v;
    fail(k, fmt::format("expected one of {}, got \"{}\"", fmt::join(allowed, ", "), v));
  }

  // Call last: every key not read is a typo or a feature we do not have.
  void reject_unknown() const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (known_.count(it.key())) continue;
      fail(it.key(), fmt::format("unknown key; known keys here: {}", fmt::join(known_, ", ")));
    }
  }

 private:
  const json& j_;
  std::string source_, prefix_;
  std::set<std::string> known_;
};

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
    if (c.kind == "custom") {
      const json* ops = s.get("ops");
      if (!ops || !(ops->is_array() || ops->is_string()))
        s.fail("ops",
               "kind \"custom\" needs ops: an array with one op string per rank (\"0F0,0F1,...\")");
      if (ops->is_string()) {
        std::istringstream in(ops->get<std::string>());
        for (std::string line; std::getline(in, line);) c.custom_ops.push_back(line);
      } else {
        for (std::size_t i = 0; i < ops->size(); ++i) {
          if (!(*ops)[i].is_string())
            s.fail(fmt::format("ops[{}]", i),
                   fmt::format("expected a string of ops, got {}", Reader::describe((*ops)[i])));
          c.custom_ops.push_back((*ops)[i].get<std::string>());
        }
      }
    } else {
      if (!schedules::Registry::instance().find(c.kind)) {
        std::vector<std::string> names;
        for (const auto& g : schedules::Registry::instance().all()) names.push_back(g.name);
        s.fail("kind", fmt::format("unknown schedule \"{}\"; expected one of {}, or custom", c.kind,
                                   fmt::join(names, ", ")));
      }
      c.params.ranks = s.integer("ranks", 0, 1, true);
      c.params.microbatches = s.integer("microbatches", 0, 1, true);
      c.params.chunks = s.integer("chunks", 1, 1);
      c.params.microbatch_group_size = s.integer("microbatch_group_size", 0, 1);
    }
    s.reject_unknown();
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
    const std::string style =
        r.one_of("style", "async", {"blocking", "async-send", "batched", "async"});
    schedules::parse_comm_style(style, c.lowering.style);
    c.network.latency = r.number("latency", 0);
    c.network.bandwidth = r.number("bandwidth", 0);
    c.network.boundary_bytes = r.bytes("boundary_bytes", 0);
    c.network.eager_limit = r.bytes("eager_limit", 0);
    c.network.matching =
        r.one_of("matching", "tag", {"tag", "fifo"}) == "tag" ? Matching::tag : Matching::fifo;
    if (const json* pf = r.get("prefetch")) {
      if (pf->is_string() && pf->get<std::string>() == "all")
        c.lowering.prefetch = schedules::LoweringOptions::kPrefetchAll;
      else if (pf->is_number_integer() && pf->get<long long>() >= 0 &&
               pf->get<long long>() < 1'000'000'000)
        c.lowering.prefetch = static_cast<int>(pf->get<long long>());
      else
        r.fail("prefetch",
               fmt::format("expected an integer >= 0 or \"all\", got {}", Reader::describe(*pf)));
    }
    r.reject_unknown();
  }

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
  top.reject_unknown();
  return c;
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

namespace {

StageCost resolve(const Config& c, const CostSpec& s, const std::string& key) {
  auto pick = [](const std::optional<double>& a, const std::optional<double>& b) {
    return a ? a : b;
  };
  const auto f = pick(s.forward, c.costs.forward);
  // A stage that splits B does not inherit a full B from above, and a stage that gives a full B
  // does not inherit the split: otherwise the check below would blame a key the user never wrote.
  const bool own_split = s.backward_input || s.backward_weight;
  const std::optional<double> none;
  const auto b = own_split && !s.backward ? none : pick(s.backward, c.costs.backward);
  const auto bi = s.backward && !own_split ? none : pick(s.backward_input, c.costs.backward_input);
  const auto bw =
      s.backward && !own_split ? none : pick(s.backward_weight, c.costs.backward_weight);
  StageCost out;
  out.forward = f.value_or(1.0);
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

}  // namespace

BuiltRun build(const Config& c) {
  BuiltRun run;
  if (c.kind == "custom") {
    std::string text;
    for (const auto& line : c.custom_ops) text += line + "\n";
    try {
      run.program = schedules::Program::parse(text);
    } catch (const schedules::ParseError& e) {
      throw ConfigError(c.source, fmt::format("schedule.ops[{}]", e.line() - 1),
                        fmt::format("column {}: {}", e.column(), e.what()));
    }
  } else {
    try {
      run.program = schedules::lower(schedules::generate(c.kind, c.params), c.lowering);
    } catch (const schedules::ParameterError& e) {
      const std::string prefix = e.key() == "prefetch" ? "comm." : "schedule.";
      throw ConfigError(c.source, prefix + e.key(), e.what());
    }
  }
  const int S = run.program.stages();
  for (const auto& [stage, spec] : c.stage_costs) {
    if (stage >= S)
      throw ConfigError(c.source, fmt::format("costs.per_stage.{}", stage),
                        fmt::format("stage out of range: the schedule has stages 0..{}", S - 1));
  }
  run.options.costs.stages.reserve(static_cast<std::size_t>(S));
  const StageCost base = resolve(c, CostSpec{}, "costs.");
  for (int s = 0; s < S; ++s) {
    auto it = c.stage_costs.find(s);
    run.options.costs.stages.push_back(
        it == c.stage_costs.end() ? base
                                  : resolve(c, it->second, fmt::format("costs.per_stage.{}.", s)));
  }
  run.options.network = c.network;
  run.options.memory = c.memory;
  return run;
}

}  // namespace ppsim::sim
