// async-send: forward sends asynchronous, waited before the rank's next forward (or before the
// backward that frees their buffer); everything else blocking.
#include <unordered_map>

#include "ppsim/schedules/lowering.hpp"

namespace ppsim::schedules::lowerings {

namespace {
long long key(const Op& c) {
  return (static_cast<long long>(c.stage) << 32) | static_cast<unsigned>(c.microbatch);
}

void lower_rank(RankLowering& l) {
  const Semantics& sem = l.semantics();
  std::unordered_map<long long, std::int32_t> pending;  // (stage, mb) of the forward -> request
  std::vector<std::int32_t> ids;
  for (const Op& c : l.compute()) {
    sem.for_each_part(l.rank(), c, [&](const Op& part) {
      if (part.kind == OpKind::F) {
        for (const auto& [k, id] : pending) ids.push_back(id);
        pending.clear();
      } else if (is_backward_input(part.kind)) {
        if (auto it = pending.find(key(part)); it != pending.end()) {
          ids.push_back(it->second);
          pending.erase(it);
        }
      }
    });
    l.wait(ids);
    for (const Op& r : l.recvs_needed(c)) l.emit(r);
    l.emit(c);
    sem.for_each_part(l.rank(), c, [&](const Op& part) {
      if (auto s = sem.output_send(part)) {
        if (s->kind == OpKind::SEND_F)
          pending[key(part)] = l.post(*s);
        else
          l.emit(*s);
      }
    });
  }
  for (const auto& [k, id] : pending) ids.push_back(id);
  l.wait(ids);
}
}  // namespace

void register_async_send(LoweringRegistry& registry) {
  registry.add({"async-send",
                {},
                "forward sends asynchronous, waited before the next forward; the rest blocking",
                {},
                lower_rank});
}

}  // namespace ppsim::schedules::lowerings
