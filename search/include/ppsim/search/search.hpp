#pragma once
// `ppsim search` (docs/SEARCH.md): the fastest schedule that finishes and fits a per-rank memory
// limit, among every registered schedule family with its parameters and the schedules the list
// scheduler constructs (then improved by local search), each verified in the simulator.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ppsim/config/config.hpp"
#include "ppsim/config/resources.hpp"

namespace ppsim::search {

inline constexpr int kMaxShards = 1'000'000;

struct Shard {
  int index = 0, count = 1;  // this process runs the tasks i with i mod count == index
};

// What the winner is written as (`-o FILE --format`): a config `ppsim run` takes, or a PyTorch
// pipelining CSV of the compute order.
enum class Format { config, torch_csv };

struct SearchOptions {
  // Per rank, bytes; 0: the config's hardware.memory_bytes (a larger one is refused).
  std::int64_t memory_limit = 0;
  // Seconds for the whole search; 0: none. Every phase checks it (tasks, policies, local search,
  // the exact model, verification): what was not done by then is skipped, the result cut short.
  double time_limit = 0;
  double deadline = 0;  // steady_seconds() to stop at, instead of time_limit; 0 = none
  Format format = Format::config;
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
  // The search's format cannot hold it (a DualPipe's two routes in a PyTorch CSV): why.
  std::string inexpressible;
  double busiest = 0;  // the busiest rank's compute (a bound for DualPipe); not in the JSON

  std::int64_t peak() const;
  bool expressible() const { return inexpressible.empty(); }
};

struct SearchResult {
  std::string name, source, time_unit, semantics;
  int ranks = 0, microbatches = 0;
  std::int64_t memory_limit = 0;
  std::string limit_from;  // "--memory-limit" or "hardware.memory_bytes"
  // Of the whole resolved input (config after --set, derived costs and memory, limit, seed, time
  // limit, format): shards of one search carry the same one.
  std::string digest;
  bool cut_short = false;  // the time limit stopped some phase
  Shard shard;
  std::vector<Candidate> candidates;
  std::optional<std::size_t> best;  // fastest finished candidate within the limit
  double lower_bound = 0;           // on the best's placement, any memory
  std::vector<std::size_t> pareto;  // finished candidates, makespan against peak memory
  // The fastest within the limit that the format can hold: what `-o` writes (best when it can).
  std::optional<std::size_t> written;
  std::string read_from;  // the file from_json read it from (merge's errors name it)

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
// Joins shards' results: same digest and shard count, candidates together, ranked again. Errors
// name the shard's file (read_from).
SearchResult merge(const std::vector<SearchResult>& parts);

// The config `-o` writes for a finished candidate, one `ppsim run` runs to its makespan and peaks
// (checked by simulating it): a family's lowered op lists with their routes, else the config it
// was verified as. Throws config::ConfigError when no form reproduces it.
nlohmann::json winner_config(const SearchResult& result, const Candidate& candidate,
                             const config::ResourceLimits& limits);
// A finished candidate's compute order as a PyTorch CSV (`--format torch-csv`); throws
// config::ConfigError when the CSV cannot hold it (Candidate::inexpressible says why).
std::string winner_csv(const Candidate& candidate, const config::ResourceLimits& limits);

// A hex digest of bytes (FNV-1a, 64 bits): equal inputs, equal digests.
std::string digest_of(std::string_view bytes);
// The digest `compare --shard` shards carry: every point's config (after --set) in order, and
// --max-memory.
std::string inputs_digest(const std::vector<config::Config>& points, std::uint64_t max_memory);

}  // namespace ppsim::search
