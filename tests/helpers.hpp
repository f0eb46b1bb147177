#pragma once
// Small builders shared by the tests.
#include <string>
#include <vector>

#include "ppsim/schedules/generator.hpp"
#include "ppsim/schedules/lowering.hpp"
#include "ppsim/sim/simulator.hpp"
#include "ppsim/sim/trace.hpp"

namespace ppsim::test {

// Every comm style, and the async one at several prefetch depths.
inline const std::vector<schedules::LoweringOptions>& all_lowerings() {
  static const std::vector<schedules::LoweringOptions> all = {
      {schedules::CommStyle::blocking, 1},
      {schedules::CommStyle::async_send, 1},
      {schedules::CommStyle::batched, 1},
      {schedules::CommStyle::async, 0},
      {schedules::CommStyle::async, 1},
      {schedules::CommStyle::async, 2},
      {schedules::CommStyle::async, schedules::LoweringOptions::kPrefetchAll}};
  return all;
}

// One rank's ops as text: "0F0,0SEND_F0,...".
inline std::string rank_line(const schedules::Program& p, int rank) {
  std::string s;
  for (const auto& op : p.ops(rank)) s += (s.empty() ? "" : ",") + p.op_text(rank, op);
  return s;
}

inline schedules::Program lowered(const std::string& kind, int P, int M, int V = 1,
                                  schedules::CommStyle style = schedules::CommStyle::async,
                                  int prefetch = 1) {
  schedules::ScheduleParams params;
  params.ranks = P;
  params.microbatches = M;
  params.chunks = V;
  return schedules::lower(schedules::generate(kind, params), {style, prefetch});
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
