#pragma once
// What an op of a Program means: which tensor it carries, reads, produces and frees, which rank is
// its peer, and which stage comes before and after a stage for a given microbatch (its route).
// Lowering, validation, the simulator and the executor ask here and nowhere else.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ppsim/schedules/program.hpp"

namespace ppsim::schedules {

// A tensor crossing from one stage to another: the forward activation that `producer` computes
// for `microbatch`, or the gradient it computes (flowing to the previous stage). SEND_F(s) and
// RECV_F(next(s)) name the same tensor.
struct TensorId {
  bool backward = false;
  std::int32_t producer = 0;
  std::int32_t microbatch = 0;
  friend bool operator==(const TensorId&, const TensorId&) = default;
};

// An op's text for a message: Program::op_text, except that a WAIT on more than kLabelIds
// requests lists the first ones and the count ("WAIT(0;1;…;15;… 65535 ids)"), so that a
// diagnostic costs the same for any WAIT.
inline constexpr std::size_t kLabelIds = 16;
std::string op_label(const Program& program, int rank, const Op& op);

class Semantics {
 public:
  explicit Semantics(const Program& program) : p_(program) {}
  const Program& program() const { return p_; }

  // Route neighbours: Routes::kNone at an end of the microbatch's route, kOffRoute off it.
  int next_stage(int stage, int microbatch) const { return p_.routes().next(stage, microbatch); }
  int prev_stage(int stage, int microbatch) const { return p_.routes().prev(stage, microbatch); }
  bool first_stage(int stage, int microbatch) const {
    return prev_stage(stage, microbatch) == Routes::kNone;
  }
  bool last_stage(int stage, int microbatch) const {
    return next_stage(stage, microbatch) == Routes::kNone;
  }

  // The stage at the other end of a p2p op (SEND_F, RECV_B: next; RECV_F, SEND_B: previous);
  // negative when there is none.
  int peer_stage(const Op& op) const {
    const bool towards_next = op.kind == OpKind::SEND_F || op.kind == OpKind::RECV_B;
    return towards_next ? next_stage(op.stage, op.microbatch) : prev_stage(op.stage, op.microbatch);
  }
  // Rank of the peer stage; -1 when there is none.
  int peer_of(const Op& op) const {
    const int s = peer_stage(op);
    return s >= 0 ? p_.rank_of(s) : -1;
  }
  // The tensor a p2p op carries (call only when peer_stage(op) >= 0).
  TensorId tensor_of(const Op& op) const {
    const bool bwd = info(op.kind).backward;
    const std::int32_t producer = is_send(op.kind) ? op.stage : peer_stage(op);
    return {bwd, producer, op.microbatch};
  }
  // (stage, microbatch) cells: tables of per-cell and per-tensor state are indexed by them. Dense
  // (stage * microbatches + microbatch) when that grid is within a small multiple of the ops, as
  // for every generated schedule; otherwise only the cells the program touches (its ops' cells
  // and their route neighbours), sorted, so that a table is sized by the ops and not by the
  // largest microbatch id. Chosen on first use, so that constructing a Semantics stays O(1).
  std::size_t cell_count() const {
    if (mode_ == Mode::unknown) index_cells();
    return mode_ == Mode::dense ? dense_cells() : keys_->size();
  }
  // Call only for a cell the program touches (any cell when dense); throws std::logic_error else.
  std::size_t cell_index(int stage, int microbatch) const {
    if (mode_ == Mode::dense)
      return static_cast<std::size_t>(stage) * static_cast<std::size_t>(p_.microbatches()) +
             static_cast<std::size_t>(microbatch);
    return sparse_cell_index(stage, microbatch);
  }
  // Whether the cell has an index: always when dense; when sparse, only the cells the program
  // touches (a route neighbour's own neighbour may have none).
  bool has_cell(int stage, int microbatch) const;
  // The cell at an index, in increasing (stage, microbatch) order.
  std::pair<int, int> cell_at(std::size_t index) const;
  bool dense() const {
    if (mode_ == Mode::unknown) index_cells();
    return mode_ == Mode::dense;
  }

  // Index of a tensor in [0, tensor_count()): forward tensors first, then gradients, each by the
  // cell of its producer.
  std::size_t tensor_count() const { return 2 * cell_count(); }
  std::size_t tensor_index(const TensorId& t) const {
    const std::size_t c = cell_index(t.producer, t.microbatch);
    return t.backward ? cell_count() + c : c;
  }

  // --- data flow of a plain compute op (F, B, I, W); composite ops: apply to each part ---------
  // The tensor it reads from its neighbouring stage, on this rank or another: F the previous
  // stage's activation, B and I the next stage's gradient; none at the route's ends (W: none).
  std::optional<TensorId> input_tensor(const Op& op) const {
    if (op.kind == OpKind::F) {
      const int prev = prev_stage(op.stage, op.microbatch);
      if (prev >= 0) return TensorId{false, prev, op.microbatch};
    } else if (is_backward_input(op.kind)) {
      const int next = next_stage(op.stage, op.microbatch);
      if (next >= 0) return TensorId{true, next, op.microbatch};
    }
    return std::nullopt;
  }
  // The forward output a backward releases (whether it was sent or not): F(s, m)'s activation.
  std::optional<TensorId> released_output(const Op& op) const {
    if (!is_backward_input(op.kind) || last_stage(op.stage, op.microbatch)) return std::nullopt;
    return TensorId{false, op.stage, op.microbatch};
  }
  // The tensor it reads from another rank, with the receive that must bring it: F reads the
  // activation of the previous stage, B and I the gradient of the next one (none at the route's
  // ends, or when that stage lives on the same rank).
  std::optional<Op> input_recv(const Op& op) const {
    const int rank = p_.rank_of(op.stage);
    if (op.kind == OpKind::F) {
      const int prev = prev_stage(op.stage, op.microbatch);
      if (prev >= 0 && p_.rank_of(prev) != rank)
        return Op::comm(OpKind::RECV_F, op.stage, op.microbatch);
    } else if (is_backward_input(op.kind)) {
      const int next = next_stage(op.stage, op.microbatch);
      if (next >= 0 && p_.rank_of(next) != rank)
        return Op::comm(OpKind::RECV_B, op.stage, op.microbatch);
    }
    return std::nullopt;
  }
  // The send of its output, when the consumer lives on another rank.
  std::optional<Op> output_send(const Op& op) const {
    const int rank = p_.rank_of(op.stage);
    if (op.kind == OpKind::F) {
      const int next = next_stage(op.stage, op.microbatch);
      if (next >= 0 && p_.rank_of(next) != rank)
        return Op::comm(OpKind::SEND_F, op.stage, op.microbatch);
    } else if (is_backward_input(op.kind)) {
      const int prev = prev_stage(op.stage, op.microbatch);
      if (prev >= 0 && p_.rank_of(prev) != rank)
        return Op::comm(OpKind::SEND_B, op.stage, op.microbatch);
    }
    return std::nullopt;
  }
  // The stage on the same rank whose op must have run first: F after F of the previous stage, B/I
  // after the backward of the next stage. -1 when the neighbour is remote or absent.
  int local_producer_stage(const Op& op) const {
    const int rank = p_.rank_of(op.stage);
    int s = -1;
    if (op.kind == OpKind::F)
      s = prev_stage(op.stage, op.microbatch);
    else if (is_backward_input(op.kind))
      s = next_stage(op.stage, op.microbatch);
    return s >= 0 && p_.rank_of(s) == rank ? s : -1;
  }
  // The forward output a backward releases: its send buffer, when the output went to another
  // rank (Megatron frees it after the send; Gloo needs the send waited first).
  std::optional<Op> freed_send(const Op& op) const {
    if (!is_backward_input(op.kind)) return std::nullopt;
    return output_send(Op::compute(OpKind::F, op.stage, op.microbatch));
  }

  // What a plain compute op does to the activation stash of its (stage, microbatch): F takes it
  // when it starts; B releases it when it ends; I releases all but the part W needs, which W
  // then releases. A microbatch is in flight on a rank while it holds a stash there.
  enum class Stash : std::uint8_t { none, take, release, keep_weights, release_weights };
  static constexpr Stash stash_effect(OpKind kind) {
    switch (kind) {
      case OpKind::F:
        return Stash::take;
      case OpKind::B:
        return Stash::release;
      case OpKind::I:
        return Stash::keep_weights;
      case OpKind::W:
        return Stash::release_weights;
      default:
        return Stash::none;
    }
  }

  // Calls f(part) for each plain compute op a compute op stands for: itself, or a composite's
  // parts.
  template <typename Fn>
  void for_each_part(int rank, const Op& op, Fn&& f) const {
    if (!is_composite(op.kind)) {
      f(op);
      return;
    }
    for (const Op& part : p_.parts(rank, op)) f(part);
  }

 private:
  enum class Mode : std::uint8_t { unknown, dense, sparse };
  std::size_t dense_cells() const {
    return static_cast<std::size_t>(p_.stages()) * static_cast<std::size_t>(p_.microbatches());
  }
  std::size_t sparse_cell_index(int stage, int microbatch) const;
  void index_cells() const;

  const Program& p_;
  // Built on first use (a lowering makes one Semantics per rank and never asks); copies share it.
  mutable Mode mode_ = Mode::unknown;
  mutable std::shared_ptr<const std::vector<std::uint64_t>> keys_;  // sparse: sorted cells
};

}  // namespace ppsim::schedules
