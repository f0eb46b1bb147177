#pragma once
// The hazards only a run can show (internal to sim/), found by the engine as it runs. Hazards
// visible in program order are validation's (schedules::validate).
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "ppsim/schedules/diagnostic.hpp"
#include "ppsim/schedules/program.hpp"
#include "ppsim/schedules/semantics.hpp"
#include "state.hpp"

namespace ppsim::sim::engine {

class Hazards {
 public:
  Hazards(const schedules::Program& p, const schedules::Semantics& sem) : p_(p), sem_(sem) {}

  // message_order_mismatch: under fifo matching, send `s` (op `so`) met receive `r` (op `ro`)
  // though they move different tensors.
  void message_order(const Endpoint& s, const schedules::Op& so, const Endpoint& r,
                     const schedules::Op& ro, double t) {
    if (errors_.size() >= kMaxDiagnostics || sem_.tensor_of(so) == sem_.tensor_of(ro)) return;
    report("message_order_mismatch", r.rank, r.pos, &ro, t,
           fmt::format("receives the message of {} on rank {}: under fifo matching (NCCL) the "
                       "wrong tensor would be delivered silently",
                       p_.op_text(s.rank, so), s.rank));
  }

  std::vector<schedules::Diagnostic> take() { return std::move(errors_); }

  static constexpr std::size_t kMaxDiagnostics = 1000;  // checked before a message is formatted

 private:
  // `op`: the op at `pos` (null when pos < 0); `time` < 0: the problem is not tied to a moment
  // (found after the run).
  void report(std::string kind, int rank, int pos, const schedules::Op* op, double time,
              std::string message) {
    if (errors_.size() >= kMaxDiagnostics) return;
    std::string text = op ? schedules::op_label(p_, rank, *op) : "";
    std::string when = time >= 0 ? fmt::format(" at t={}", time) : "";
    errors_.push_back({std::move(kind), rank, pos, text,
                       fmt::format("rank {} op {} ({}){}: {}", rank, pos, text, when, message),
                       false});
  }

  const schedules::Program& p_;
  const schedules::Semantics& sem_;
  std::vector<schedules::Diagnostic> errors_;
};

}  // namespace ppsim::sim::engine
