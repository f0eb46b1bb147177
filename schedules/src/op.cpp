#include "ppsim/schedules/op.hpp"

#include <fmt/format.h>

namespace ppsim::schedules {

std::string_view to_string(OpKind kind) {
  switch (kind) {
    case OpKind::F:
      return "F";
    case OpKind::B:
      return "B";
    case OpKind::I:
      return "I";
    case OpKind::W:
      return "W";
    case OpKind::SEND_F:
      return "SEND_F";
    case OpKind::RECV_F:
      return "RECV_F";
    case OpKind::SEND_B:
      return "SEND_B";
    case OpKind::RECV_B:
      return "RECV_B";
    case OpKind::WAIT:
      return "WAIT";
  }
  return "?";
}

std::string op_text(const Op& op) {
  if (op.kind == OpKind::WAIT) return "WAIT";
  if (op.async)
    return fmt::format("{}{}{}#{}", op.stage, to_string(op.kind), op.microbatch, op.request);
  return fmt::format("{}{}{}", op.stage, to_string(op.kind), op.microbatch);
}

}  // namespace ppsim::schedules
