#include "ppsim/search/search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "candidates.hpp"
#include "ppsim/base/jobs.hpp"
#include "ppsim/base/parallel_for.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/config/resources.hpp"
#include "ppsim/search/bounds.hpp"
#include "ppsim/search/improve.hpp"
#include "ppsim/search/pareto.hpp"
#include "ppsim/sim/analysis.hpp"

namespace ppsim::search {

using nlohmann::json;

std::int64_t Candidate::peak() const {
  std::int64_t m = 0;
  for (auto p : peak_memory_bytes) m = std::max(m, p);
  return m;
}

void SearchResult::rank() {
  best.reset();
  std::vector<Point> points;
  std::vector<std::size_t> which;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    if (!c.finished) continue;
    points.push_back({c.peak(), c.makespan});
    which.push_back(i);
    if (!within_limit(c)) continue;
    if (!best || c.makespan < candidates[*best].makespan ||
        (c.makespan == candidates[*best].makespan && c.peak() < candidates[*best].peak()))
      best = i;
  }
  pareto.clear();
  for (std::size_t k : pareto_front(points)) pareto.push_back(which[k]);
}

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

// The bound on the best's own placement; for programs of several routes (DualPipe) or with
// overlapped F&B pairs (which take less than F + B) only the busiest rank's compute, as the
// simulator counts it.
double bound_of(const config::Prepared& p) {
  bool overlapped = false;
  for (int r = 0; r < p.program->ranks() && !overlapped; ++r)
    for (const auto& op : p.program->ops(r))
      overlapped = overlapped || op.kind == schedules::OpKind::OVERLAP_F_B;
  if (p.program->routes().is_linear() && !overlapped) return lower_bound(make_instance(p, 0));
  const record::RunRecord run = sim::analyze(p);
  double busy = 0;
  if (run.metrics)
    for (const auto& r : run.metrics->per_rank) busy = std::max(busy, r.busy);
  return busy;
}

}  // namespace

SearchResult search(const config::Config& base, const SearchOptions& options) {
  SearchResult result;
  result.name = base.name;
  result.source = base.source;
  result.time_unit = base.time_unit;
  result.semantics = std::string(model::to_string(base.network.semantics));
  result.shard = options.shard;
  const config::Prepared prepared = config::prepare(base, options.limits);
  result.ranks = prepared.program->ranks();
  result.microbatches = prepared.program->microbatches();
  if (options.memory_limit > 0) {
    result.memory_limit = options.memory_limit;
    result.limit_from = "--memory-limit";
  } else if (base.hardware && base.hardware->hardware.memory_bytes > 0) {
    result.memory_limit = base.hardware->hardware.memory_bytes;
    result.limit_from = "hardware.memory_bytes";
  } else {
    throw config::ConfigError(base.source, "hardware.memory_bytes",
                              "a search needs a memory limit per rank: give --memory-limit BYTES "
                              "or a hardware section with memory_bytes (docs/SEARCH.md)");
  }
  if (!base.program->sweepable())
    throw config::ConfigError(base.source, "schedule.kind",
                              fmt::format("a search builds schedules for the config's ranks and "
                                          "microbatches; a {} schedule does not name them: use a "
                                          "generated schedule's kind",
                                          base.kind));
  // The constructive tasks first: they are the long ones, and the families fill in around them.
  std::vector<detail::Task> tasks = detail::constructed_tasks();
  for (auto& t : detail::family_tasks(base)) tasks.push_back(std::move(t));
  std::vector<detail::Task> mine;
  std::vector<std::size_t> task_index;
  for (std::size_t i = 0; i < tasks.size(); ++i)
    if (static_cast<int>(i % static_cast<std::size_t>(options.shard.count)) ==
        options.shard.index) {
      mine.push_back(std::move(tasks[i]));
      task_index.push_back(i);
    }
  detail::Context ctx{&base, result.memory_limit, options.seed,
                      options.time_limit > 0 ? steady_seconds() + options.time_limit : 0.0,
                      options.limits};
  std::vector<std::vector<Candidate>> found(mine.size());
  // Each task runs programs of about the config's size: no more at once than fit the memory
  // limit (the largest family program is within a small factor of the config's own).
  const unsigned jobs = config::jobs_within_memory(
      {base}, options.limits, options.jobs > 0 ? options.jobs : base::default_jobs());
  base::parallel_for(
      mine.size(), jobs, [&](std::size_t i) { found[i] = mine[i].run(ctx); },
      [&](std::size_t i) {
        if (options.progress) options.progress(i, mine.size(), mine[i].label);
      });
  for (std::size_t i = 0; i < found.size(); ++i)
    for (auto& c : found[i]) {
      c.task = task_index[i];
      result.candidates.push_back(std::move(c));
    }
  result.rank();
  if (result.best) {
    Candidate& best = result.candidates[*result.best];
    const config::Prepared p =
        config::prepare(config::parse_config(best.config, base.source + " (best)"), options.limits);
    result.lower_bound = bound_of(p);
    // The exact model's bound holds for the constructions on its placement.
    for (const auto& c : result.candidates)
      if (c.origin == "exact" && best.family == "constructed" && c.placement == best.placement)
        result.lower_bound = std::max(result.lower_bound, c.bound);
    best.ops = lines_of(p.program->to_text());
  }
  return result;
}

}  // namespace ppsim::search
