#pragma once
// The model a config describes: how long each op takes, how the network moves tensors, how much
// memory they hold. The simulator replays a Program under it; the executor emulates it.
#include <cstdint>
#include <string_view>
#include <vector>

namespace ppsim::config {

// Durations of compute ops of one virtual stage, in the config's time unit.
struct StageCost {
  double forward = 1.0;
  double backward_input = 1.0;   // I
  double backward_weight = 1.0;  // W
  double backward = 2.0;         // a full B; equals I + W when the split is known
  bool split = true;             // false: only `backward` was given, I/W cannot run
  // An overlapped F&B pair whose forward part runs this stage takes `overlapped_fb` when it is
  // >= 0, else `overlapped_fb_fraction` x (its F + its B).
  double overlapped_fb = -1.0;
  double overlapped_fb_fraction = 1.0;
};

struct CostModel {
  std::vector<StageCost> stages;  // one per virtual stage
  static CostModel uniform(int stages, StageCost cost) {
    return {std::vector<StageCost>(static_cast<std::size_t>(stages), cost)};
  }
};

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

struct Model {
  CostModel costs;
  NetworkOptions network;
  MemoryOptions memory;
};

}  // namespace ppsim::config
