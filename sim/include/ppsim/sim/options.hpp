#pragma once
// Network and memory model of a simulation run.
#include <cstdint>
#include <string_view>

#include "ppsim/sim/costs.hpp"

namespace ppsim::sim {

enum class Matching {
  tag,   // a receive meets the send of the same tensor (MPI/Gloo tags)
  fifo,  // the k-th send A->B meets the k-th receive at B from A (NCCL)
};
std::string_view to_string(Matching m);

struct NetworkOptions {
  double latency = 0.0;             // per transfer, time units
  double bandwidth = 0.0;           // bytes per time unit; 0 = unlimited
  std::int64_t boundary_bytes = 0;  // size of every activation / gradient crossing ranks
  std::int64_t eager_limit = 0;     // sends of at most this many bytes complete locally; 0 = off
  Matching matching = Matching::tag;
};

struct MemoryOptions {
  std::int64_t activation_bytes = 0;    // stash per (stage, microbatch), taken at F
  std::int64_t weight_stash_bytes = 0;  // part of the stash kept from I until W
  std::int64_t static_bytes = 0;        // per chunk (weights, optimizer state)
  bool deallocate_outputs = false;      // free a forward output once its send completes
};

struct SimOptions {
  CostModel costs;
  NetworkOptions network;
  MemoryOptions memory;
};

}  // namespace ppsim::sim
