// What a search hands on (docs/SEARCH.md): the winner written in each format runs to the
// candidate's makespan and peaks for every family (DualPipe's routes, a model's layers per
// stage), a format that cannot hold the best says why and offers the fastest it can; shards of
// different inputs refuse to merge, naming the shard's file; the limit is at most the GPU's
// memory; a deadline is checked by every phase.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "ppsim/config/error.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/search/exact.hpp"
#include "ppsim/search/greedy.hpp"
#include "ppsim/search/improve.hpp"
#include "ppsim/search/search.hpp"
#include "ppsim/sim/analysis.hpp"

using namespace ppsim;
using nlohmann::json;

namespace {

json small_zb(int P, int M) {
  return {
      {"name", "zb"},
      {"schedule", {{"kind", "zb-h1"}, {"ranks", P}, {"microbatches", M}}},
      {"costs", {{"forward", 18.5}, {"backward_input", 18.1}, {"backward_weight", 9.3}}},
      {"comm", {{"latency", 0.6}}},
      {"memory", {{"activation_bytes", 34 * 64 + 5 * 8 * 32}, {"weight_stash_bytes", 32 * 64}}}};
}

// A transformer with uneven stages on a GPU: costs derived along each route, as for
// configs/models/gpt-1.5b-zb.json.
json small_model(int P, int M) {
  std::vector<int> layers(static_cast<std::size_t>(P), 1);
  layers.back() = 2;
  return {{"name", "model"},
          {"schedule", {{"kind", "zb-h1"}, {"ranks", P}, {"microbatches", M}}},
          {"model",
           {{"layers", P + 1},
            {"hidden", 256},
            {"heads", 4},
            {"vocab", 1024},
            {"sequence_length", 128},
            {"micro_batch_size", 1},
            {"dtype", "bf16"},
            {"layers_per_stage", layers}}},
          {"hardware", {{"gpu", "a100-80gb"}}}};
}

std::vector<std::int64_t> peaks_of(const record::RunRecord& run) {
  std::vector<std::int64_t> out;
  for (const auto& r : run.metrics->per_rank) out.push_back(r.peak_memory_bytes);
  return out;
}

// Runs the written config as `ppsim run` would, from its own file.
void require_reproduces(const json& written, const search::Candidate& c) {
  const auto run = sim::analyze(config::parse_config(written, "/elsewhere/w.json"));
  REQUIRE(run.metrics);
  REQUIRE(run.verdict().text() == c.verdict);
  REQUIRE(run.metrics->makespan == c.makespan);
  REQUIRE(peaks_of(run) == c.peak_memory_bytes);
}

}  // namespace

// Every finished candidate written as a config runs to its makespan and peaks
TEST_CASE("search_outputs.written_configs_reproduce_candidates", "[search]") {
  for (const json& base : {small_zb(4, 8), small_model(2, 4)}) {
    const config::Config cfg = config::parse_config(base, "configs/c.json");
    search::SearchOptions o;
    o.memory_limit = base.contains("hardware") ? 0 : 6 * (34 * 64 + 5 * 8 * 32);
    const auto r = search::search(cfg, o);
    int families = 0, routed = 0;
    for (const auto& c : r.candidates) {
      if (!c.finished) continue;
      CAPTURE(base["name"], c.schedule);
      const json w = search::winner_config(r, c, {});
      require_reproduces(w, c);
      if (c.family == "constructed") continue;
      // A family as its lowered op lists; DualPipe's two directions as routes.
      REQUIRE(w["schedule"]["kind"] == "custom");
      ++families;
      if (c.family == "dualpipe") {
        REQUIRE(w["schedule"].contains("routes"));
        ++routed;
      }
    }
    REQUIRE(families > 10);
    REQUIRE(routed > 0);
  }
}

// A PyTorch CSV winner: the fastest candidate a CSV holds, and it runs as found
TEST_CASE("search_outputs.torch_csv_winner_expressible", "[search]") {
  json base = small_zb(4, 8);
  base["comm"]["semantics"] = "nccl";
  base["comm"]["style"] = "torch";
  search::SearchOptions o;
  o.memory_limit = 8 * (34 * 64 + 5 * 8 * 32);
  o.format = search::Format::torch_csv;
  const auto r = search::search(config::parse_config(base, "t.json"), o);
  REQUIRE(r.written);
  int refused = 0;
  for (std::size_t i = 0; i < r.candidates.size(); ++i) {
    const auto& c = r.candidates[i];
    if (!c.finished) continue;
    CAPTURE(c.schedule);
    if (c.family == "dualpipe") REQUIRE_FALSE(c.expressible());  // two routes
    if (!c.expressible()) {
      ++refused;
      REQUIRE_THROWS_AS(search::winner_csv(c, {}), config::ConfigError);
      continue;
    }
    // The CSV read back as PyTorch's lowering reads it, with the candidate's costs and memory.
    const std::string csv = search::winner_csv(c, {});
    json back = c.config;
    back["comm"].erase("style");
    json rows = json::array();
    std::string row;
    for (char ch : csv)
      if (ch == '\n') {
        rows.push_back(row);
        row.clear();
      } else if (ch != '\r') {
        row += ch;
      }
    back["schedule"] = {{"kind", "torch-csv"}, {"rows", rows}};
    const auto run = sim::analyze(config::parse_config(back, "w.csv"));
    REQUIRE(run.metrics);
    REQUIRE(run.metrics->makespan == c.makespan);
    if (r.within_limit(c)) REQUIRE(r.candidates[*r.written].makespan <= c.makespan);
  }
  REQUIRE(refused > 0);
  REQUIRE(r.candidates[*r.written].expressible());
  // Through JSON (`search --mpi`, `merge`): the written one keeps its config.
  const auto back = search::from_json(search::to_json(r), "t-search.json");
  REQUIRE(back.written == r.written);
  REQUIRE(back.candidates[*back.written].config == r.candidates[*r.written].config);
}

// Shards of different inputs do not merge, and merge errors name the shard's file
TEST_CASE("search_outputs.shards_of_different_inputs_refused", "[search]") {
  const std::int64_t limit = 4 * (34 * 64 + 5 * 8 * 32);
  auto shard = [&](const json& base, int i, std::uint64_t seed, const std::string& file) {
    search::SearchOptions o;
    o.memory_limit = limit;
    o.seed = seed;
    o.shard = {i, 2};
    return search::from_json(
        search::to_json(search::search(config::parse_config(base, "c.json"), o)), file);
  };
  const json base = small_zb(3, 4);
  json other = base;
  other["costs"]["forward"] = 5;
  const auto a0 = shard(base, 0, 1, "a0.json"), a1 = shard(base, 1, 1, "a1.json");
  REQUIRE(a0.digest == a1.digest);
  REQUIRE_NOTHROW(search::merge({a0, a1}));
  for (const auto& b1 : {shard(other, 1, 1, "b1.json"), shard(base, 1, 2, "b1.json")}) {
    REQUIRE(b1.digest != a0.digest);
    try {
      search::merge({a0, b1});
      FAIL("merged shards of different inputs");
    } catch (const config::ConfigError& e) {
      REQUIRE(e.source() == "b1.json");
      REQUIRE(e.key() == "digest");
    }
  }
  try {
    search::merge({a1});
    FAIL("merged with a shard missing");
  } catch (const config::ConfigError& e) {
    REQUIRE(e.source() == "a1.json");  // the file, not the shards' config (c.json)
  }
}

// A search's memory limit is at most the GPU's memory
TEST_CASE("search_outputs.memory_limit_at_most_gpu_memory", "[search]") {
  const config::Config cfg = config::parse_config(small_model(2, 4), "m.json");
  search::SearchOptions o;
  o.memory_limit = 81'000'000'000;  // an A100 80GB has 80e9 bytes
  try {
    search::search(cfg, o);
    FAIL("searched above the GPU's memory");
  } catch (const config::ConfigError& e) {
    REQUIRE(e.key() == "hardware.memory_bytes");
    REQUIRE_THAT(e.message(), Catch::Contains("--memory-limit"));
  }
  o.memory_limit = 80'000'000'000;
  REQUIRE(search::search(cfg, o).memory_limit == 80'000'000'000);
}

// A deadline already past stops every phase at once, the result cut short
TEST_CASE("search_outputs.past_deadline_stops_every_phase", "[search]") {
  json base = small_zb(2, 4);
  const config::Config cfg = config::parse_config(base, "d.json");
  search::SearchOptions o;
  o.memory_limit = 4 * (34 * 64 + 5 * 8 * 32);
  o.deadline = 1.0;  // long before now on the steady clock
  const auto r = search::search(cfg, o);
  REQUIRE(r.cut_short);
  REQUIRE_FALSE(r.best);
  for (const auto& c : r.candidates) {
    CAPTURE(c.schedule);
    REQUIRE_FALSE(c.finished);
    REQUIRE(c.verdict == "not run: --time-limit reached");
  }
  REQUIRE(search::to_json(r)["cut_short"] == true);
  // Without one: nothing is cut.
  o.deadline = 0;
  const auto whole = search::search(cfg, o);
  REQUIRE_FALSE(whole.cut_short);
  REQUIRE(whole.best);
  // The exact model (GLPK) and local search, each on its own.
  const config::Prepared p = config::prepare(cfg);
  const search::Instance in = search::make_instance(p, 0);
  REQUIRE(search::exact(in, {0, 4000, 0.0}));
  REQUIRE_FALSE(search::exact(in, {0, 4000, 1.0}));
  // Local search: a past deadline leaves the orders as they were, whatever the budget.
  search::Orders orders = search::exact(in, {0, 4000, 0.0})->orders;
  const search::Orders before = orders;
  search::improve(in, orders, {0, 1, 1LL << 40, 1.0});
  REQUIRE(orders == before);
}
