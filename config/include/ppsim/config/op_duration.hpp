#pragma once
// How long a compute op runs under the cost model, in one place for the simulator (which replays
// it) and the executor (which emulates it).
#include <optional>

#include "ppsim/config/model.hpp"
#include "ppsim/schedules/program.hpp"

namespace ppsim::config {

// A composite's parts run together for the sum of their costs; resource ops take no time.
// nullopt: `op` (or a part) is an I or W of a stage whose costs give only `backward`.
inline std::optional<double> op_duration(const CostModel& costs, const schedules::Program& program,
                                         int rank, const schedules::Op& op) {
  using schedules::OpKind;
  if (schedules::is_composite(op.kind)) {
    double d = 0;
    for (const schedules::Op& part : program.parts(rank, op)) {
      const auto p = op_duration(costs, program, rank, part);
      if (!p) return std::nullopt;
      d += *p;
    }
    return d;
  }
  if (!schedules::is_compute(op.kind)) return 0.0;
  const StageCost& c = costs.stages[static_cast<std::size_t>(op.stage)];
  switch (op.kind) {
    case OpKind::F:
      return c.forward;
    case OpKind::B:
      return c.backward;
    case OpKind::I:
    case OpKind::W:
      if (!c.split) return std::nullopt;
      return op.kind == OpKind::I ? c.backward_input : c.backward_weight;
    default:
      return 0.0;
  }
}

}  // namespace ppsim::config
