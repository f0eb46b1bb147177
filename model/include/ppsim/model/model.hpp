#pragma once
// The cost and memory model: how long each op takes, how the network moves tensors, how much
// memory they hold. A config describes one (config/), the simulator replays a Program under it
// and the executor emulates it; neither needs the config reader to do so.
#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ppsim/model/step_phases.hpp"
#include "ppsim/schedules/p2p_streams.hpp"
#include "ppsim/schedules/validation.hpp"

namespace ppsim::model {

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
  // Host time before each compute op starts (a GPU's kernel launch and issue gap), and before a
  // rank's first compute op (a late start: lazy initialisation, cold caches), in time units. The
  // rank is idle then. 0 by default; `ppsim real --calibrate` and `ppsim import-profile` measure
  // them.
  double launch_overhead = 0.0;
  double start_offset = 0.0;
  static CostModel uniform(int stages, StageCost cost) {
    return {std::vector<StageCost>(static_cast<std::size_t>(stages), cost)};
  }
};

enum class Matching {
  tag,   // a receive meets the send of the same tensor (MPI/Gloo tags)
  fifo,  // the k-th send A->B meets the k-th receive at B from A (NCCL)
};
std::string_view to_string(Matching m);

// Which point-to-point model runs the program (DESIGN.md "Two models of point-to-point behaviour").
enum class P2pSemantics {
  mpi,   // every posted request progresses on its own (MPI, Gloo)
  nccl,  // ops run as kernels in stream order; groups launch together
};
std::string_view to_string(P2pSemantics s);

enum class NcclStreams {
  communicator,  // one serialized p2p stream per rank
  peer,          // one per (rank, peer) pair: PyTorch's 2-rank communicators for isend/irecv
};
std::string_view to_string(NcclStreams s);

struct NetworkOptions {
  double latency = 0.0;               // per transfer, time units
  double bandwidth = 0.0;             // bytes per time unit; 0 = unlimited
  std::int64_t boundary_bytes = 0;    // size of every activation / gradient crossing ranks
  std::int64_t eager_limit = 0;       // sends of at most this many bytes complete locally; 0 = off
  Matching matching = Matching::tag;  // always fifo under nccl
  P2pSemantics semantics = P2pSemantics::mpi;
  // nccl only: a send of at most this many bytes completes without its receive (it fits NCCL's
  // buffers); 0 = every send waits for its receive.
  std::int64_t nccl_buffer_bytes = 0;
  NcclStreams nccl_streams = NcclStreams::communicator;
  int nccl_max_group_ops = 0;  // nccl only: larger groups launch in pieces; 0 = no limit
};

// The streams and kernels of the nccl model (docs/SEMANTICS.md).
inline schedules::StreamOptions stream_options(const NetworkOptions& n) {
  return {.per_peer = n.nccl_streams == NcclStreams::peer, .max_group_ops = n.nccl_max_group_ops};
}

// Validation follows the model: NCCL keeps a send's tensor alive until its kernel is done.
inline schedules::ValidateOptions validate_options(const NetworkOptions& n) {
  return {.send_buffers_released_early = n.semantics == P2pSemantics::nccl};
}

// What one virtual stage holds: its stash per microbatch and its static bytes.
struct StageMemory {
  std::int64_t activation_bytes = 0;    // stash per (stage, microbatch), taken at F
  std::int64_t weight_stash_bytes = 0;  // part of the stash kept from I until W
  std::int64_t static_bytes = 0;        // weights, gradients, optimizer state
};

struct MemoryOptions {
  std::int64_t activation_bytes = 0;    // stash per (stage, microbatch), taken at F
  std::int64_t weight_stash_bytes = 0;  // part of the stash kept from I until W
  std::int64_t static_bytes = 0;        // per chunk (weights, optimizer state)
  bool deallocate_outputs = false;      // free a forward output once its send completes
  // One entry per virtual stage when stages differ (costs derived from a model); empty: every
  // stage holds the three values above.
  std::vector<StageMemory> per_stage;
  // A rank whose peak exceeds this is out of memory (hardware.memory_bytes); 0 = no limit.
  std::int64_t limit_bytes = 0;

  StageMemory stage(int s) const {
    if (per_stage.empty()) return {activation_bytes, weight_stash_bytes, static_bytes};
    return per_stage[static_cast<std::size_t>(s)];
  }
  std::int64_t largest_activation() const {
    std::int64_t m = activation_bytes;
    for (const auto& s : per_stage) m = std::max(m, s.activation_bytes);
    return m;
  }
};

struct Model {
  CostModel costs;
  NetworkOptions network;
  MemoryOptions memory;
  StepPhases step;  // enabled with a `model` section: the rest of a training step
};

}  // namespace ppsim::model
