#include "ppsim/model/cluster.hpp"

namespace ppsim::model {

std::string default_inter_node(const Gpu& gpu) {
  if (gpu.link == "nvlink3") return "ib-hdr";
  if (gpu.link == "nvlink5") return "ib-xdr";
  return "ib-ndr";
}

const char* to_string(Axis a) {
  switch (a) {
    case Axis::tensor:
      return "tensor";
    case Axis::context:
      return "context";
    case Axis::expert:
      return "expert";
    case Axis::data:
      return "data";
    case Axis::pipeline:
      return "pipeline";
  }
  return "?";
}

int size(const Parallel& p, Axis a) {
  switch (a) {
    case Axis::tensor:
      return p.tensor;
    case Axis::context:
      return p.context;
    case Axis::expert:
      return p.expert;
    case Axis::data:
      return p.data;
    case Axis::pipeline:
      return p.pipeline;
  }
  return 1;
}

long long stride(const Parallel& p, Axis a) {
  switch (a) {
    case Axis::tensor:
      return 1;
    case Axis::context:
      return p.tensor;
    case Axis::expert:  // the fastest part of the data-parallel ranks
    case Axis::data:
      return 1LL * p.tensor * p.context;
    case Axis::pipeline:
      return 1LL * p.tensor * p.context * p.data;
  }
  return 1;
}

GroupSpan span(const Parallel& p, Axis a, int gpus_per_node) {
  return span_of(size(p, a), stride(p, a), gpus_per_node);
}

GroupSpan span_of(int size, long long st, int gpus_per_node) {
  GroupSpan g;
  g.size = size;
  // The first group's ranks are 0, st, 2·st, ...: a stride of a node or more puts each in a node
  // of its own; a shorter one skips no node, so they span the first rank's to the last one's.
  g.nodes = st >= gpus_per_node
                ? g.size
                : static_cast<int>((static_cast<long long>(g.size - 1) * st) / gpus_per_node + 1);
  g.per_node = (g.size + g.nodes - 1) / g.nodes;
  return g;
}

}  // namespace ppsim::model
