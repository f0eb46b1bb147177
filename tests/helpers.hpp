#pragma once
// Small builders shared by the tests.
#include <string>

#include "ppsim/schedules/generator.hpp"
#include "ppsim/schedules/lowering.hpp"
#include "ppsim/sim/simulator.hpp"
#include "ppsim/sim/trace.hpp"

namespace ppsim::test {

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
