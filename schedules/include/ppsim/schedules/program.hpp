#pragma once
// A Program: P per-rank op lists, the placement of virtual stages on ranks, and the routes the
// microbatches take through the stages. What an op means is answered by semantics.hpp.
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ppsim/schedules/op.hpp"
#include "ppsim/schedules/placement.hpp"
#include "ppsim/schedules/route.hpp"

namespace ppsim::schedules {

class Program {
 public:
  Program() = default;
  // `routes` default: one route through stages 0..S-1 for every microbatch.
  Program(int microbatches, std::vector<StagePlace> placement, Routes routes = {});

  int ranks() const { return static_cast<int>(ops_.size()); }
  int chunks() const { return chunks_; }
  int stages() const { return static_cast<int>(placement_.size()); }
  int microbatches() const { return microbatches_; }
  const std::vector<StagePlace>& placement() const { return placement_; }
  const StagePlace& place(int stage) const { return placement_[static_cast<std::size_t>(stage)]; }
  int rank_of(int stage) const { return place(stage).rank; }
  int chunks_on(int rank) const;
  const Routes& routes() const { return routes_; }

  const std::vector<Op>& ops(int rank) const { return ops_[static_cast<std::size_t>(rank)]; }
  std::vector<Op>& ops(int rank) { return ops_[static_cast<std::size_t>(rank)]; }
  std::size_t total_ops() const;

  void push(int rank, Op op) { ops(rank).push_back(op); }
  // Throws ParameterError (key "wait") for more ids than a WAIT holds (65535).
  void push_wait(int rank, std::span<const std::int32_t> request_ids);
  // A composite op (OVERLAP_F_B) of plain compute ops that run together.
  void push_composite(int rank, OpKind kind, std::span<const Op> parts);
  std::span<const std::int32_t> wait_ids(int rank, const Op& wait_op) const {
    return {wait_pool_[static_cast<std::size_t>(rank)].data() + wait_op.list_begin,
            wait_op.list_size};
  }
  std::span<const Op> parts(int rank, const Op& composite) const {
    return {part_pool_[static_cast<std::size_t>(rank)].data() + composite.list_begin,
            composite.list_size};
  }

  // `2F0`, `1SEND_F3#7`, `WAIT(7;8)`, `(0F7;7B3)OVERLAP_F_B`.
  std::string op_text(int rank, const Op& op) const;
  // One line per rank, ops separated by commas (PyTorch's CSV row form).
  std::string to_text() const;
  // Inverse of to_text. Placement is inferred from which rank runs each stage's compute ops,
  // chunks numbered in stage order per rank; M is one more than the largest microbatch. Blank
  // lines are skipped, so a rank with no ops cannot be written (generators never make one).
  // `routes` (empty: linear) are checked against the inferred stage count.
  static Program parse(std::string_view text, Routes routes = {});

  void reserve(int rank, std::size_t n) { ops(rank).reserve(n); }
  // At least `ranks` ranks: a rank that owns no stage (IDLE in the text form) still exists.
  void ensure_ranks(int ranks);

 private:
  int microbatches_ = 0;
  int chunks_ = 0;
  std::vector<StagePlace> placement_;
  Routes routes_;
  std::vector<std::vector<Op>> ops_;
  std::vector<std::vector<std::int32_t>> wait_pool_;  // per rank; WAIT ops index into it
  std::vector<std::vector<Op>> part_pool_;            // per rank; composite ops index into it
};

}  // namespace ppsim::schedules
