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
  written.reset();
  std::vector<Point> points;
  std::vector<std::size_t> which;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    if (!c.finished) continue;
    points.push_back({c.peak(), c.makespan});
    which.push_back(i);
    if (!within_limit(c)) continue;
    const auto faster = [&](const std::optional<std::size_t>& than) {
      return !than || c.makespan < candidates[*than].makespan ||
             (c.makespan == candidates[*than].makespan && c.peak() < candidates[*than].peak());
    };
    if (faster(best)) best = i;
    if (c.expressible() && faster(written)) written = i;
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
// simulator counted it when it verified the candidate.
double bound_of(const config::Prepared& p, const Candidate& best) {
  bool overlapped = false;
  for (int r = 0; r < p.program->ranks() && !overlapped; ++r)
    for (const auto& op : p.program->ops(r))
      overlapped = overlapped || op.kind == schedules::OpKind::OVERLAP_F_B;
  if (p.program->routes().is_linear() && !overlapped) return lower_bound(make_instance(p, 0));
  return best.busiest;
}

// What a search's result depends on, as one digest: the config as resolved (after --set, with
// the costs and memory derived from its model), the limit, seed, time limit and format.
std::string input_digest(const config::Config& base, const config::Prepared& prepared,
                         const SearchOptions& o, const SearchResult& r) {
  std::string text = base.raw.dump(-1, ' ', false, json::error_handler_t::replace);
  text += fmt::format("\nlimit {} {}\nseed {}\ntime {:a}\nformat {}\nmax_memory {}\n",
                      r.memory_limit, r.limit_from, o.seed, o.time_limit,
                      o.format == Format::torch_csv ? "torch-csv" : "config", o.limits.max_memory);
  const model::Model& m = prepared.model;
  for (const auto& c : m.costs.stages)
    text += fmt::format("{:a} {:a} {:a} {:a} {} {:a} {:a}\n", c.forward, c.backward_input,
                        c.backward_weight, c.backward, c.split, c.overlapped_fb,
                        c.overlapped_fb_fraction);
  text += fmt::format("{:a} {:a}\n", m.costs.launch_overhead, m.costs.start_offset);
  for (int s = 0; s < prepared.program->stages(); ++s) {
    const auto sm = m.memory.stage(s);
    text += fmt::format("{} {} {}\n", sm.activation_bytes, sm.weight_stash_bytes, sm.static_bytes);
  }
  return digest_of(text);
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
  // A winner over its own GPU's memory would not run there.
  if (const std::int64_t gpu = base.hardware ? base.hardware->hardware.memory_bytes : 0;
      gpu > 0 && result.memory_limit > gpu)
    throw config::ConfigError(base.source_of("hardware.memory_bytes"), "hardware.memory_bytes",
                              fmt::format("--memory-limit {} bytes is above the GPU's memory, {} "
                                          "bytes: give at most that",
                                          result.memory_limit, gpu));
  result.digest = input_digest(base, prepared, options, result);
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
  std::atomic<bool> cut_short{false};
  detail::Context ctx{&base,
                      result.memory_limit,
                      options.seed,
                      options.deadline > 0     ? options.deadline
                      : options.time_limit > 0 ? steady_seconds() + options.time_limit
                                               : 0.0,
                      options.limits,
                      options.format,
                      &cut_short};
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
  result.cut_short = cut_short.load();
  result.rank();
  if (result.best) {
    Candidate& best = result.candidates[*result.best];
    const config::Prepared p =
        config::prepare(config::parse_config(best.config, base.source + " (best)"), options.limits);
    result.lower_bound = bound_of(p, best);
    // The exact model's bound holds for the constructions on its placement.
    for (const auto& c : result.candidates)
      if (c.origin == "exact" && best.family == "constructed" && c.placement == best.placement)
        result.lower_bound = std::max(result.lower_bound, c.bound);
    best.ops = lines_of(p.program->to_text());
  }
  return result;
}

}  // namespace ppsim::search
