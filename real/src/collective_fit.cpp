#include "ppsim/real/collective_fit.hpp"

#include <algorithm>

namespace ppsim::real {

double bus_factor(model::Collective c, int ranks) {
  const double n = std::max(ranks, 1);
  switch (c) {
    case model::Collective::all_reduce:
      return 2 * (n - 1) / n;
    case model::Collective::broadcast:
      return 1;
    default:
      return (n - 1) / n;
  }
}

std::map<model::Collective, CollectiveFit> fit_collectives(
    const std::vector<CollectiveSample>& samples) {
  struct Sums {
    double n = 0, x = 0, y = 0, xx = 0, xy = 0;
    int ranks = 0;
  };
  std::map<model::Collective, Sums> sums;
  for (const CollectiveSample& s : samples) {
    if (!(s.seconds > 0) || !(s.bytes >= 0) || s.ranks < 2) continue;
    Sums& m = sums[s.collective];
    const double x = bus_factor(s.collective, s.ranks) * s.bytes;
    m.n += 1, m.x += x, m.y += s.seconds, m.xx += x * x, m.xy += x * s.seconds;
    m.ranks = s.ranks;
  }
  std::map<model::Collective, CollectiveFit> out;
  for (const auto& [c, m] : sums) {
    CollectiveFit f;
    f.ranks = m.ranks;
    f.samples = static_cast<int>(m.n);
    const double var = m.n * m.xx - m.x * m.x;
    // seconds = latency + x / bandwidth: the slope is 1 / bandwidth.
    const double slope = var > 1e-12 * m.xx * m.n ? (m.n * m.xy - m.x * m.y) / var : 0.0;
    if (slope > 0) {
      f.bus_bandwidth = 1 / slope;
      f.latency = std::max(0.0, (m.y - slope * m.x) / m.n);
    } else {
      f.latency = m.y / m.n;  // one size, or no growth with bytes: all latency
    }
    out[c] = f;
  }
  return out;
}

}  // namespace ppsim::real
