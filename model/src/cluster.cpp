#include "ppsim/model/cluster.hpp"

#include <algorithm>

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
    case Axis::expert:  // Megatron's expert grid, tp-ep-dp-pp: the context ranks fold into data
      return p.tensor;
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
  const long long G = gpus_per_node;
  // The first group's ranks are 0, st, 2·st, ...: a stride of a node or more puts each in a node
  // of its own; a shorter one skips no node, so they span the first rank's to the last one's.
  if (st >= G) {
    g.nodes = size;
    g.per_node = 1;
    return g;
  }
  g.nodes = static_cast<int>((static_cast<long long>(size - 1) * st) / G + 1);
  if (g.nodes == 1) {
    g.per_node = size;
    return g;
  }
  // A ring is as fast as its least populated node: the first, a full one, or the last.
  auto before = [&](long long node) { return (node * G + st - 1) / st; };  // ranks below it
  long long fewest = std::min<long long>(before(1), size - before(g.nodes - 1));
  if (g.nodes > 2) fewest = std::min(fewest, G / st);
  g.per_node = static_cast<int>(std::max<long long>(1, fewest));
  return g;
}

}  // namespace ppsim::model
