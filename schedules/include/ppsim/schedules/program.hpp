#pragma once
// A Program: P per-rank op lists plus the placement of virtual stages on ranks.
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ppsim/schedules/op.hpp"
#include "ppsim/schedules/placement.hpp"

namespace ppsim::schedules {

class Program {
 public:
  Program() = default;
  Program(int microbatches, std::vector<StagePlace> placement);

  int ranks() const { return static_cast<int>(ops_.size()); }
  int chunks() const { return chunks_; }
  int stages() const { return static_cast<int>(placement_.size()); }
  int microbatches() const { return microbatches_; }
  const std::vector<StagePlace>& placement() const { return placement_; }
  const StagePlace& place(int stage) const { return placement_[static_cast<std::size_t>(stage)]; }
  int rank_of(int stage) const { return place(stage).rank; }

  const std::vector<Op>& ops(int rank) const { return ops_[static_cast<std::size_t>(rank)]; }
  std::vector<Op>& ops(int rank) { return ops_[static_cast<std::size_t>(rank)]; }
  std::size_t total_ops() const;

  void push(int rank, Op op) { ops(rank).push_back(op); }
  void push_wait(int rank, std::span<const std::int32_t> request_ids);
  std::span<const std::int32_t> wait_ids(int rank, const Op& wait_op) const {
    return {wait_pool_[static_cast<std::size_t>(rank)].data() + wait_op.request,
            wait_op.wait_count};
  }

  // Peer rank of a comm op (the other end of its tensor's boundary); -1 when there is none.
  int peer_of(const Op& comm_op) const {
    const int stage =
        comm_op.kind == OpKind::SEND_F || comm_op.kind == OpKind::RECV_B   ? comm_op.stage + 1
        : comm_op.kind == OpKind::RECV_F || comm_op.kind == OpKind::SEND_B ? comm_op.stage - 1
                                                                           : -1;
    return stage >= 0 && stage < stages() ? rank_of(stage) : -1;
  }

  // `2F0`, `1SEND_F3#7`, `WAIT(7;8)`.
  std::string op_text(int rank, const Op& op) const;
  // One line per rank, ops separated by commas (PyTorch's CSV row form).
  std::string to_text() const;
  // Inverse of to_text. Placement is inferred from which rank runs each stage's compute ops,
  // chunks numbered in stage order per rank; M is one more than the largest microbatch. Blank
  // lines are skipped, so a rank with no ops cannot be written (generators never make one).
  static Program parse(std::string_view text);

  void reserve(int rank, std::size_t n) { ops(rank).reserve(n); }

 private:
  int microbatches_ = 0;
  int chunks_ = 0;
  std::vector<StagePlace> placement_;
  std::vector<std::vector<Op>> ops_;
  std::vector<std::vector<std::int32_t>> wait_pool_;  // per rank; WAIT ops index into it
};

}  // namespace ppsim::schedules
