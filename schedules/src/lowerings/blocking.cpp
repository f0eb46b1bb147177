// blocking: each receive right before its consumer, each send right after its producer, all
// blocking (rendezvous). With 1F1B this is the classic deadlock of the last two ranks.
#include "ppsim/schedules/lowering.hpp"

namespace ppsim::schedules::lowerings {

namespace {
void lower_rank(RankLowering& l) {
  for (const Op& c : l.compute()) {
    for (const Op& r : l.recvs_needed(c)) l.emit(r);
    l.emit(c);
    for (const Op& s : l.sends_after(c)) l.emit(s);
  }
}
}  // namespace

void register_blocking(LoweringRegistry& registry) {
  registry.add({"blocking",
                {},
                "receive right before the consumer, send right after the producer, both blocking",
                {},
                lower_rank});
}

}  // namespace ppsim::schedules::lowerings
