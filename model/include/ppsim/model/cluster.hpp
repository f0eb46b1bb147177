#pragma once
// The GPUs of a job in nodes, the links inside and between nodes, and where each parallel
// group's ranks land: Megatron's default rank order puts tensor parallel fastest, then context,
// expert, data and pipeline parallel (megatron/core/parallel_state.py, order "tp-cp-ep-dp-pp"), so
// the link a group's collectives cross follows from the sizes alone.
#include <string>

#include "ppsim/model/transformer.hpp"

namespace ppsim::model {

struct Cluster {
  int gpus_per_node = 8;
  Link intra;  // between two GPUs of a node, one direction
  Link inter;  // a GPU's share of its node's network, one direction
};

// The preset names of the defaults: a GPU's own NVLink inside a node, and InfiniBand of its
// generation between nodes (HDR with A100, NDR with H100/H200, XDR with B200).
std::string default_inter_node(const Gpu& gpu);

enum class Axis { tensor, context, expert, data, pipeline };
const char* to_string(Axis a);

// The parallel sizes of a layout. `expert` divides data·context (expert-parallel groups are cut
// from the data-parallel ranks, as Megatron does).
struct Parallel {
  int tensor = 1, context = 1, expert = 1, data = 1, pipeline = 1;
  long long world() const { return 1LL * tensor * context * data * pipeline; }
};

// One group of an axis: its size, how many nodes it spans and how many of its ranks the least
// populated of them holds (the first group's; the others have its shape under this order).
struct GroupSpan {
  int size = 1;
  int per_node = 1;
  int nodes = 1;
  bool crosses_nodes() const { return nodes > 1; }
};

// The stride between consecutive ranks of an axis's group in the default order.
long long stride(const Parallel& p, Axis a);
int size(const Parallel& p, Axis a);
GroupSpan span(const Parallel& p, Axis a, int gpus_per_node);
// Any group: `size` ranks `stride` apart, from rank 0.
GroupSpan span_of(int size, long long stride, int gpus_per_node);

// "tp-cp-ep-dp-pp", as model's output names it.
inline const char* rank_order() {
  return "tp-cp-ep-dp-pp";
}

}  // namespace ppsim::model
