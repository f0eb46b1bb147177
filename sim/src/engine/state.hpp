#pragma once
// The engine's shared state (internal to sim/): endpoints, per-rank state, and the constants the
// parts share.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "ppsim/base/huge_pages.hpp"
#include "ppsim/schedules/program.hpp"
#include "ppsim/sim/simulator.hpp"

namespace ppsim::sim::engine {

constexpr std::int32_t kNoEndpoint = -1;
constexpr double kNever = std::numeric_limits<double>::infinity();

using base::assign_huge;

// The record of a posted comm op. Under mpi semantics a record lives only while something still
// needs it and its slot is then reused (MpiProgress::try_free), so the engine's memory follows the
// comm ops in flight, not the program's length; under nccl rank r's k-th comm op is endpoint
// base[r] + k (the streams index their kernels by that id). 32 bytes.
// A transfer's end is known when its two sides match, so completions need no events of their own:
// a rank that has to wait for one is woken at that time, and the others just compare times.
struct Endpoint {
  double at = std::numeric_limits<double>::infinity();  // send: transfer end; recv: data there
  std::int32_t rank = 0;
  std::int32_t pos = 0;
  std::int32_t partner = kNoEndpoint;
  std::int32_t link = 0;
  std::uint32_t tensor = 0;  // Semantics::tensor_index of what it moves
  // frees_when_sent: a gradient, or a forward output under deallocate_outputs. nccl only:
  // running (its kernel runs), buffered (a send that went into its peer's buffer), ready (its
  // transfer has been asked for). held: its rank has not yet passed the op (blocking) or the
  // WAIT on its request (async). freed: the slot is on the free list.
  std::uint16_t send : 1 = 0, async : 1 = 0, buffer_live : 1 = 0, eager : 1 = 0,
                       frees_when_sent : 1 = 0, running : 1 = 0, buffered : 1 = 0, ready : 1 = 0,
                       held : 1 = 0, freed : 1 = 0, send_f : 1 = 0;
};
static_assert(sizeof(Endpoint) == 32);

// A request whose endpoint was freed after its WAIT: complete, at a time already past.
constexpr std::int32_t kRetired = -2;

// When the endpoint's op completes; kNever while its partner has not posted. An eager send
// completes when posted.
inline double done_time(const Endpoint& e) {
  return e.send && e.eager ? 0.0 : e.at;
}

// What the engine keeps per tensor (indexed by Semantics::tensor_index): one record, so that
// posting an op, matching it and finding its buffer again touch one cache line, not three tables.
struct TensorSlots {
  std::int32_t posted = kNoEndpoint;  // tag matching: the side posted first, until it is matched
  std::int32_t recv = kNoEndpoint;    // the receiving endpoint
  std::int32_t send_f = kNoEndpoint;  // forward tensors: the sending endpoint (freed at B)
};

// `waking`: its wake-up is queued (so later matches do not queue a second one).
enum class Block : std::uint8_t { none, endpoint, wait, waking, done };

// Laid out by use: the first three cache lines hold what issuing an op reads (the engine
// prefetches them for the next event's rank), the rest what only some events or the end read.
struct alignas(64) RankState {
  const schedules::Op* ops = nullptr;  // this rank's ops, read in place from the Program
  std::size_t n_ops = 0;
  std::size_t pc = 0;
  std::int32_t pending_end = -1;  // compute op whose end effects apply when the rank resumes
  Block block = Block::none;
  std::int32_t blocked_ep = kNoEndpoint;
  std::int32_t dense_limit = 0;  // request ids below it are in request_ep, the others sparse
  double blocked_since = 0;
  // The WAIT at pc: its requests before wait_next are complete, the last at wait_ready. Completion
  // times never change once known, so each request is looked at once however often it wakes us.
  std::size_t wait_next = 0;
  double wait_ready = 0;
  // request id -> endpoint: this rank's slice of the engine's table for the dense ids lowering
  // makes (0..dense_limit-1), a map for the others
  std::int32_t* request_ep = nullptr;
  std::vector<std::pair<int, int>> links;  // (peer, link id), negative peer = incoming
  double busy = 0, exposed = 0;
  // Sent buffers that free themselves when their transfer ends: (time, endpoint), a min-heap.
  std::vector<std::pair<double, std::int32_t>> releases;
  std::int64_t memory = 0, peak_memory = 0;
  std::int64_t stashed = 0, stashed_at_peak = 0;  // the stash part of memory (activations)
  int inflight = 0, peak_inflight = 0;
  double start = -1;
  std::size_t markers = 0;  // group markers passed (they take no time and leave no span)
  // ---- colder
  double end = 0;
  double send_held = 0;       // blocked on its own sends alone (Engine::held_by_sends)
  double sends_ready_at = 0;  // during a block: when the last of its sends became ready
  std::int64_t sent = 0, recv = 0;
  std::int32_t next_ep = 0;
  std::int32_t ep_base = 0;
  std::unordered_map<std::int32_t, std::int32_t> sparse_request_ep;
};

// The endpoint of a rank's request (kRetired once waited), kNoEndpoint if never posted.
inline std::int32_t posted_endpoint(const RankState& rs, std::int32_t request) {
  if (request >= 0 && request < rs.dense_limit)
    return rs.request_ep[static_cast<std::size_t>(request)];
  const auto it = rs.sparse_request_ep.find(request);
  return it == rs.sparse_request_ep.end() ? kNoEndpoint : it->second;
}
// The same for rank r's WAIT, which must name posted requests.
inline std::int32_t request_endpoint(const RankState& rs, int r, std::int32_t request) {
  const std::int32_t ep = posted_endpoint(rs, request);
  if (ep != kNoEndpoint) return ep;
  throw SimulationError(
      fmt::format("rank {}: WAIT on request #{} that was never posted", r, request));
}

}  // namespace ppsim::sim::engine
