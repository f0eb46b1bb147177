#include "deadlock.hpp"

#include <algorithm>
#include <string>

namespace ppsim::sim::engine {

using schedules::Op;

record::Deadlock analyze_deadlock(const StuckRun& run) {
  const auto& p = run.program;
  const int ranks = static_cast<int>(run.ranks.size());
  const Streams* streams = run.streams;
  auto ep = [&](std::int32_t id) -> const Endpoint& {
    return run.eps[static_cast<std::size_t>(id)];
  };
  std::vector<record::WaitEdge> edges;
  std::vector<bool> finished(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    const RankState& rs = run.ranks[static_cast<std::size_t>(r)];
    finished[static_cast<std::size_t>(r)] = rs.block == Block::done;
    if (rs.block != Block::endpoint && rs.block != Block::wait) continue;
    const Op& op = rs.ops[rs.pc];
    const std::string text = schedules::op_label(p, r, op);
    const int pos = static_cast<int>(rs.pc);
    auto op_of = [&](const Endpoint& e) -> const Op& { return rs.ops[e.pos]; };
    // An op queued behind a kernel waits on that kernel's ops not yet complete.
    auto awaits = [&](std::int32_t id, std::string waiting_for) {
      const Endpoint& e = ep(id);
      const Op& pending = op_of(e);
      if (!streams || e.running || streams->kernel_of(id) < 0) {
        edges.push_back({r, pos, text, run.sem.peer_of(pending), std::move(waiting_for)});
        return;
      }
      const auto& head =
          streams->kernel(streams->head(streams->kernel(streams->kernel_of(id)).stream));
      for (const std::int32_t b : streams->members(head)) {
        if (done_time(ep(b)) != kNever) continue;
        const Op& blocker = op_of(ep(b));
        edges.push_back({r, pos, text, run.sem.peer_of(blocker),
                         streams->model().queued_text(r, pending, blocker)});
      }
    };
    if (rs.block == Block::endpoint) {
      awaits(rs.blocked_ep, "");
      continue;
    }
    const auto requests = p.wait_ids(r, op);
    // A partner the WAIT awaits itself has its own edge.
    auto awaited_here = [&](std::int32_t id) {
      return std::any_of(requests.begin(), requests.end(),
                         [&](std::int32_t q) { return request_endpoint(rs, r, q) == id; });
    };
    for (const std::int32_t request : requests) {
      const std::int32_t id = request_endpoint(rs, r, request);
      if (id == kRetired) continue;  // waited before, complete
      const Endpoint& e = ep(id);
      const Op& awaited = op_of(e);
      if (done_time(e) != kNever) {
        // Done, but under nccl its kernel may not be: the WAIT waits on the kernel's other ops.
        if (!streams || streams->kernel_of(id) < 0) continue;
        const auto& k = streams->kernel(streams->kernel_of(id));
        if (k.remaining == 0) continue;
        for (const std::int32_t b : streams->members(k)) {
          if (done_time(ep(b)) != kNever || awaited_here(b)) continue;
          const Op& partner = op_of(ep(b));
          edges.push_back({r, pos, text, run.sem.peer_of(partner),
                           streams->model().partner_text(r, awaited, partner)});
        }
        continue;
      }
      awaits(id, p.op_text(r, awaited));
    }
  }
  return record::find_deadlock(ranks, edges, finished);
}

}  // namespace ppsim::sim::engine
