#include "layout.hpp"

#include <algorithm>
#include <limits>

#include "ppsim/base/blocks.hpp"
#include "ppsim/schedules/rank_blocks.hpp"

namespace ppsim::sim::engine {

std::size_t lay_out_ranks(const schedules::Program& p, std::vector<RankState>& ranks,
                          std::vector<std::int32_t>& request_table) {
  const int R = p.ranks();
  ranks.resize(static_cast<std::size_t>(R));
  // Request ids up to a small multiple of the rank's ops (lowering numbers them 0..n-1) are
  // looked up in one table, each rank a slice of it on huge pages: per-rank tables grown by
  // doubling cost a copy and twice the page faults, and TLB misses on every lookup.
  // Each rank's comm ops and request ids are counted on several threads (a pass over every op),
  // then laid out in rank order.
  std::vector<std::size_t> comm_ops(static_cast<std::size_t>(R));
  std::vector<std::int32_t> dense_ids(static_cast<std::size_t>(R));
  base::for_rank_blocks(schedules::rank_blocks(p, 0), [&](std::size_t, int first, int end) {
    for (int r = first; r < end; ++r) {
      const auto& ops = p.ops(r);
      const auto limit = static_cast<std::int32_t>(
          std::min<std::size_t>(4 * ops.size() + 64, std::numeric_limits<std::int32_t>::max()));
      std::size_t comm = 0;
      std::int32_t dense = 0;  // one more than the largest request id below the limit
      for (const schedules::Op& op : ops) {
        if (!schedules::is_comm(op.kind)) continue;
        ++comm;
        if (op.async && op.request >= 0 && op.request < limit)
          dense = std::max(dense, op.request + 1);
      }
      comm_ops[static_cast<std::size_t>(r)] = comm;
      dense_ids[static_cast<std::size_t>(r)] = dense;
    }
  });
  std::size_t n_eps = 0, n_requests = 0;
  std::vector<std::size_t> request_base(static_cast<std::size_t>(R));
  for (int r = 0; r < R; ++r) {
    RankState& rs = ranks[static_cast<std::size_t>(r)];
    rs.ep_base = static_cast<std::int32_t>(n_eps);
    const auto& ops = p.ops(r);
    rs.ops = ops.data();
    rs.n_ops = ops.size();
    n_eps += comm_ops[static_cast<std::size_t>(r)];
    if (n_eps >= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
      throw SimulationError("too many communication ops");
    // Ids in [dense, limit) are never posted: a WAIT on one finds it in neither place.
    rs.dense_limit = dense_ids[static_cast<std::size_t>(r)];
    request_base[static_cast<std::size_t>(r)] = n_requests;
    n_requests += static_cast<std::size_t>(rs.dense_limit);
  }
  base::assign_huge(request_table, n_requests, kNoEndpoint);
  for (int r = 0; r < R; ++r)
    ranks[static_cast<std::size_t>(r)].request_ep =
        request_table.data() + request_base[static_cast<std::size_t>(r)];
  return n_eps;
}

}  // namespace ppsim::sim::engine
