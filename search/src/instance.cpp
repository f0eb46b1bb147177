#include "ppsim/search/instance.hpp"

namespace ppsim::search {

using schedules::OpKind;

double Instance::duration(OpKind kind, int stage) const {
  const auto& c = costs[static_cast<std::size_t>(stage)];
  switch (kind) {
    case OpKind::F:
      return c.forward;
    case OpKind::I:
      return c.backward_input;
    case OpKind::W:
      return c.backward_weight;
    default:
      return c.backward;
  }
}

std::int64_t Instance::memory_delta(OpKind kind, int stage) const {
  const auto& m = memory[static_cast<std::size_t>(stage)];
  switch (kind) {
    case OpKind::F:
      return m.activation_bytes;
    case OpKind::I:
      return -(m.activation_bytes - m.weight_stash_bytes);
    case OpKind::W:
      return -m.weight_stash_bytes;
    default:
      return -m.activation_bytes;
  }
}

Instance make_instance(const config::Prepared& prepared, std::int64_t limit) {
  const auto& program = *prepared.program;
  Instance in;
  in.ranks = program.ranks();
  in.microbatches = program.microbatches();
  in.chunks = program.chunks();
  in.placement = program.placement();
  in.costs = prepared.model.costs.stages;
  in.split = true;
  for (const auto& c : in.costs) in.split = in.split && c.split;
  const auto& net = prepared.model.network;
  in.hop = net.latency +
           (net.bandwidth > 0 ? static_cast<double>(net.boundary_bytes) / net.bandwidth : 0.0);
  in.static_bytes.assign(static_cast<std::size_t>(in.ranks), 0);
  for (int s = 0; s < in.stages(); ++s) {
    in.memory.push_back(prepared.model.memory.stage(s));
    in.static_bytes[static_cast<std::size_t>(in.rank_of(s))] += in.memory.back().static_bytes;
  }
  in.limit = limit;
  return in;
}

}  // namespace ppsim::search
