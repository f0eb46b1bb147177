#pragma once
// The tasks of a search: one per family variant (a config the simulator runs) and one per
// placement the list scheduler builds on. Internal to search.cpp.
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "ppsim/search/instance.hpp"
#include "ppsim/search/search.hpp"

namespace ppsim::search::detail {

struct Context {
  const config::Config* base = nullptr;
  std::int64_t limit = 0;  // per rank, bytes
  std::uint64_t seed = 1;
  double deadline = 0;  // steady_seconds() at which every phase stops; 0 = none
  config::ResourceLimits limits;
  Format format = Format::config;
  std::atomic<bool>* cut_short = nullptr;  // set by expired() when it says yes
  // The deadline has passed: a phase that checks it skips the rest (and the result is cut short).
  bool expired() const;
};

// What a candidate skipped for the time limit reads as.
inline constexpr const char* kTimeLimitVerdict = "not run: --time-limit reached";

struct Task {
  std::string label;
  std::function<std::vector<Candidate>(const Context&)> run;
};

// Every registered schedule family with its chunk counts, group sizes and comm variants.
std::vector<Task> family_tasks(const config::Config& base);
// The list scheduler on each placement it knows (one chunk, the V, two looped chunks).
std::vector<Task> constructed_tasks();

// A comm style a candidate is lowered with: "" keeps the config's (or the family's default).
struct CommVariant {
  std::string style;
  int prefetch = 0;  // async only; 0 = the style's default, -1 = "all"
  std::string label() const;
  void apply(nlohmann::json& config) const;
};
// With no comm.style in the config: async with receives posted 1, 2 and 4 ops ahead and, under
// nccl (where posting receives early can hold sends), PyTorch's, Megatron's pairs and blocking;
// `family`: the family's own default first, else (constructed orders) also receives posted at
// the start. With a comm.style: that one alone.
std::vector<CommVariant> comm_variants(const config::Config& base, bool family);

// A custom config running `orders` (compute only, lowered by the config's comm style) on the
// placement, costs and memory of `point`.
nlohmann::json custom_orders_config(const config::Config& point, const Orders& orders,
                                    const std::string& name);

// Runs `config` in the simulator (under mpi too when it asks for nccl) and fills a candidate;
// under Format::torch_csv also reads its CSV back and says when that runs otherwise.
Candidate verify(const nlohmann::json& config, const std::string& source, const Context& ctx);

// winner.cpp: "" when `form` runs to the candidate's verdict, makespan and peaks, else how not.
std::string reproduces(const nlohmann::json& form, const Candidate& c,
                       const config::ResourceLimits& limits);
// The compute order of `config`'s program as a CSV, and a config that runs that CSV with the
// same costs, memory and comm (ConfigError: two routes, or a rank with no op).
std::string csv_of(const nlohmann::json& config, const config::ResourceLimits& limits);
nlohmann::json csv_config(const nlohmann::json& config, const std::string& csv);
// Sets c.inexpressible when the CSV does not reproduce the candidate.
void check_csv(Candidate& c, const config::ResourceLimits& limits);

}  // namespace ppsim::search::detail
