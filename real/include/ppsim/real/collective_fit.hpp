#pragma once
// Collectives measured on the machine (`ppsim real --calibrate` with a transport that has them:
// `nccl`), and their fit to the model's form (model/collectives.hpp): seconds = latency +
// factor(n) · bytes / bus bandwidth, factor as nccl-tests' bus bandwidth counts it.
#include <map>
#include <vector>

#include "ppsim/model/collectives.hpp"

namespace ppsim::real {

struct CollectiveSample {
  model::Collective collective = model::Collective::all_reduce;
  int ranks = 0;
  double bytes = 0;    // the buffer as model::collective_time takes it
  double seconds = 0;  // one call, median of its repeats
};

struct CollectiveFit {
  int ranks = 0;
  int samples = 0;
  double latency = 0;        // seconds per call
  double bus_bandwidth = 0;  // bytes per second on the bus; 0 when every sample had one size
};

// nccl-tests' bus-bandwidth factor: 2(n-1)/n for an all-reduce, (n-1)/n for all-gather,
// reduce-scatter and all-to-all, 1 for a broadcast.
double bus_factor(model::Collective c, int ranks);

// Least squares of seconds on factor · bytes per collective (latency and bandwidth kept >= 0).
std::map<model::Collective, CollectiveFit> fit_collectives(
    const std::vector<CollectiveSample>& samples);

}  // namespace ppsim::real
