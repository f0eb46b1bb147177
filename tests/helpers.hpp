#pragma once
// Small builders and checks shared by the tests.
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "paths.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/record/observer.hpp"
#include "ppsim/schedules/generator.hpp"
#include "ppsim/schedules/lowering.hpp"
#include "ppsim/schedules/semantics.hpp"
#include "ppsim/schedules/validation.hpp"
#include "ppsim/sim/simulator.hpp"

namespace ppsim::test {

// Calls `check` with each bundled config, prepared, its path given as the context of a failure;
// returns how many there were.
template <typename F>
int for_each_bundled_config(F&& check) {
  int n = 0;
  for (const auto& path : bundled_configs()) {
    INFO(path);
    check(config::prepare(config::load_config(path)));
    ++n;
  }
  return n;
}

// Every comm style, and the async one at several prefetch depths.
inline const std::vector<schedules::LoweringOptions>& all_lowerings() {
  static const std::vector<schedules::LoweringOptions> all = [] {
    std::vector<schedules::LoweringOptions> out;
    for (const auto& style : schedules::LoweringRegistry::instance().all()) {
      // torch reproduces PyTorch's runtime, whose sends are waited only at the end: every program
      // it makes has buffer_released_before_wait by design. tests/test_torch_csv.cpp covers it.
      if (style.name == "torch") continue;
      if (schedules::find_param(style.params, "prefetch")) {
        for (std::int64_t prefetch : {0, 1, 2, -1})  // -1: "all"
          out.push_back({style.name, {{"prefetch", prefetch}}});
      } else {
        out.push_back({style.name, {}});
      }
    }
    return out;
  }();
  return all;
}

// Whether `l`'s style lowers `compute`: a style that models particular schedules (megatron)
// refuses the others, and lower() would throw.
inline bool accepts(const schedules::LoweringOptions& l, const schedules::Program& compute) {
  const auto* style = schedules::LoweringRegistry::instance().find(l.style);
  return style &&
         (!style->refuses ||
          !style->refuses(compute, schedules::resolve(style->params, l.params, style->name)));
}

inline std::string describe(const schedules::LoweringOptions& l) {
  std::string s = l.style;
  for (const auto& [k, v] : l.params.values()) s += " " + k + "=" + std::to_string(v);
  return s;
}

// One rank's ops as text: "0F0,0SEND_F0,...".
inline std::string rank_line(const schedules::Program& p, int rank) {
  std::string s;
  for (const auto& op : p.ops(rank)) {
    if (!s.empty()) s += ',';
    s += p.op_text(rank, op);
  }
  return s;
}

// Rank r's ops as text (rank_line) are `lines[r]`, for each rank r that `lines` lists.
inline void check_rank_lines(const schedules::Program& p, const std::map<int, std::string>& lines) {
  for (const auto& [r, line] : lines) {
    INFO("rank " << r);
    CHECK(rank_line(p, r) == line);
  }
}

// The same for ranks 0 to lines.size() - 1.
inline void check_rank_lines(const schedules::Program& p, const std::vector<std::string>& lines) {
  for (std::size_t r = 0; r < lines.size(); ++r) {
    INFO("rank " << r);
    CHECK(rank_line(p, static_cast<int>(r)) == lines[r]);
  }
}

inline schedules::Program lowered(const std::string& kind, int P, int M, int V = 1,
                                  std::string_view style = "async", int prefetch = 1) {
  schedules::ScheduleParams params{{"ranks", P}, {"microbatches", M}};
  if (V != 1) params.set("chunks", V);
  schedules::LoweringOptions lowering{std::string(style), {}};
  if (style == "async") lowering.params.set("prefetch", prefetch);
  return schedules::lower(schedules::generate(kind, params), lowering);
}

// Validation and simulation together, as `ppsim run` does: every hazard in one list.
inline sim::SimResult run(const schedules::Program& p, const sim::SimOptions& o) {
  sim::SimResult r = sim::simulate(p, o);
  auto diagnostics = schedules::validate(p);
  diagnostics.insert(diagnostics.end(), r.errors.begin(), r.errors.end());
  r.errors = std::move(diagnostics);
  return r;
}

// The cycle of a run that deadlocked in one cycle of two blocked ops.
inline const std::vector<record::BlockedOp>& two_rank_cycle(const sim::SimResult& r) {
  REQUIRE(r.deadlock);
  REQUIRE(r.deadlock->cycles.size() == 1);
  const auto& c = r.deadlock->cycles[0];
  REQUIRE(c.size() == 2);
  return c;
}

// Each transfer of `p`'s run in `trace` carries the tensor its send names to the receive that
// names it; `check(transfer, send)` checks the rest, the two ops as context.
template <typename F>
void for_each_transfer(const schedules::Program& p, const record::Trace& trace, F&& check) {
  const schedules::Semantics sem(p);
  for (const auto& t : trace.transfers) {
    const schedules::Op& send = p.ops(t.src_rank)[static_cast<std::size_t>(t.src_pos)];
    const schedules::Op& recv = p.ops(t.dst_rank)[static_cast<std::size_t>(t.dst_pos)];
    INFO(p.op_text(t.src_rank, send) << " -> " << p.op_text(t.dst_rank, recv));
    CHECK(sem.tensor_of(send) == sem.tensor_of(recv));
    check(t, send);
  }
}

// Uniform stages, free communication.
inline sim::SimOptions uniform(int stages, double f, double b) {
  sim::SimOptions o;
  sim::StageCost c;
  c.forward = f;
  c.backward = b;
  c.backward_input = b / 2;
  c.backward_weight = b / 2;
  o.costs = sim::CostModel::uniform(stages, c);
  return o;
}

// Random durations: each stage's F, I and W in [lo, hi) (B = I + W), a latency in [0, max_latency)
// or none, a bandwidth in [10, 1000) or none.
inline void random_costs(sim::SimOptions& o, std::mt19937& rng, double lo, double hi,
                         double max_latency) {
  auto pick = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  auto real = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  for (auto& st : o.costs.stages) {
    st.forward = real(lo, hi);
    st.backward_input = real(lo, hi);
    st.backward_weight = real(lo, hi);
    st.backward = st.backward_input + st.backward_weight;
  }
  o.network.latency = pick(0, 1) ? real(0, max_latency) : 0.0;
  o.network.bandwidth = pick(0, 1) ? real(10, 1000) : 0.0;
}

// A random small program and model: a registered schedule at one of its test parameter sets,
// lowered in a random comm style, perturbed (two neighbouring ops swapped, or one dropped, on a
// random rank), with random costs, network and memory. Programs validation rejects as fatal are
// drawn again.
struct RandomCase {
  schedules::Program program;
  sim::SimOptions options;
  std::string name;
};
// `groups`: the batches of batched and megatron are written as GROUP_START ... GROUP_END, as
// under comm.semantics nccl.
inline RandomCase random_case(std::mt19937& rng, bool groups = false) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const auto& generators = schedules::Registry::instance().all();
  const auto& lowerings = all_lowerings();
  while (true) {
    const auto& g =
        generators[static_cast<std::size_t>(pick(0, static_cast<int>(generators.size()) - 1))];
    const auto& params = g.test_params[static_cast<std::size_t>(
        pick(0, static_cast<int>(g.test_params.size()) - 1))];
    const schedules::Program compute = schedules::generate(g.name, params);
    auto lowering =
        lowerings[static_cast<std::size_t>(pick(0, static_cast<int>(lowerings.size()) - 1))];
    lowering.groups = groups;
    if (!accepts(lowering, compute)) continue;
    schedules::Program p = schedules::lower(compute, lowering);
    const int r = pick(0, p.ranks() - 1);
    auto& ops = p.ops(r);
    if (ops.size() >= 2 && pick(0, 2) == 0) {
      const std::size_t i = static_cast<std::size_t>(pick(0, static_cast<int>(ops.size()) - 2));
      std::swap(ops[i], ops[i + 1]);
    } else if (!ops.empty() && pick(0, 3) == 0) {
      ops.erase(ops.begin() + pick(0, static_cast<int>(ops.size()) - 1));
    }
    if (schedules::has_fatal(schedules::validate(p))) continue;
    sim::SimOptions o = uniform(p.stages(), 1, 2);
    random_costs(o, rng, 0.1, 5, 2);
    o.network.boundary_bytes = pick(0, 1000);
    o.network.eager_limit = pick(0, 1) ? pick(0, 1000) : 0;
    o.network.matching = pick(0, 1) ? model::Matching::tag : model::Matching::fifo;
    o.memory.activation_bytes = pick(0, 5000);
    o.memory.weight_stash_bytes = pick(0, static_cast<int>(o.memory.activation_bytes));
    o.memory.static_bytes = pick(0, 100);
    o.memory.deallocate_outputs = pick(0, 1);
    return {std::move(p), std::move(o), g.name};
  }
}

// A random case run under comm.semantics nccl: groups written or not, random streams, group
// splits and buffer room.
inline RandomCase random_nccl_case(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const bool groups = pick(0, 1) == 1;
  RandomCase c = random_case(rng, groups);
  model::NetworkOptions& n = c.options.network;
  n.semantics = model::P2pSemantics::nccl;
  n.matching = model::Matching::fifo;
  n.eager_limit = 0;
  n.nccl_buffer_bytes = pick(0, 1) ? 0 : pick(0, 3000);
  n.nccl_streams = pick(0, 1) ? model::NcclStreams::peer : model::NcclStreams::communicator;
  n.nccl_max_group_ops = pick(0, 3);
  return c;
}

}  // namespace ppsim::test
