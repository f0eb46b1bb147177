#pragma once
// One instruction of a rank's op list, and its PyTorch-pipelining action-string form.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ppsim::schedules {

enum class OpKind : std::uint8_t { F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, WAIT };

inline constexpr bool is_compute(OpKind k) {
  return k <= OpKind::W;
}
inline constexpr bool is_comm(OpKind k) {
  return k >= OpKind::SEND_F && k <= OpKind::RECV_B;
}
inline constexpr bool is_send(OpKind k) {
  return k == OpKind::SEND_F || k == OpKind::SEND_B;
}
inline constexpr bool is_recv(OpKind k) {
  return k == OpKind::RECV_F || k == OpKind::RECV_B;
}
// Ops that consume the gradient from the next stage (a full B or the input half I).
inline constexpr bool is_backward_input(OpKind k) {
  return k == OpKind::B || k == OpKind::I;
}

std::string_view to_string(OpKind kind);

// Kept at 16 bytes: a P=256, M=4096 program holds tens of millions of these.
struct Op {
  OpKind kind = OpKind::F;
  bool async = false;            // comm ops only: posts and returns a request
  std::uint16_t wait_count = 0;  // WAIT only: number of request ids
  std::int32_t stage = 0;        // virtual stage (unused by WAIT)
  std::int32_t microbatch = 0;   // (unused by WAIT)
  std::int32_t request = -1;     // async comm: request id; WAIT: offset into the rank's id pool

  static Op compute(OpKind k, int stage, int mb) { return Op{k, false, 0, stage, mb, -1}; }
  static Op comm(OpKind k, int stage, int mb, int request = -1) {
    return Op{k, request >= 0, 0, stage, mb, request};
  }
  friend bool operator==(const Op&, const Op&) = default;
};
static_assert(sizeof(Op) == 16);

// Which tensor a comm op carries: the activation crossing boundary b (stage b -> b+1) or the
// gradient crossing it backwards (stage b+1 -> b). SEND_F(s) and RECV_F(s+1) name the same tensor.
struct TensorId {
  bool backward = false;
  std::int32_t boundary = 0;
  std::int32_t microbatch = 0;
  friend bool operator==(const TensorId&, const TensorId&) = default;
};
inline TensorId tensor_of(const Op& op) {
  switch (op.kind) {
    case OpKind::SEND_F:
      return {false, op.stage, op.microbatch};
    case OpKind::RECV_F:
      return {false, op.stage - 1, op.microbatch};
    case OpKind::SEND_B:
      return {true, op.stage - 1, op.microbatch};
    case OpKind::RECV_B:
      return {true, op.stage, op.microbatch};
    default:
      return {false, -1, op.microbatch};
  }
}

// Text of a non-WAIT op: `2F0`, `1SEND_F3`, async `1SEND_F3#7`. WAIT needs its ids: see Program.
std::string op_text(const Op& op);

}  // namespace ppsim::schedules
