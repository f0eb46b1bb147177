#pragma once
// A Program: P per-rank op lists, the placement of virtual stages on ranks, and the routes the
// microbatches take through the stages. What an op means is answered by semantics.hpp.
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ppsim/schedules/op.hpp"
#include "ppsim/schedules/op_arena.hpp"
#include "ppsim/schedules/placement.hpp"
#include "ppsim/schedules/route.hpp"

namespace ppsim::schedules {

// One rank's ops: a std::vector, in the Program's arena when it has one (op_arena.hpp).
using OpList = std::vector<Op, ArenaAllocator<Op>>;
// One rank's request ids of its WAITs, each WAIT naming a run of them.
using WaitIds = std::vector<std::int32_t, ArenaAllocator<std::int32_t>>;

// Throws ParameterError (key "wait") for more ids than a WAIT holds (65535).
void check_wait_size(std::size_t ids);
// Appends `ids` to a rank's pool of WAIT ids and returns the WAIT op that names them.
template <typename Pool>
Op append_wait(Pool& pool, std::span<const std::int32_t> ids) {
  check_wait_size(ids.size());
  Op op;
  op.kind = OpKind::WAIT;
  op.list_begin = static_cast<std::int32_t>(pool.size());
  op.list_size = static_cast<std::uint16_t>(ids.size());
  pool.insert(pool.end(), ids.begin(), ids.end());
  return op;
}

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
  // How many stages `rank` runs: counted once when the Program is made (a scan of the placement
  // per call made the lowering quadratic in ranks).
  int chunks_on(int rank) const {
    const auto r = static_cast<std::size_t>(rank);
    return r < chunks_on_.size() ? chunks_on_[r] : 0;
  }
  const Routes& routes() const { return routes_; }

  const OpList& ops(int rank) const { return ops_[static_cast<std::size_t>(rank)]; }
  OpList& ops(int rank) { return ops_[static_cast<std::size_t>(rank)]; }
  std::size_t total_ops() const;

  void push(int rank, Op op) { ops(rank).push_back(op); }
  // Throws ParameterError (key "wait") for more ids than a WAIT holds (65535).
  void push_wait(int rank, std::span<const std::int32_t> request_ids);
  // A composite op (OVERLAP_F_B) of plain compute ops that run together.
  void push_composite(int rank, OpKind kind, std::span<const Op> parts);
  // The composite op that push_composite would append, its parts already in the rank's pool: for
  // a caller that builds the rank's list elsewhere (set_ops).
  Op pool_composite(int rank, OpKind kind, std::span<const Op> parts);
  // Replaces a rank's ops and its WAITs' ids (as append_wait built them) with these, in lists of
  // exactly their size.
  void set_ops(int rank, std::span<const Op> ops, std::span<const std::int32_t> wait_ids);
  // From now on the lists of the ranks that exist and are still empty take their storage from
  // one arena of huge pages (op_arena.hpp); `capacity_hint` is the bytes they are expected to
  // need in all. Nothing changes for a hint under 8 MiB (such programs stay on the heap).
  void use_arena(std::size_t capacity_hint);
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

  // Room for n ops on `rank`, faulted in (base::prefault) for the writes that follow: reserve what
  // will be written. The first reserve of a list moves the program to an arena (use_arena, sized as
  // if every rank reserved n), so generators, which reserve each rank's count, pack large
  // programs' lists on huge pages.
  void reserve(int rank, std::size_t n);
  // At least `ranks` ranks: a rank that owns no stage (IDLE in the text form) still exists.
  void ensure_ranks(int ranks);

 private:
  int microbatches_ = 0;
  int chunks_ = 0;
  std::vector<StagePlace> placement_;
  std::vector<int> chunks_on_;  // per rank: its stages in placement_
  Routes routes_;
  std::vector<OpList> ops_;
  std::vector<WaitIds> wait_pool_;          // per rank; WAIT ops index into it
  std::vector<std::vector<Op>> part_pool_;  // per rank; composite ops index into it
};

}  // namespace ppsim::schedules
