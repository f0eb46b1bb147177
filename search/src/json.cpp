// The JSON form of a search result (the interface `--json` prints and `ppsim merge` reads back).
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>

#include "ppsim/config/error.hpp"
#include "ppsim/search/search.hpp"

namespace ppsim::search {

using nlohmann::json;

namespace {

json candidate_json(const SearchResult& r, const Candidate& c) {
  json j = {{"family", c.family},
            {"schedule", c.schedule},
            {"origin", c.origin},
            {"task", c.task},
            {"verdict", c.verdict},
            {"finished", c.finished},
            {"within_limit", r.within_limit(c)}};
  if (!c.placement.empty()) j["placement"] = c.placement;
  if (!c.expressible()) j["inexpressible"] = c.inexpressible;
  if (c.origin == "exact") {
    j["bound"] = c.bound;
    j["optimal"] = c.optimal;
  }
  if (c.finished) {
    j["makespan"] = c.makespan;
    j["bubble_fraction"] = c.bubble_fraction;
    j["peak_memory_bytes"] = c.peak_memory_bytes;
  }
  return j;
}

[[noreturn]] void bad(const std::string& source, const std::string& key, const std::string& what) {
  throw config::ConfigError(source, key, what);
}

const json& need(const json& j, const char* key, json::value_t type, const std::string& source,
                 const std::string& where) {
  const std::string k = where.empty() ? key : where + "." + key;
  if (!j.is_object() || !j.contains(key))
    bad(source, k, "is missing (not a `ppsim search --json` output?)");
  const json& v = j[key];
  const bool ok =
      type == json::value_t::number_float
          ? v.is_number()
          : v.type() == type || (type == json::value_t::number_integer && v.is_number_unsigned());
  if (!ok)
    bad(source, k, fmt::format("expected {}, got {}", json(type).type_name(), v.type_name()));
  return v;
}

// An integer in [lo, hi] (JSON integers beyond int64 and floats are refused, not truncated).
std::int64_t integer(const json& j, const char* key, std::int64_t lo, std::int64_t hi,
                     const std::string& source, const std::string& where) {
  const json& v = need(j, key, json::value_t::number_integer, source, where);
  const std::string k = where.empty() ? key : where + "." + key;
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
    bad(source, k, fmt::format("expected an integer from {} to {}", lo, hi));
  const auto x = v.get<std::int64_t>();
  if (x < lo || x > hi) bad(source, k, fmt::format("expected an integer from {} to {}", lo, hi));
  return x;
}

constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();

}  // namespace

std::vector<std::size_t> best_per_family(const SearchResult& r) {
  std::map<std::string, std::size_t> best;
  std::vector<std::string> order;
  auto better = [&](const Candidate& a, const Candidate& b) {
    const int ka = r.within_limit(a) ? 2 : a.finished ? 1 : 0;
    const int kb = r.within_limit(b) ? 2 : b.finished ? 1 : 0;
    if (ka != kb) return ka > kb;
    return a.finished && a.makespan < b.makespan;
  };
  for (std::size_t i = 0; i < r.candidates.size(); ++i) {
    const auto& c = r.candidates[i];
    auto it = best.find(c.family);
    if (it == best.end()) {
      best[c.family] = i;
      order.push_back(c.family);
    } else if (better(c, r.candidates[it->second])) {
      it->second = i;
    }
  }
  std::vector<std::size_t> out;
  for (const auto& f : order) out.push_back(best[f]);
  return out;
}

json to_json(const SearchResult& r) {
  json out = {{"name", r.name},
              {"source", r.source},
              {"ranks", r.ranks},
              {"microbatches", r.microbatches},
              {"time_unit", r.time_unit},
              {"semantics", r.semantics},
              {"memory_limit", r.memory_limit},
              {"memory_limit_from", r.limit_from},
              {"digest", r.digest},
              {"cut_short", r.cut_short},
              {"shard", {{"index", r.shard.index}, {"count", r.shard.count}}}};
  if (r.best) {
    const Candidate& b = r.candidates[*r.best];
    out["best"] = {{"schedule", b.schedule},
                   {"family", b.family},
                   {"origin", b.origin},
                   {"candidate", *r.best},
                   {"makespan", b.makespan},
                   {"bubble_fraction", b.bubble_fraction},
                   {"peak_memory_bytes", b.peak_memory_bytes},
                   {"ops", b.ops},
                   {"lower_bound", r.lower_bound},
                   {"gap", r.lower_bound > 0 ? std::max(0.0, b.makespan / r.lower_bound - 1) : 0.0},
                   {"config", b.config}};
  } else {
    out["best"] = nullptr;
  }
  // The format cannot hold the best: the one `-o` writes instead.
  if (r.written && r.written != r.best)
    out["written"] = {{"candidate", *r.written},
                      {"schedule", r.candidates[*r.written].schedule},
                      {"config", r.candidates[*r.written].config}};
  json families = json::array();
  for (std::size_t i : best_per_family(r)) families.push_back(candidate_json(r, r.candidates[i]));
  out["families"] = families;
  json pareto = json::array();
  for (std::size_t i : r.pareto) {
    const auto& c = r.candidates[i];
    pareto.push_back({{"schedule", c.schedule},
                      {"family", c.family},
                      {"makespan", c.makespan},
                      {"peak_memory_bytes", c.peak()},
                      {"within_limit", r.within_limit(c)}});
  }
  out["pareto"] = pareto;
  json all = json::array();
  for (const auto& c : r.candidates) all.push_back(candidate_json(r, c));
  out["candidates"] = all;
  return out;
}

SearchResult from_json(const json& j, const std::string& source) {
  using T = json::value_t;
  SearchResult r;
  if (!j.is_object()) bad(source, "", "expected one JSON object as `ppsim search --json` prints");
  r.name = need(j, "name", T::string, source, "").get<std::string>();
  r.source = need(j, "source", T::string, source, "").get<std::string>();
  r.time_unit = need(j, "time_unit", T::string, source, "").get<std::string>();
  r.semantics = need(j, "semantics", T::string, source, "").get<std::string>();
  r.ranks = static_cast<int>(integer(j, "ranks", 1, kMaxInt, source, ""));
  r.microbatches = static_cast<int>(integer(j, "microbatches", 1, kMaxInt, source, ""));
  r.memory_limit =
      integer(j, "memory_limit", 1, std::numeric_limits<std::int64_t>::max(), source, "");
  r.limit_from = need(j, "memory_limit_from", T::string, source, "").get<std::string>();
  r.digest = need(j, "digest", T::string, source, "").get<std::string>();
  r.cut_short = need(j, "cut_short", T::boolean, source, "").get<bool>();
  r.read_from = source;
  const json& shard = need(j, "shard", T::object, source, "");
  r.shard.index = static_cast<int>(integer(shard, "index", 0, kMaxShards - 1, source, "shard"));
  r.shard.count = static_cast<int>(integer(shard, "count", 1, kMaxShards, source, "shard"));
  if (r.shard.count < 1 || r.shard.index < 0 || r.shard.index >= r.shard.count)
    bad(source, "shard",
        fmt::format("expected 0 <= index < count, got {}/{}", r.shard.index, r.shard.count));
  const json& all = need(j, "candidates", T::array, source, "");
  for (std::size_t i = 0; i < all.size(); ++i) {
    const std::string at = fmt::format("candidates[{}]", i);
    const json& c = all[i];
    Candidate k;
    k.family = need(c, "family", T::string, source, at).get<std::string>();
    k.schedule = need(c, "schedule", T::string, source, at).get<std::string>();
    k.origin = need(c, "origin", T::string, source, at).get<std::string>();
    k.task = static_cast<std::size_t>(integer(c, "task", 0, kMaxInt, source, at));
    if (c.contains("placement"))
      k.placement = need(c, "placement", T::string, source, at).get<std::string>();
    if (k.origin == "exact") {
      k.bound = need(c, "bound", T::number_float, source, at).get<double>();
      k.optimal = need(c, "optimal", T::boolean, source, at).get<bool>();
    }
    if (c.contains("inexpressible"))
      k.inexpressible = need(c, "inexpressible", T::string, source, at).get<std::string>();
    k.verdict = need(c, "verdict", T::string, source, at).get<std::string>();
    k.finished = need(c, "finished", T::boolean, source, at).get<bool>();
    if (k.finished) {
      k.makespan = need(c, "makespan", T::number_float, source, at).get<double>();
      k.bubble_fraction = need(c, "bubble_fraction", T::number_float, source, at).get<double>();
      const json& peaks = need(c, "peak_memory_bytes", T::array, source, at);
      for (const auto& p : peaks) {
        const bool ok =
            p.is_number_unsigned()
                ? p.get<std::uint64_t>() <=
                      static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
                : p.is_number_integer() && p.get<std::int64_t>() >= 0;
        if (!ok) bad(source, at + ".peak_memory_bytes", "expected integers >= 0");
        k.peak_memory_bytes.push_back(p.get<std::int64_t>());
      }
    }
    r.candidates.push_back(std::move(k));
  }
  const json& best = j.contains("best") ? j["best"] : json();
  if (!best.is_null()) {
    need(j, "best", T::object, source, "");
    const auto index = integer(best, "candidate", 0, kMaxInt, source, "best");
    if (index < 0 || static_cast<std::size_t>(index) >= r.candidates.size())
      bad(source, "best.candidate", fmt::format("expected an index below {}", r.candidates.size()));
    Candidate& b = r.candidates[static_cast<std::size_t>(index)];
    b.config = need(best, "config", T::object, source, "best");
    for (const auto& line : need(best, "ops", T::array, source, "best")) {
      if (!line.is_string()) bad(source, "best.ops", "expected strings");
      b.ops.push_back(line.get<std::string>());
    }
    r.lower_bound = need(best, "lower_bound", T::number_float, source, "best").get<double>();
    r.best = static_cast<std::size_t>(index);
  }
  if (j.contains("written")) {
    const json& w = need(j, "written", T::object, source, "");
    const auto index = integer(w, "candidate", 0, kMaxInt, source, "written");
    if (static_cast<std::size_t>(index) >= r.candidates.size())
      bad(source, "written.candidate",
          fmt::format("expected an index below {}", r.candidates.size()));
    r.candidates[static_cast<std::size_t>(index)].config =
        need(w, "config", T::object, source, "written");
  }
  // What the file says it found must be what its candidates give.
  SearchResult ranked = r;
  ranked.rank();
  if (ranked.best != r.best)
    bad(source, "best.candidate", "is not the fastest candidate within the limit");
  r.written = ranked.written;
  r.pareto = ranked.pareto;
  return r;
}

SearchResult merge(const std::vector<SearchResult>& parts) {
  SearchResult out;
  if (parts.empty()) return out;
  const SearchResult& first = parts.front();
  const auto file = [](const SearchResult& p) {
    return p.read_from.empty() ? p.source : p.read_from;
  };
  std::vector<bool> seen(static_cast<std::size_t>(first.shard.count), false);
  for (const auto& p : parts) {
    // The digest covers the whole resolved input: another config, --set, limit, seed, time
    // limit or format is another search.
    if (p.digest != first.digest)
      bad(file(p), "digest",
          fmt::format("is not a shard of the same search as {}: its input differs (config, "
                      "--set, limit, seed, time limit or format; digest {}, not {})",
                      file(first), p.digest, first.digest));
    if (p.name != first.name || p.ranks != first.ranks || p.microbatches != first.microbatches ||
        p.memory_limit != first.memory_limit || p.shard.count != first.shard.count ||
        p.semantics != first.semantics)
      bad(file(p), "shard",
          fmt::format("is not a shard of the same search as {} ({} P={} M={} limit {} in {} "
                      "shards)",
                      file(first), first.name, first.ranks, first.microbatches, first.memory_limit,
                      first.shard.count));
    if (seen[static_cast<std::size_t>(p.shard.index)])
      bad(file(p), "shard.index", fmt::format("shard {} is given twice", p.shard.index));
    seen[static_cast<std::size_t>(p.shard.index)] = true;
  }
  for (std::size_t i = 0; i < seen.size(); ++i)
    if (!seen[i])
      bad(file(first), "shard", fmt::format("shard {} of {} is missing", i, first.shard.count));
  out = first;
  out.candidates.clear();
  out.shard = {0, 1};
  out.read_from.clear();
  for (const auto& p : parts) out.cut_short = out.cut_short || p.cut_short;
  // Shards in index order, so the merged table is the one a single run prints.
  std::vector<const SearchResult*> ordered(parts.size());
  for (const auto& p : parts) ordered[static_cast<std::size_t>(p.shard.index)] = &p;
  // Candidates in task order, as an unsharded run lists them; each part's best keeps its bound.
  std::vector<std::pair<const Candidate*, double>> all;
  for (const SearchResult* p : ordered)
    for (std::size_t i = 0; i < p->candidates.size(); ++i)
      all.emplace_back(&p->candidates[i], p->best && *p->best == i ? p->lower_bound : -1.0);
  std::stable_sort(all.begin(), all.end(),
                   [](const auto& a, const auto& b) { return a.first->task < b.first->task; });
  std::vector<double> bounds;
  for (const auto& [c, bound] : all) {
    out.candidates.push_back(*c);
    bounds.push_back(bound);
  }
  out.rank();
  out.lower_bound = out.best ? std::max(0.0, bounds[*out.best]) : 0.0;
  return out;
}

}  // namespace ppsim::search
