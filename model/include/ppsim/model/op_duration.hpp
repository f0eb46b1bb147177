#pragma once
// How long a compute op runs under the cost model, in one place for the simulator (which replays
// it) and the executor (which emulates it).
#include <optional>

#include "ppsim/model/model.hpp"
#include "ppsim/schedules/program.hpp"

namespace ppsim::model {

// A plain compute op (F, B, I, W); resource ops take no time. nullopt: an I or W of a stage whose
// costs give only `backward`.
inline std::optional<double> plain_op_duration(const CostModel& costs, const schedules::Op& op) {
  using schedules::OpKind;
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

// Any op. A composite (an overlapped F&B pair, its forward first) runs its parts together: for
// the sum of their costs unless `costs.overlapped_fb` of its forward's stage gives a time or a
// fraction of that sum.
inline std::optional<double> op_duration(const CostModel& costs, const schedules::Program& program,
                                         int rank, const schedules::Op& op) {
  if (!schedules::is_composite(op.kind)) return plain_op_duration(costs, op);
  const auto parts = program.parts(rank, op);
  double d = 0;
  for (const schedules::Op& part : parts) {
    const auto p = plain_op_duration(costs, part);
    if (!p) return std::nullopt;
    d += *p;
  }
  if (parts.empty()) return d;
  const StageCost& c = costs.stages[static_cast<std::size_t>(parts.front().stage)];
  return c.overlapped_fb >= 0 ? c.overlapped_fb : c.overlapped_fb_fraction * d;
}

}  // namespace ppsim::model
