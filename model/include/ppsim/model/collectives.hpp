#pragma once
// How long a collective takes on a group of ranks, from the links it crosses (docs/MODEL.md,
// "Collectives"): NCCL's ring (and, for an all-reduce across nodes, its tree) as latency per
// step plus bytes over the bus bandwidth, with nccl-tests' bus-bandwidth factors.
#include "ppsim/model/cluster.hpp"
#include "ppsim/model/kernel_model.hpp"

namespace ppsim::model {

enum class Collective { all_reduce, all_gather, reduce_scatter, all_to_all, broadcast };
const char* to_string(Collective c);

struct CollectiveModel {
  Cluster cluster;
  // The fraction of a link's bandwidth a collective's bus reaches (hardware.collectives).
  double bus_efficiency = kBusEfficiency;
  double base_latency = kCollectiveLatency;  // per call
};

// The bandwidth a ring on `g` runs at: NVLink inside a node, and across nodes each node's share
// of the network for its per_node GPUs (every ring crosses each node boundary once, one NIC per
// GPU), whichever is less.
double bus_bandwidth(const CollectiveModel& m, const GroupSpan& g);
// One step's latency: the slowest link a step crosses.
double step_latency(const CollectiveModel& m, const GroupSpan& g);

// Seconds for `bytes` (the all-reduce's buffer, the all-gather's output, the reduce-scatter's
// input, the all-to-all's send buffer, the broadcast's buffer) on a group `g`; 0 for one rank.
double collective_time(const CollectiveModel& m, Collective c, double bytes, const GroupSpan& g);

}  // namespace ppsim::model
