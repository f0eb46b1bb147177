// async: every transfer asynchronous. Receives are posted `prefetch` compute ops ahead of their
// consumer and waited right before it; sends are waited before the buffer they hold is released.
#include <array>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ppsim/schedules/lowering.hpp"

namespace ppsim::schedules::lowerings {

namespace {

// Request of the unwaited SEND_F of each (stage, microbatch) of one rank: a table indexed by
// (chunk, microbatch) when that grid is within a small multiple of the rank's ops (every generated
// schedule), else a hash map, so that memory follows the ops and not the largest microbatch id.
class PendingSends {
 public:
  explicit PendingSends(const RankLowering& l)
      : program_(l.semantics().program()), rank_(l.rank()) {
    const auto M = static_cast<std::size_t>(program_.microbatches());
    const auto cells = static_cast<std::size_t>(program_.chunks_on(l.rank())) * M;
    if (cells <= 4 * l.compute().size() + 64) table_.assign(cells, kNone);
  }
  void put(const Op& c, std::int32_t id) {
    if (in_table(c))
      table_[slot(c)] = id;
    else
      map_[key(c)] = id;
  }
  // Appends the request for (c.stage, c.microbatch), if any, to `ids` and forgets it.
  void take(const Op& c, std::vector<std::int32_t>& ids) {
    if (!in_table(c)) {
      if (auto it = map_.find(key(c)); it != map_.end()) {
        ids.push_back(it->second);
        map_.erase(it);
      }
      return;
    }
    std::int32_t& id = table_[slot(c)];
    if (id != kNone) ids.push_back(std::exchange(id, kNone));
  }
  void take_all(std::vector<std::int32_t>& ids) const {  // the caller sorts
    for (const auto& [k, id] : map_) ids.push_back(id);
    for (const std::int32_t id : table_)
      if (id != kNone) ids.push_back(id);
  }

 private:
  static constexpr std::int32_t kNone = -1;
  static long long key(const Op& c) {
    return (static_cast<long long>(c.stage) << 32) | static_cast<unsigned>(c.microbatch);
  }
  // Ops not yet validated may name any stage or microbatch: those go to the map.
  bool in_table(const Op& c) const {
    return !table_.empty() && c.stage >= 0 && c.stage < program_.stages() && c.microbatch >= 0 &&
           c.microbatch < program_.microbatches() && program_.rank_of(c.stage) == rank_ &&
           slot(c) < table_.size();
  }
  std::size_t slot(const Op& c) const {
    return static_cast<std::size_t>(program_.place(c.stage).chunk) *
               static_cast<std::size_t>(program_.microbatches()) +
           static_cast<std::size_t>(c.microbatch);
  }
  const Program& program_;
  int rank_;
  std::vector<std::int32_t> table_;
  std::unordered_map<long long, std::int32_t> map_;
};

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
  PendingSends pending_send_f(l);
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
      pending_send_f.take(part, ids);
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
          pending_send_f.put(part, id);
        else
          pending_send_b.push_back(id);
      }
    });
  }
  pending_send_f.take_all(ids);
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
