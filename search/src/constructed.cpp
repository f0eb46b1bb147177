// The constructive candidates: the list scheduler (greedy.hpp) under many policies and at several
// fractions of the memory limit on each placement, the best improved by local search, each
// verified in the simulator as a custom config.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "candidates.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/config/sweep.hpp"
#include "ppsim/search/exact.hpp"
#include "ppsim/search/greedy.hpp"
#include "ppsim/search/improve.hpp"

namespace ppsim::search::detail {

using nlohmann::json;

namespace {

// Where the list scheduler builds: a schedule family whose placement and stage split it takes.
struct Placement {
  std::string label;   // "1 chunk", "V", "2 looped chunks"
  std::string family;  // generated once for its placement, costs and memory
  int chunks;
  bool needs_split;  // only with I/W costs
};

const std::vector<Placement>& placements() {
  static const std::vector<Placement> all = {{"1 chunk", "zb-h1", 1, true},
                                             {"1 chunk", "1f1b", 1, false},
                                             {"V", "zbv", 2, true},
                                             {"2 looped chunks", "looped-bfs", 2, false}};
  return all;
}

// The variants that win on the zero-bubble paper's settings (tests/data/zb_settings.json) and the
// bundled configs: warm-up by memory or 1F1B's plus 0-2, either op first, W filling any wait,
// half-W waits or whole-W waits; the tighter limits of the Pareto front get the usual winners.
std::vector<Policy> policies(bool wide) {
  std::vector<Policy> out;
  for (int extra : {-1, 0, 1, 2})
    for (bool forward_first : {false, true})
      for (double fill : {0.0, 0.5, 1.0}) {
        if (!wide && (extra > 0 || fill == 1.0)) continue;
        out.push_back({extra, forward_first, fill, -1, true});
        if (wide && extra < 0 && fill < 1.0) out.push_back({extra, forward_first, fill, -1, false});
      }
  return out;
}

struct Built {
  Orders orders;
  Timing timing;
  std::string how;
};

// The best `keep` schedules the policies build under `limit` (by makespan, then peak).
std::vector<Built> build_all(const Instance& in, std::int64_t limit, bool wide, std::size_t keep,
                             const Context& ctx) {
  std::vector<Built> out;
  for (const Policy& p : policies(wide)) {
    if (ctx.expired()) break;
    auto orders = greedy(in, p, limit);
    if (!orders) continue;
    Timing t = evaluate(in, *orders);
    if (!t.complete || !t.fits(limit)) continue;
    out.push_back({std::move(*orders), std::move(t), p.describe()});
  }
  std::stable_sort(out.begin(), out.end(), [](const Built& a, const Built& b) {
    if (a.timing.makespan != b.timing.makespan) return a.timing.makespan < b.timing.makespan;
    return a.timing.max_peak() < b.timing.max_peak();
  });
  if (out.size() > keep) out.resize(keep);
  return out;
}

// Verifies orders under the config's comm style; with none, under each comm variant, keeping the
// fastest that finishes.
Candidate verify_orders(const config::Config& point, const Orders& orders, const std::string& what,
                        const Context& ctx) {
  json j = custom_orders_config(point, orders, fmt::format("{}/search/{}", ctx.base->name, what));
  const std::string source = ctx.base->source + " (" + what + ")";
  // Within the limit first, then the faster: a faster variant over the limit (more receive
  // buffers posted early) must not hide one that fits.
  auto rank = [&](const Candidate& c) { return !c.finished ? 0 : c.peak() <= ctx.limit ? 2 : 1; };
  Candidate best;
  for (const CommVariant& comm : comm_variants(*ctx.base, false)) {
    json one = j;
    comm.apply(one);
    Candidate c = verify(one, source, ctx);
    if (best.verdict.empty() || rank(c) > rank(best) ||
        (rank(c) == rank(best) && c.finished && c.makespan < best.makespan))
      best = std::move(c);
  }
  return best;
}

constexpr std::size_t kLargeOps = 200'000;

std::int64_t max_static(const Instance& in) {
  return *std::max_element(in.static_bytes.begin(), in.static_bytes.end());
}

// The constructions at `fraction` of the limit (above the static bytes): the best of the policies,
// improved by local search, verified; then, at the full limit of a small instance, the exact model.
// A schedule the simulator finds over the limit (comm buffers, which the timing model leaves out)
// is built again under a limit lowered by the excess; the first that fits is kept, else the
// first built (reported over the limit).
std::vector<Candidate> at_fraction(const Placement& pl, const config::Config& point,
                                   const Instance& in, double fraction, bool large,
                                   const Context& ctx) {
  const bool full = fraction == 1.0;
  const std::int64_t floor = max_static(in);
  const std::int64_t target =
      floor + static_cast<std::int64_t>(fraction * static_cast<double>(ctx.limit - floor));
  if (target <= floor) return {};
  const std::size_t ops = 3 * static_cast<std::size_t>(in.stages()) * in.microbatches;
  std::optional<Candidate> kept;
  std::int64_t limit = target;
  for (int attempt = 0; attempt < 3 && limit > floor; ++attempt) {
    if (ctx.expired()) break;
    auto built = build_all(in, limit, full && !large, full && !large ? 3 : 1, ctx);
    if (built.empty()) break;
    for (std::size_t k = 0; k < built.size(); ++k) {
      const long long budget = static_cast<long long>((large  ? 0
                                                       : full ? 40
                                                              : 10) *
                                                      std::max<std::size_t>(ops, 20000));
      const double before = built[k].timing.makespan;
      built[k].timing = improve(in, built[k].orders, {limit, ctx.seed + k, budget, ctx.deadline});
      if (built[k].timing.makespan < before) built[k].how += ", improved";
    }
    std::stable_sort(built.begin(), built.end(), [](const Built& a, const Built& b) {
      return a.timing.makespan < b.timing.makespan;
    });
    const Built& win = built.front();
    const std::string what = full ? fmt::format("constructed ({}): {}", pl.label, win.how)
                                  : fmt::format("constructed ({}, {:.0f}% of the limit): {}",
                                                pl.label, fraction * 100, win.how);
    Candidate c = verify_orders(point, win.orders, what, ctx);
    c.family = "constructed";
    c.schedule = what;
    c.origin = win.how.find("improved") != std::string::npos ? "improved" : "constructed";
    c.placement = pl.label;
    const std::int64_t over = c.finished ? c.peak() - target : 0;
    const bool better = !kept || (c.finished && (!kept->finished || kept->peak() > target));
    if (better) kept = std::move(c);
    if (over <= 0 || !full) break;
    limit -= over;
  }
  std::vector<Candidate> out;
  if (kept) out.push_back(std::move(*kept));
  // Small instances: the exact model at the limit itself.
  if (full && !ctx.expired())
    if (auto e = exact(in, {target, 4000, ctx.deadline})) {
      if (e->cut_short) ctx.expired();  // (marks the result)
      const std::string how = fmt::format("exact model ({}): {}", pl.label, e->status);
      Candidate x = verify_orders(point, e->orders, how, ctx);
      x.family = "constructed";
      x.schedule = how;
      x.origin = "exact";
      x.placement = pl.label;
      x.bound = e->bound;
      x.optimal = e->optimal;
      out.push_back(std::move(x));
    }
  return out;
}

// Every construction on one placement; none where the placement does not fit the config.
std::vector<Candidate> construct(const Placement& pl, const Context& ctx) {
  std::vector<Candidate> out;
  if (ctx.expired()) return out;
  config::Config point;
  std::optional<config::Prepared> prepared;
  try {
    point = config::sweep(*ctx.base, {{pl.family}, {}, {pl.chunks}}).front();
    prepared = config::prepare(point, ctx.limits);
  } catch (const config::ConfigError&) {
    return out;  // e.g. the V's family needs I/W costs, or more microbatches
  } catch (const schedules::ParameterError&) {
    return out;
  }
  const Instance in = make_instance(*prepared, ctx.limit);
  if (in.split != pl.needs_split || !prepared->program->routes().is_linear()) return out;
  // Tighter limits trace the Pareto front; the full one gets the most work. Past kLargeOps
  // compute ops (where one simulation takes a good part of a second) the full limit only, with
  // the usual policies and no local search.
  const bool large = 3 * static_cast<std::size_t>(in.stages()) * in.microbatches > kLargeOps;
  for (double fraction : {1.0, 0.75, 0.5, 0.34}) {
    if ((large && fraction < 1.0) || ctx.expired()) break;
    for (auto& c : at_fraction(pl, point, in, fraction, large, ctx)) out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

std::vector<Task> constructed_tasks() {
  std::vector<Task> tasks;
  for (const Placement& pl : placements())
    tasks.push_back({fmt::format("constructed ({})", pl.label),
                     [pl](const Context& ctx) { return construct(pl, ctx); }});
  return tasks;
}

}  // namespace ppsim::search::detail
