#pragma once
// Small builders shared by the tests.
#include <string>
#include <vector>

#include "ppsim/record/observer.hpp"
#include "ppsim/schedules/generator.hpp"
#include "ppsim/schedules/lowering.hpp"
#include "ppsim/schedules/validation.hpp"
#include "ppsim/sim/simulator.hpp"

namespace ppsim::test {

// Every comm style, and the async one at several prefetch depths.
inline const std::vector<schedules::LoweringOptions>& all_lowerings() {
  static const std::vector<schedules::LoweringOptions> all = [] {
    std::vector<schedules::LoweringOptions> out;
    for (const auto& style : schedules::LoweringRegistry::instance().all()) {
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

}  // namespace ppsim::test
