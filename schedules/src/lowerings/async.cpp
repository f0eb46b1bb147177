// async: every transfer asynchronous. Receives are posted `prefetch` compute ops ahead of their
// consumer and waited right before it; sends are waited before the buffer they hold is released.
#include <array>
#include <unordered_map>

#include "ppsim/schedules/lowering.hpp"

namespace ppsim::schedules::lowerings {

namespace {
constexpr std::int64_t kPrefetchAll = -1;

long long key(const Op& c) {
  return (static_cast<long long>(c.stage) << 32) | static_cast<unsigned>(c.microbatch);
}

void lower_rank(RankLowering& l) {
  const Semantics& sem = l.semantics();
  const std::int64_t prefetch = l.params().get("prefetch");
  const auto& c = l.compute();
  const std::size_t n = c.size();
  // Requests of the receives each compute op needs: at most one per part, -1 for none.
  std::vector<std::array<std::int32_t, 2>> recv_requests(n, {-1, -1});
  std::size_t next_post = 0;
  auto post_slot = [&](std::size_t consumer) -> std::size_t {
    if (prefetch == kPrefetchAll) return 0;
    return consumer > static_cast<std::size_t>(prefetch)
               ? consumer - static_cast<std::size_t>(prefetch)
               : 0;
  };
  std::unordered_map<long long, std::int32_t> pending_send_f;  // (stage, mb) -> request
  std::vector<std::int32_t> pending_send_b;
  std::vector<std::int32_t> ids;
  for (std::size_t i = 0; i < n; ++i) {
    for (; next_post < n && post_slot(next_post) <= i; ++next_post) {
      std::size_t k = 0;
      for (const Op& r : l.recvs_needed(c[next_post])) recv_requests[next_post][k++] = l.post(r);
    }
    for (const std::int32_t id : recv_requests[i])
      if (id >= 0) ids.push_back(id);
    bool backward = false;
    sem.for_each_part(l.rank(), c[i], [&](const Op& part) {
      if (!is_backward_input(part.kind)) return;
      backward = true;
      // The backward frees the forward output, so its send must be done.
      if (auto it = pending_send_f.find(key(part)); it != pending_send_f.end()) {
        ids.push_back(it->second);
        pending_send_f.erase(it);
      }
    });
    if (backward) {  // it also reuses the gradient buffer of the previous backward
      ids.insert(ids.end(), pending_send_b.begin(), pending_send_b.end());
      pending_send_b.clear();
    }
    l.wait(ids);
    l.emit(c[i]);
    sem.for_each_part(l.rank(), c[i], [&](const Op& part) {
      if (auto s = sem.output_send(part)) {
        const std::int32_t id = l.post(*s);
        if (s->kind == OpKind::SEND_F)
          pending_send_f[key(part)] = id;
        else
          pending_send_b.push_back(id);
      }
    });
  }
  for (const auto& [k, id] : pending_send_f) ids.push_back(id);
  ids.insert(ids.end(), pending_send_b.begin(), pending_send_b.end());
  l.wait(ids);
}
}  // namespace

void register_async(LoweringRegistry& registry) {
  registry.add({"async",
                {},
                "everything asynchronous; receives posted `prefetch` compute ops ahead of their "
                "consumer and waited at use",
                {ParamSpec("prefetch",
                           "compute ops ahead of the consumer a receive is posted (\"all\": at "
                           "the start)")
                     .with_default(1)
                     .or_word("all", kPrefetchAll)},
                lower_rank});
}

}  // namespace ppsim::schedules::lowerings
