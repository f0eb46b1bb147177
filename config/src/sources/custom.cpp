// `custom`: hand-written op lists, one string per rank, with their communication written out;
// optional routes for programs whose microbatches take different paths (DualPipe).
#include <fmt/format.h>

#include <sstream>

#include "ppsim/config/config.hpp"
#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/generator.hpp"

namespace ppsim::config::sources {

namespace {

class CustomSpec : public ProgramSpec {
 public:
  CustomSpec(std::vector<std::string> lines, std::optional<schedules::Routes> routes)
      : lines_(std::move(lines)), routes_(std::move(routes)) {}
  schedules::Program build(const schedules::LoweringOptions&,
                           const std::string& source) const override {
    std::string text;
    for (const auto& line : lines_) text += line + "\n";
    try {
      return schedules::Program::parse(text, routes_.value_or(schedules::Routes{}));
    } catch (const schedules::ParseError& e) {
      throw ConfigError(source, fmt::format("schedule.ops[{}]", e.line() - 1),
                        fmt::format("column {}: {}", e.column(), e.what()));
    } catch (const schedules::ParameterError& e) {
      throw ConfigError(source, "schedule." + e.key(), e.what());
    }
  }
  std::string comm_style(const schedules::LoweringOptions&) const override { return "custom"; }
  bool sweepable() const override { return false; }

 private:
  std::vector<std::string> lines_;
  std::optional<schedules::Routes> routes_;
};

std::vector<std::int32_t> int_list(Reader& r, const std::string& key, const nlohmann::json& v) {
  if (!v.is_array() || v.empty())
    r.fail(key,
           fmt::format("expected a non-empty array of integers >= 0, got {}", Reader::describe(v)));
  std::vector<std::int32_t> out;
  for (const auto& x : v) {
    if (!x.is_number_integer() || x.get<long long>() < 0 || x.get<long long>() > 1'000'000'000)
      r.fail(key, fmt::format("expected integers >= 0, got {}", Reader::describe(x)));
    out.push_back(static_cast<std::int32_t>(x.get<long long>()));
  }
  return out;
}

// "routes": [{"stages": [0, 1], "microbatches": [0, 1]}, {"stages": [2, 3], ...}]
schedules::Routes read_routes(Reader& s, const nlohmann::json& v) {
  if (!v.is_array() || v.empty())
    s.fail("routes", "expected an array of {\"stages\": [...], \"microbatches\": [...]}");
  std::vector<std::vector<std::int32_t>> paths;
  std::vector<std::int32_t> of_mb;
  int stages = 0;
  for (std::size_t k = 0; k < v.size(); ++k) {
    Reader one(v[k], s.source(), fmt::format("schedule.routes[{}].", k));
    const nlohmann::json* st = one.get("stages");
    const nlohmann::json* mb = one.get("microbatches");
    if (!st) one.fail("stages", "is required: the stages of this route in forward order");
    if (!mb) one.fail("microbatches", "is required: the microbatches that take this route");
    paths.push_back(int_list(one, "stages", *st));
    for (auto x : paths.back()) stages = std::max(stages, x + 1);
    for (std::int32_t m : int_list(one, "microbatches", *mb)) {
      if (static_cast<std::size_t>(m) >= of_mb.size())
        of_mb.resize(static_cast<std::size_t>(m) + 1, -1);
      if (of_mb[static_cast<std::size_t>(m)] >= 0)
        one.fail("microbatches", fmt::format("microbatch {} is already on route {}", m,
                                             of_mb[static_cast<std::size_t>(m)]));
      of_mb[static_cast<std::size_t>(m)] = static_cast<std::int32_t>(k);
    }
    one.reject_unknown();
  }
  for (std::size_t m = 0; m < of_mb.size(); ++m)
    if (of_mb[m] < 0) s.fail("routes", fmt::format("microbatch {} is on no route", m));
  try {
    return schedules::Routes(stages, std::move(paths), std::move(of_mb));
  } catch (const schedules::ParameterError& e) {
    s.fail("routes", e.what());
  }
}

std::shared_ptr<const ProgramSpec> read(Reader& s, const std::string&) {
  const nlohmann::json* ops = s.get("ops");
  if (!ops || !(ops->is_array() || ops->is_string()))
    s.fail("ops",
           "kind \"custom\" needs ops: an array with one op string per rank (\"0F0,0F1,...\")");
  std::vector<std::string> lines;
  if (ops->is_string()) {
    std::istringstream in(ops->get<std::string>());
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  } else {
    for (std::size_t i = 0; i < ops->size(); ++i) {
      if (!(*ops)[i].is_string())
        s.fail(fmt::format("ops[{}]", i),
               fmt::format("expected a string of ops, got {}", Reader::describe((*ops)[i])));
      lines.push_back((*ops)[i].get<std::string>());
    }
  }
  std::optional<schedules::Routes> routes;
  if (const nlohmann::json* r = s.get("routes")) routes = read_routes(s, *r);
  s.reject_unknown([](const std::string& key) -> std::string {
    for (const auto& g : schedules::Registry::instance().all())
      if (schedules::find_param(g.params, key))
        return "a custom schedule takes ops (and routes), not generator parameters: its op "
               "lists say it all";
    return "";
  });
  return std::make_shared<CustomSpec>(std::move(lines), std::move(routes));
}

}  // namespace

void register_custom(SourceRegistry& registry) {
  registry.add({"custom", "your own op lists: schedule.ops, one string per rank",
                [](std::string_view kind) { return kind == "custom"; }, read});
}

}  // namespace ppsim::config::sources
