#pragma once
// Point-to-point matching (internal to sim/): which posted receive a posted send meets.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include <fmt/format.h>

#include "ppsim/model/model.hpp"
#include "ppsim/schedules/program.hpp"
#include "ppsim/sim/simulator.hpp"
#include "state.hpp"

namespace ppsim::sim::engine {

// The MPI-like model: every posted send or receive is matched on its own, as soon as its partner
// is posted, by tag (the same tensor) or in fifo order per link. Another model of point-to-point
// behaviour (NCCL's per-rank p2p streams and groups) would be a class beside this one with the same
// post(), chosen by the engine.
class MpiMatching {
 public:
  // `tensors`: the engine's per-tensor records, whose `posted` field is this class's.
  MpiMatching(const schedules::Program& p, const std::vector<Endpoint>& eps,
              std::vector<TensorSlots>& tensors)
      : p_(p), eps_(eps), tensors_(tensors) {}

  void setup(model::Matching m) { fifo_ = m == model::Matching::fifo; }
  // fifo: a receive meets the next send on its link, whatever tensor that send carries.
  bool by_order() const { return fifo_; }

  // Endpoint `id`, the op `op`, is posted: returns the endpoint it meets, or kNoEndpoint while
  // none is there (it then waits for one).
  std::int32_t post(std::int32_t id, const schedules::Op& op) {
    const Endpoint& e = eps_[static_cast<std::size_t>(id)];
    if (!fifo_) {
      std::int32_t& slot = tensors_[e.tensor].posted;
      if (slot == kNoEndpoint) {
        slot = id;
        return kNoEndpoint;
      }
      if (eps_[static_cast<std::size_t>(slot)].send == e.send)
        throw SimulationError(
            fmt::format("rank {} op {}: {} duplicates an earlier op on the same tensor", e.rank,
                        e.pos, p_.op_text(e.rank, op)));
      const std::int32_t other = slot;
      slot = kNoEndpoint;
      return other;
    }
    const auto link = static_cast<std::size_t>(e.link);
    if (link >= fifo_queues_.size()) fifo_queues_.resize(link + 1);
    FifoQueues& q = fifo_queues_[link];
    auto& mine = e.send ? q.sends : q.recvs;
    auto& theirs = e.send ? q.recvs : q.sends;
    if (theirs.empty()) {
      mine.push_back(id);
      return kNoEndpoint;
    }
    const std::int32_t other = theirs.front();
    theirs.pop_front();
    return other;
  }

 private:
  struct FifoQueues {
    std::deque<std::int32_t> sends, recvs;  // posted, not yet matched
  };

  const schedules::Program& p_;
  const std::vector<Endpoint>& eps_;
  std::vector<TensorSlots>& tensors_;
  bool fifo_ = false;
  std::vector<FifoQueues> fifo_queues_;  // fifo matching: by link id
};

}  // namespace ppsim::sim::engine
