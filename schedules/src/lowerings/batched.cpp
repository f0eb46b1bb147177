// batched: Megatron's send_forward_recv_backward / send_backward_recv_forward. The send after one
// compute op and the receive for the next one go out together (posted async, waited together)
// when they run in opposite directions; every other transfer is a single blocking one.
#include <optional>

#include "ppsim/schedules/lowering.hpp"

namespace ppsim::schedules::lowerings {

namespace {
void lower_rank(RankLowering& l) {
  const auto& c = l.compute();
  bool next_recv_done = false;
  std::vector<std::int32_t> ids;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (!next_recv_done)
      for (const Op& r : l.recvs_needed(c[i])) l.emit(r);
    next_recv_done = false;
    l.emit(c[i]);
    const auto sends = l.sends_after(c[i]);
    if (sends.empty()) continue;
    const auto recvs = i + 1 < c.size() ? l.recvs_needed(c[i + 1]) : OpsOfOne{};
    const Op& s = sends.front();
    const bool pair = sends.size() == 1 && recvs.size() == 1 &&
                      ((s.kind == OpKind::SEND_F && recvs[0].kind == OpKind::RECV_B) ||
                       (s.kind == OpKind::SEND_B && recvs[0].kind == OpKind::RECV_F));
    if (pair) {
      l.begin_batch();  // Megatron's batch_isend_irecv: one NCCL group
      ids.push_back(l.post(s));
      ids.push_back(l.post(recvs[0]));
      l.end_batch();
      l.wait(ids);
      next_recv_done = true;
    } else {
      for (const Op& one : sends) l.emit(one);
    }
  }
}
}  // namespace

void register_batched(LoweringRegistry& registry) {
  registry.add({"batched",
                {},
                "Megatron pairs: send_forward_recv_backward / send_backward_recv_forward posted "
                "together and waited together; other transfers blocking",
                {},
                lower_rank});
}

}  // namespace ppsim::schedules::lowerings
