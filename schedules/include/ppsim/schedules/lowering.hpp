#pragma once
// Lowering: insert SEND/RECV/WAIT ops between the compute ops of a generated Program.
#include <string_view>

#include "ppsim/schedules/program.hpp"

namespace ppsim::schedules {

enum class CommStyle {
  blocking,    // recv right before the consumer, send right after the producer, both blocking
  async_send,  // forward sends async, waited before the rank's next forward; the rest blocking
  batched,     // Megatron pairs: send_forward+recv_backward and send_backward+recv_forward
               // posted together async and waited together; other transfers blocking
  async,       // everything async; recvs posted `prefetch` compute ops ahead, waited at use
};

struct LoweringOptions {
  CommStyle style = CommStyle::async;
  int prefetch = 1;  // async style: compute ops ahead of the consumer; kPrefetchAll = at start
  static constexpr int kPrefetchAll = -1;
};

std::string_view to_string(CommStyle style);
bool parse_comm_style(std::string_view text, CommStyle& out);

// `compute` holds compute ops only; the result has the same compute order plus comm ops.
Program lower(const Program& compute, const LoweringOptions& options);

}  // namespace ppsim::schedules
