#pragma once
// `ppsim search` (docs/SEARCH.md): the fastest schedule that finishes and fits a per-rank memory
// limit, among every registered schedule family with its parameters and the schedules the list
// scheduler constructs (then improved by local search), each verified in the simulator.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ppsim/config/config.hpp"
#include "ppsim/config/resources.hpp"

namespace ppsim::search {

inline constexpr int kMaxShards = 1'000'000;

struct Shard {
  int index = 0, count = 1;  // this process runs the tasks i with i mod count == index
};

struct SearchOptions {
  std::int64_t memory_limit = 0;  // per rank, bytes; 0: the config's hardware.memory_bytes
  double time_limit = 0;          // seconds for local search in all; 0: its op budget alone
  std::uint64_t seed = 1;
  unsigned jobs = 0;  // threads; 0: base::default_jobs()
  Shard shard;
  config::ResourceLimits limits;  // each candidate's
  // Called on the calling thread as tasks start: (task, tasks, what it is).
  std::function<void(std::size_t, std::size_t, const std::string&)> progress;
};

struct Candidate {
  std::string family;     // the generator, or "constructed"
  std::string schedule;   // what it is, e.g. "zbv V=2, async prefetch 2"
  std::string origin;     // "family", "constructed" or "improved"
  std::size_t task = 0;   // the search task that made it: its order in an unsharded run
  std::string placement;  // constructed ones: "1 chunk", "V", ...
  // The exact model's (origin "exact"): no schedule of this placement within the limit beats it.
  double bound = 0;
  bool optimal = false;
  std::string verdict;    // the run's verdict text, or why it did not run
  bool finished = false;  // ran to the end (no deadlock or hazard) under every model checked
  double makespan = 0, bubble_fraction = 0;
  std::vector<std::int64_t> peak_memory_bytes;  // per rank
  nlohmann::json config;  // a runnable config (the search's one); only for finished candidates
  std::vector<std::string> ops;  // lowered op lists, as `ppsim export` prints them

  std::int64_t peak() const;
};

struct SearchResult {
  std::string name, source, time_unit, semantics;
  int ranks = 0, microbatches = 0;
  std::int64_t memory_limit = 0;
  std::string limit_from;  // "--memory-limit" or "hardware.memory_bytes"
  Shard shard;
  std::vector<Candidate> candidates;
  std::optional<std::size_t> best;  // fastest finished candidate within the limit
  double lower_bound = 0;           // on the best's placement, any memory
  std::vector<std::size_t> pareto;  // finished candidates, makespan against peak memory

  bool within_limit(const Candidate& c) const { return c.finished && c.peak() <= memory_limit; }
  // Picks the best and the Pareto front from the candidates (after a merge too).
  void rank();
};

// Throws config::ConfigError for a config or limit it cannot search (exit 2).
SearchResult search(const config::Config& base, const SearchOptions& options);

// The best candidate of each family, families in the order their first candidate comes: within
// the limit first, then any that finished, then the first.
std::vector<std::size_t> best_per_family(const SearchResult& result);

// The JSON object `--json` prints (keys: best, families, pareto, candidates, ...); `ops` and the
// runnable config only for the best.
nlohmann::json to_json(const SearchResult& result);
// Reads one such object back (`ppsim merge`); throws config::ConfigError naming the key.
SearchResult from_json(const nlohmann::json& j, const std::string& source);
// Joins shards' results: same config and limit, candidates together, ranked again.
SearchResult merge(const std::vector<SearchResult>& parts);

}  // namespace ppsim::search
