#include "ppsim/schedules/op.hpp"

#include <fmt/format.h>

namespace ppsim::schedules {

std::string op_text(const Op& op) {
  const OpKindInfo& k = info(op.kind);
  if (k.cls == OpClass::wait || k.cls == OpClass::group || k.composite) return std::string(k.name);
  if (!k.microbatch) return fmt::format("{}{}", op.stage, k.name);
  if (op.async) return fmt::format("{}{}{}#{}", op.stage, k.name, op.microbatch, op.request);
  return fmt::format("{}{}{}", op.stage, k.name, op.microbatch);
}

}  // namespace ppsim::schedules
