#include "ppsim/model/collectives.hpp"

#include <algorithm>
#include <cmath>

namespace ppsim::model {

const char* to_string(Collective c) {
  switch (c) {
    case Collective::all_reduce:
      return "all_reduce";
    case Collective::all_gather:
      return "all_gather";
    case Collective::reduce_scatter:
      return "reduce_scatter";
    case Collective::all_to_all:
      return "all_to_all";
    case Collective::broadcast:
      return "broadcast";
  }
  return "?";
}

double bus_bandwidth(const CollectiveModel& m, const GroupSpan& g) {
  double bw = g.per_node > 1 ? m.cluster.intra.bandwidth : 1e300;
  if (g.crosses_nodes()) bw = std::min(bw, g.per_node * m.cluster.inter.bandwidth);
  return bw * m.bus_efficiency;
}

double step_latency(const CollectiveModel& m, const GroupSpan& g) {
  return g.crosses_nodes() ? m.cluster.inter.latency : m.cluster.intra.latency;
}

double collective_time(const CollectiveModel& m, Collective c, double bytes, const GroupSpan& g) {
  const double n = g.size;
  if (g.size <= 1 || bytes <= 0) return 0;
  const double bw = bus_bandwidth(m, g), lat = step_latency(m, g);
  switch (c) {
    case Collective::all_reduce: {
      // Ring: a reduce-scatter then an all-gather, 2(n-1) steps, 2(n-1)/n of the buffer over
      // each rank's link. Tree (NCCL picks it across nodes when it is faster): 2·log2(n) steps,
      // the same bandwidth term.
      const double data = 2 * (n - 1) / n * bytes / bw;
      const double ring = m.base_latency + 2 * (n - 1) * lat + data;
      if (!g.crosses_nodes()) return ring;
      const double tree = m.base_latency + 2 * std::ceil(std::log2(n)) * lat + data;
      return std::min(ring, tree);
    }
    case Collective::all_gather:
    case Collective::reduce_scatter:
      return m.base_latency + (n - 1) * lat + (n - 1) / n * bytes / bw;
    case Collective::broadcast:  // pipelined along the ring: the whole buffer over each link
      return m.base_latency + (n - 1) * lat + bytes / bw;
    case Collective::all_to_all: {
      // Each rank keeps 1/n and sends the rest directly: its peers in the node over NVLink, the
      // others over its own NIC, both at once.
      const double in_node = (g.per_node - 1) / n * bytes, off_node = (n - g.per_node) / n * bytes;
      const double intra = m.cluster.intra.bandwidth * m.bus_efficiency,
                   inter = m.cluster.inter.bandwidth * m.bus_efficiency;
      const double t_in = g.per_node > 1 ? in_node / intra : 0;
      const double t_off = off_node > 0 ? off_node / inter : 0;
      return m.base_latency + lat + std::max(t_in, t_off);
    }
  }
  return 0;
}

}  // namespace ppsim::model
