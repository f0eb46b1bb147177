#pragma once
// One instruction of a rank's op list, and its PyTorch-pipelining action-string form.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ppsim::schedules {

// The order carries no meaning: every property of a kind comes from kOpKinds below.
enum class OpKind : std::uint8_t {
  F,
  B,
  I,
  W,
  OVERLAP_F_B,  // an F and a B of two microbatches run together (DualPipe); parts in the pool
  SEND_F,
  RECV_F,
  SEND_B,
  RECV_B,
  WAIT,
  UNSHARD,  // FSDP all-gather of a stage's parameters (parsed and carried; costs come later)
  RESHARD,
  REDUCE_GRAD,  // data-parallel gradient reduction of a stage
  GROUP_START,  // NCCL's ncclGroupStart / PyTorch's batch_isend_irecv: p2p ops up to the matching
  GROUP_END,    // GROUP_END launch together (comm.semantics nccl); no effect under mpi
};

enum class OpClass : std::uint8_t {
  compute,   // occupies the rank's compute unit
  p2p,       // point-to-point send or receive of one tensor
  wait,      // completes asynchronous requests
  resource,  // per-stage actions without a microbatch (UNSHARD, RESHARD, REDUCE_GRAD)
  group,     // GROUP_START / GROUP_END: no stage, no time
};

struct OpKindInfo {
  std::string_view name;  // action-string spelling
  OpClass cls;
  bool microbatch;  // the text form carries a microbatch number
  bool send, recv;
  bool backward;   // moves or computes a gradient flowing towards earlier stages
  bool composite;  // holds parts (other compute ops) in the rank's pool
};

inline constexpr OpKindInfo kOpKinds[] = {
    // name          class              mb     send   recv   bwd    composite
    {"F", OpClass::compute, true, false, false, false, false},
    {"B", OpClass::compute, true, false, false, true, false},
    {"I", OpClass::compute, true, false, false, true, false},
    {"W", OpClass::compute, true, false, false, false, false},
    {"OVERLAP_F_B", OpClass::compute, false, false, false, false, true},
    {"SEND_F", OpClass::p2p, true, true, false, false, false},
    {"RECV_F", OpClass::p2p, true, false, true, false, false},
    {"SEND_B", OpClass::p2p, true, true, false, true, false},
    {"RECV_B", OpClass::p2p, true, false, true, true, false},
    {"WAIT", OpClass::wait, false, false, false, false, false},
    {"UNSHARD", OpClass::resource, false, false, false, false, false},
    {"RESHARD", OpClass::resource, false, false, false, false, false},
    {"REDUCE_GRAD", OpClass::resource, false, false, false, false, false},
    {"GROUP_START", OpClass::group, false, false, false, false, false},
    {"GROUP_END", OpClass::group, false, false, false, false, false},
};
inline constexpr std::size_t kOpKindCount = std::size(kOpKinds);

constexpr const OpKindInfo& info(OpKind k) {
  return kOpKinds[static_cast<std::size_t>(k)];
}
constexpr bool is_compute(OpKind k) {
  return info(k).cls == OpClass::compute;
}
constexpr bool is_comm(OpKind k) {
  return info(k).cls == OpClass::p2p;
}
constexpr bool is_send(OpKind k) {
  return info(k).send;
}
constexpr bool is_recv(OpKind k) {
  return info(k).recv;
}
constexpr bool is_group_marker(OpKind k) {
  return info(k).cls == OpClass::group;
}
constexpr bool is_composite(OpKind k) {
  return info(k).composite;
}
// Ops that consume the gradient from the next stage (a full B or the input half I).
constexpr bool is_backward_input(OpKind k) {
  return k == OpKind::B || k == OpKind::I;
}
// F, B, I, W as 0..3 (columns of per-kind tables); -1 for every other kind.
constexpr int plain_compute_index(OpKind k) {
  switch (k) {
    case OpKind::F:
      return 0;
    case OpKind::B:
      return 1;
    case OpKind::I:
      return 2;
    case OpKind::W:
      return 3;
    default:
      return -1;
  }
}
// Kinds whose ops name a (stage, microbatch) pair.
constexpr bool has_microbatch(OpKind k) {
  return info(k).microbatch;
}
constexpr std::string_view to_string(OpKind kind) {
  return info(kind).name;
}

// 16 bytes: a P=256, M=4096 program holds tens of millions of these. Which fields are meaningful
// depends on the kind's class:
//   compute (not composite), p2p: stage, microbatch; p2p also async + request
//   resource:                     stage
//   group markers:                nothing
//   WAIT, composite:              list_begin + list_size (request ids / parts in the rank's pool)
struct Op {
  OpKind kind = OpKind::F;
  bool async = false;           // p2p only: posts and returns request `request`
  std::uint16_t list_size = 0;  // WAIT: request ids; composite: parts
  std::int32_t stage = 0;
  std::int32_t microbatch = 0;
  union {
    std::int32_t request = -1;  // async p2p: the request id (unique per rank)
    std::int32_t list_begin;    // WAIT, composite: offset into the rank's pool
  };

  static Op compute(OpKind k, int stage, int mb) {
    Op op;
    op.kind = k;
    op.stage = stage;
    op.microbatch = mb;
    return op;
  }
  static Op comm(OpKind k, int stage, int mb, int request = -1) {
    Op op = compute(k, stage, mb);
    op.async = request >= 0;
    op.request = request;
    return op;
  }
  static Op resource(OpKind k, int stage) { return compute(k, stage, 0); }
  static Op group(OpKind k) { return compute(k, 0, 0); }

  friend bool operator==(const Op& a, const Op& b) {
    return a.kind == b.kind && a.async == b.async && a.list_size == b.list_size &&
           a.stage == b.stage && a.microbatch == b.microbatch && a.request == b.request;
  }
};
static_assert(sizeof(Op) == 16);

// Text of an op that needs no pool: `2F0`, `1SEND_F3`, `1SEND_F3#7`, `0UNSHARD`. WAIT and
// composite ops need their rank's pool: see Program::op_text.
std::string op_text(const Op& op);

}  // namespace ppsim::schedules
