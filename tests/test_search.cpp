// Schedule search (docs/SEARCH.md): the list scheduler's invariants (memory never above the
// limit, every op once, dependencies kept: the simulator runs what it builds), the lower bound and
// the search against the exhaustive optimum of tiny instances, the Pareto front's dominance, shards
// merged = one run, and the winner through a PyTorch CSV and back.
#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "ppsim/config/prepare.hpp"
#include "ppsim/schedules/torch_csv.hpp"
#include "ppsim/search/bounds.hpp"
#include "ppsim/search/exact.hpp"
#include "ppsim/search/greedy.hpp"
#include "ppsim/search/pareto.hpp"
#include "ppsim/search/search.hpp"
#include "ppsim/search/timing.hpp"
#include "ppsim/sim/analysis.hpp"

using namespace ppsim;
using nlohmann::json;
using schedules::Op;
using schedules::OpKind;

namespace {

// The zero-bubble paper's memory model: F takes 34h + 5as, W keeps 32h of it from I (h, a, s of
// its 1.5B setting scaled down).
json zb_config(int P, int M, const std::string& kind = "zb-h1") {
  return {
      {"name", "zb"},
      {"schedule", {{"kind", kind}, {"ranks", P}, {"microbatches", M}}},
      {"costs", {{"forward", 18.5}, {"backward_input", 18.1}, {"backward_weight", 9.3}}},
      {"comm", {{"latency", 0.6}}},
      {"memory", {{"activation_bytes", 34 * 64 + 5 * 8 * 32}, {"weight_stash_bytes", 32 * 64}}}};
}

search::Instance instance_of(const json& j) {
  const config::Prepared p = config::prepare(config::parse_config(j, "search.json"));
  return search::make_instance(p, 0);
}

std::vector<search::Policy> all_policies() {
  std::vector<search::Policy> out;
  for (int extra : {-1, 0, 2})
    for (bool ff : {false, true})
      for (double fill : {0.0, 1.0, 2.0}) out.push_back({extra, ff, fill, -1, true});
  out.push_back({-1, false, 0.0, 2, false});
  return out;
}

// Every (kind, stage, microbatch) of the instance exactly once, on the stage's rank.
void require_complete_set(const search::Instance& in, const search::Orders& orders) {
  std::multiset<std::tuple<int, int, int>> seen;
  for (int r = 0; r < in.ranks; ++r)
    for (const Op& op : orders[static_cast<std::size_t>(r)]) {
      REQUIRE(in.rank_of(op.stage) == r);
      seen.insert({static_cast<int>(op.kind), op.stage, op.microbatch});
    }
  for (int s = 0; s < in.stages(); ++s)
    for (int m = 0; m < in.microbatches; ++m)
      for (OpKind k : {OpKind::F, OpKind::I, OpKind::W})
        REQUIRE(seen.count({static_cast<int>(k), s, m}) == 1);
  REQUIRE(seen.size() == 3 * static_cast<std::size_t>(in.stages()) * in.microbatches);
}

json custom_of(const json& base, const search::Orders& orders) {
  json j = base;
  json ops = json::array();
  for (const auto& list : orders) {
    std::string line;
    for (const Op& op : list) line += (line.empty() ? "" : ",") + schedules::op_text(op);
    ops.push_back(line);
  }
  j["schedule"] = {{"kind", "custom"}, {"ops", ops}};
  return j;
}

}  // namespace

TEST_CASE("greedy schedules stay within the limit and run in the simulator", "[search]") {
  for (const std::string kind : {"zb-h1", "zbv"})
    for (int P : {2, 3, 4})
      for (int M : {1, 3, 8}) {
        const json base = zb_config(P, M, kind);
        const search::Instance in = instance_of(base);
        const std::int64_t act = in.memory[0].activation_bytes;
        // From a third of 1F1B's activations on rank 0 (P microbatches of a whole stage) to twice.
        for (double k : {0.34, 0.5, 1.0, 2.0}) {
          const auto limit = static_cast<std::int64_t>(k * P * act * (kind == "zbv" ? 2 : 1));
          int built = 0;
          for (const auto& policy : all_policies()) {
            CAPTURE(kind, P, M, k, policy.describe());
            const auto orders = search::greedy(in, policy, limit);
            if (!orders) continue;
            ++built;
            require_complete_set(in, *orders);
            const search::Timing t = search::evaluate(in, *orders);
            REQUIRE(t.complete);
            REQUIRE(t.max_peak() <= limit);
            // The simulator runs it to the end with the same peak (no comm buffers here) and,
            // receives posted at the start, the same makespan.
            json j = custom_of(base, *orders);
            j["comm"]["style"] = "async";
            j["comm"]["prefetch"] = "all";
            const auto run = sim::analyze(config::parse_config(j, "greedy.json"));
            REQUIRE(run.ok());
            REQUIRE(run.metrics->peak_memory_bytes == t.max_peak());
            if (run.metrics->makespan != Approx(t.makespan).epsilon(1e-12)) {
              std::FILE* f = std::fopen("/tmp/zb/bad.json", "w");
              std::fputs(j.dump().c_str(), f);
              std::fclose(f);
            }
            REQUIRE(run.metrics->makespan == Approx(t.makespan).epsilon(1e-12));
            REQUIRE(run.metrics->makespan >= search::lower_bound(in) - 1e-9);
          }
          // Under 1F1B's memory the V layout still builds (each chunk holds half a stage).
          if (kind == "zbv" && k >= 0.5 && M >= 1) REQUIRE(built > 0);
          if (k >= 1.0) REQUIRE(built > 0);
        }
      }
}

TEST_CASE("V schedules at a half and a third of 1F1B's memory", "[search]") {
  // The zero-bubble V paper's memory levels (V-Half, V-Min), where the published greedy V
  // scheduler (get_v_schedule) finds nothing: its warm-up has no memory check.
  for (int P : {4, 8})
    for (int M : {8, 24}) {
      const json base = zb_config(P, M, "zbv");
      const search::Instance in = instance_of(base);
      // 1F1B on rank 0 holds P microbatches of a whole stage: two V chunks' stashes each.
      const std::int64_t one_f1b = 2 * P * in.memory[0].activation_bytes;
      for (int divisor : {2, 3}) {
        const std::int64_t limit = one_f1b / divisor;
        CAPTURE(P, M, divisor);
        std::optional<search::Orders> best;
        double makespan = 0;
        for (const auto& policy : all_policies())
          if (auto o = search::greedy(in, policy, limit)) {
            const auto t = search::evaluate(in, *o);
            if (!best || t.makespan < makespan) {
              best = std::move(o);
              makespan = t.makespan;
            }
          }
        REQUIRE(best);
        json j = custom_of(base, *best);
        j["comm"]["style"] = "async";
        j["comm"]["prefetch"] = "all";
        const auto run = sim::analyze(config::parse_config(j, "v.json"));
        REQUIRE(run.ok());
        REQUIRE(run.metrics->peak_memory_bytes <= limit);
      }
    }
}

TEST_CASE("greedy schedules when a hop takes longer than the ops", "[search]") {
  // A rank whose next backward waits only for its own previous gradient's send must be woken
  // when that send is done: nothing else will wake it.
  for (bool split : {false, true})
    for (int P : {2, 3}) {
      json base = zb_config(P, 4, split ? "zb-h1" : "1f1b");
      base["costs"] = split ? json{{"forward", 1}, {"backward_input", 1}, {"backward_weight", 1}}
                            : json{{"forward", 1}, {"backward", 2}};
      base["comm"]["latency"] = 3;
      const search::Instance in = instance_of(base);
      for (const auto& policy : all_policies()) {
        CAPTURE(split, P, policy.describe());
        const auto orders = search::greedy(in, policy, 0);
        REQUIRE(orders);
        const search::Timing t = search::evaluate(in, *orders);
        REQUIRE(t.complete);
        json j = custom_of(base, *orders);
        j["comm"]["style"] = "async";
        j["comm"]["prefetch"] = "all";
        const auto run = sim::analyze(config::parse_config(j, "hops.json"));
        REQUIRE(run.ok());
        REQUIRE(run.metrics->makespan == Approx(t.makespan).epsilon(1e-12));
      }
    }
}

TEST_CASE("a limit below one microbatch's stashes builds nothing", "[search]") {
  const search::Instance in = instance_of(zb_config(4, 8));
  for (const auto& policy : all_policies())
    REQUIRE_FALSE(search::greedy(in, policy, in.memory[0].activation_bytes - 1));
}

namespace {

// The exhaustive optimum of a tiny instance under the timing model: every per-rank order that
// keeps F, I and W each in microbatch order (as pipelines run them) and I after F, W after I.
double brute_force(const search::Instance& in, std::int64_t limit) {
  std::vector<std::vector<std::vector<Op>>> per_rank(static_cast<std::size_t>(in.ranks));
  for (int r = 0; r < in.ranks; ++r) {
    std::vector<int> stages;
    for (int s = 0; s < in.stages(); ++s)
      if (in.rank_of(s) == r) stages.push_back(s);
    std::vector<Op> cur;
    std::map<std::pair<int, int>, int> next;  // (kind, stage) -> next microbatch
    const std::size_t total = 3 * stages.size() * static_cast<std::size_t>(in.microbatches);
    std::function<void()> dfs = [&] {
      if (cur.size() == total) {
        per_rank[static_cast<std::size_t>(r)].push_back(cur);
        return;
      }
      for (int s : stages)
        for (OpKind k : {OpKind::F, OpKind::I, OpKind::W}) {
          const int ki = static_cast<int>(k);
          const int m = next[{ki, s}];
          if (m >= in.microbatches) continue;
          if (k == OpKind::I && next[{static_cast<int>(OpKind::F), s}] <= m) continue;
          if (k == OpKind::W && next[{static_cast<int>(OpKind::I), s}] <= m) continue;
          cur.push_back(Op::compute(k, s, m));
          ++next[{ki, s}];
          dfs();
          --next[{ki, s}];
          cur.pop_back();
        }
    };
    dfs();
  }
  double best = std::numeric_limits<double>::infinity();
  search::Orders orders(static_cast<std::size_t>(in.ranks));
  std::function<void(std::size_t)> pick = [&](std::size_t r) {
    if (r == per_rank.size()) {
      const search::Timing t = search::evaluate(in, orders);
      if (t.complete && t.fits(limit)) best = std::min(best, t.makespan);
      return;
    }
    for (const auto& o : per_rank[r]) {
      orders[r] = o;
      pick(r + 1);
    }
  };
  pick(0);
  return best;
}

}  // namespace

TEST_CASE("search is within 1% of the exhaustive optimum on tiny instances", "[search]") {
  for (auto [P, M] : {std::pair{2, 2}, std::pair{2, 3}, std::pair{3, 2}}) {
    json base = zb_config(P, M);
    base["comm"]["latency"] = 0;  // the timing model and the simulator agree exactly
    const search::Instance in = instance_of(base);
    const std::int64_t act = in.memory[0].activation_bytes;
    for (double k : {1.0, 2.0}) {
      const auto limit = static_cast<std::int64_t>(k * P * act);
      CAPTURE(P, M, k);
      const double optimum = brute_force(in, limit);
      REQUIRE(optimum >= search::lower_bound(in) - 1e-9);
      search::SearchOptions o;
      o.memory_limit = limit;
      o.jobs = 1;
      const auto r = search::search(config::parse_config(base, "tiny.json"), o);
      REQUIRE(r.best);
      const auto& best = r.candidates[*r.best];
      REQUIRE(best.peak() <= limit);
      REQUIRE(best.makespan <= optimum * 1.01);
      REQUIRE(r.lower_bound <= best.makespan + 1e-9);
    }
  }
}

TEST_CASE("the exact model finds the exhaustive optimum of tiny instances", "[search]") {
  for (auto [P, M] : {std::pair{2, 2}, std::pair{2, 3}, std::pair{3, 2}})
    for (double latency : {0.0, 0.6})
      for (double k : {1.0, 1.5, 2.0}) {
        json base = zb_config(P, M);
        base["comm"]["latency"] = latency;
        const search::Instance in = instance_of(base);
        const auto limit = static_cast<std::int64_t>(k * P * in.memory[0].activation_bytes);
        CAPTURE(P, M, latency, k);
        const double optimum = brute_force(in, limit);
        const auto e = search::exact(in, {limit, 100000});
        REQUIRE(e);
        REQUIRE(e->optimal);
        REQUIRE(e->makespan == Approx(optimum).epsilon(1e-9));
        REQUIRE(e->bound == Approx(optimum).epsilon(1e-9));
        const search::Timing t = search::evaluate(in, e->orders);
        REQUIRE(t.complete);
        REQUIRE(t.max_peak() <= limit);
        REQUIRE(t.makespan == Approx(optimum).epsilon(1e-9));
      }
  // Too large for the model: none.
  REQUIRE_FALSE(search::exact(instance_of(zb_config(4, 8)), {}));
}

TEST_CASE("the Pareto front holds exactly the points nothing dominates", "[search]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> mem(1, 20);
  std::uniform_int_distribution<int> time(1, 20);
  for (int round = 0; round < 50; ++round) {
    std::vector<search::Point> pts;
    for (int i = 0; i < 30; ++i) pts.push_back({mem(rng), static_cast<double>(time(rng))});
    const auto front = search::pareto_front(pts);
    auto dominates = [](const search::Point& a, const search::Point& b) {
      return a.memory <= b.memory && a.makespan <= b.makespan &&
             (a.memory < b.memory || a.makespan < b.makespan);
    };
    for (std::size_t i = 0; i < pts.size(); ++i) {
      const bool on = std::find(front.begin(), front.end(), i) != front.end();
      bool dominated = false, equal_earlier = false;
      for (std::size_t j = 0; j < pts.size(); ++j) {
        dominated = dominated || dominates(pts[j], pts[i]);
        equal_earlier = equal_earlier || (j < i && pts[j].memory == pts[i].memory &&
                                          pts[j].makespan == pts[i].makespan);
      }
      REQUIRE(on == (!dominated && !equal_earlier));
    }
    for (std::size_t k = 1; k < front.size(); ++k) {
      REQUIRE(pts[front[k]].memory > pts[front[k - 1]].memory);
      REQUIRE(pts[front[k]].makespan < pts[front[k - 1]].makespan);
    }
  }
}

TEST_CASE("shards merged give the table of one run", "[search]") {
  const json base = zb_config(4, 8);
  const config::Config cfg = config::parse_config(base, "shards.json");
  search::SearchOptions o;
  o.memory_limit = 4 * (34 * 64 + 5 * 8 * 32);
  o.jobs = 2;
  json whole = search::to_json(search::search(cfg, o));
  std::vector<search::SearchResult> parts;
  for (int i : {2, 0, 1}) {
    o.shard = {i, 3};
    // Through JSON, as `ppsim merge` reads the shards' files.
    parts.push_back(search::from_json(search::to_json(search::search(cfg, o)), "part.json"));
  }
  json merged = search::to_json(search::merge(parts));
  REQUIRE(merged == whole);
  parts.pop_back();
  REQUIRE_THROWS_WITH(search::merge(parts), Catch::Contains("shard 1 of 3 is missing"));
}

TEST_CASE("the winner through a PyTorch CSV simulates to the same makespan, and NCCL runs it",
          "[search]") {
  for (const char* style : {"", "torch"}) {
    CAPTURE(style);
    json base = zb_config(4, 12);
    base["comm"]["semantics"] = "nccl";
    if (*style) base["comm"]["style"] = style;
    const config::Config cfg = config::parse_config(base, "nccl.json");
    search::SearchOptions o;
    o.memory_limit = 6 * (34 * 64 + 5 * 8 * 32);
    const auto r = search::search(cfg, o);
    REQUIRE(r.best);
    const auto& best = r.candidates[*r.best];
    REQUIRE(best.peak() <= o.memory_limit);
    const config::Config winner = config::parse_config(best.config, "winner.json");
    const auto run = sim::analyze(winner);
    REQUIRE(run.ok());  // under nccl, as the config asks
    REQUIRE(run.metrics->makespan == best.makespan);
    if (!*style) continue;
    // Under PyTorch's runtime (`search --format torch-csv`): the compute order as a CSV, read back
    // as PyTorch reads it, runs to the same makespan.
    const config::Prepared p = config::prepare(winner);
    const std::string csv =
        schedules::write_torch_csv(*p.program, schedules::TorchCsvForm::compute_only);
    // The CSV holds the order; costs and memory are the winner's (per chunk when it has more).
    json back = best.config;
    back["comm"].erase("style");
    back["schedule"] = {{"kind", "torch-csv"}, {"rows", json::array()}};
    std::string row;
    for (char c : csv) {
      if (c == '\r') continue;
      if (c == '\n') {
        back["schedule"]["rows"].push_back(row);
        row.clear();
      } else {
        row += c;
      }
    }
    const auto again = sim::analyze(config::parse_config(back, "winner.csv"));
    REQUIRE(again.ok());
    REQUIRE(again.metrics->makespan == best.makespan);
  }
}
