// The README's library example: generate, lower, simulate; exits 0 when the 1F1B closed form holds.
#include <cmath>
#include <cstdio>

#include "ppsim/schedules/generator.hpp"
#include "ppsim/schedules/lowering.hpp"
#include "ppsim/sim/simulator.hpp"

int main() {
  auto compute = ppsim::schedules::generate("1f1b", {{"ranks", 4}, {"microbatches", 8}});
  auto program = ppsim::schedules::lower(compute, {"async", {}});
  ppsim::sim::SimOptions options;
  options.costs = ppsim::sim::CostModel::uniform(program.stages(), {});
  ppsim::sim::SimResult r = ppsim::sim::simulate(program, options);
  std::printf("bubble_fraction %.4f\n", r.bubble_fraction);
  return !r.deadlock && std::abs(r.bubble_fraction - 3.0 / 11.0) < 1e-12 ? 0 : 1;
}
