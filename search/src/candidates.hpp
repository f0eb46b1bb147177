#pragma once
// The tasks of a search: one per family variant (a config the simulator runs) and one per
// placement the list scheduler builds on. Internal to search.cpp.
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
  double deadline = 0;  // steady-clock seconds for local search; 0 = none
  config::ResourceLimits limits;
};

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

// Runs `config` in the simulator (under mpi too when it asks for nccl) and fills a candidate.
Candidate verify(const nlohmann::json& config, const std::string& source, const Context& ctx);

}  // namespace ppsim::search::detail
