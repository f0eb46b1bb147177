#include "deadlock.hpp"

#include <fmt/format.h>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/hawick_circuits.hpp>
#include <set>

namespace ppsim::sim {

namespace {
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;

struct CycleCollector {
  std::vector<std::vector<int>>* cycles;
  template <typename Path, typename G>
  void cycle(const Path& path, const G&) {
    if (cycles->size() < 256) cycles->emplace_back(path.begin(), path.end());
  }
};

record::BlockedOp blocked_op(const WaitEdge& e) {
  return {e.rank, e.position, e.op, e.peer, e.waiting_for};
}
}  // namespace

record::Deadlock find_deadlock(int ranks, const std::vector<WaitEdge>& edges,
                               const std::vector<bool>& finished) {
  Graph g(static_cast<std::size_t>(ranks));
  std::set<std::pair<int, int>> added;  // a WAIT on two requests to one peer is one edge
  for (const auto& e : edges)
    if (e.peer >= 0 && added.insert({e.rank, e.peer}).second)
      boost::add_edge(static_cast<std::size_t>(e.rank), static_cast<std::size_t>(e.peer), g);
  std::vector<std::vector<int>> cycles;
  boost::hawick_unique_circuits(g, CycleCollector{&cycles});

  record::Deadlock d;
  std::set<std::pair<int, int>> cycle_edges;
  for (const auto& cyc : cycles) {
    std::vector<record::BlockedOp> ops;
    for (std::size_t i = 0; i < cyc.size(); ++i) {
      const int from = cyc[i], to = cyc[(i + 1) % cyc.size()];
      cycle_edges.insert({from, to});
      for (const auto& e : edges) {
        if (e.rank == from && e.peer == to) {
          ops.push_back(blocked_op(e));
          break;
        }
      }
    }
    d.cycles.push_back(std::move(ops));
  }
  std::set<std::pair<int, int>> seen;
  for (const auto& e : edges) {
    if (cycle_edges.count({e.rank, e.peer}) || !seen.insert({e.rank, e.peer}).second) continue;
    if (e.peer < 0 || finished[static_cast<std::size_t>(e.peer)])
      d.unmatched.push_back(blocked_op(e));
    else
      d.blocked.push_back(blocked_op(e));
  }
  return d;
}

}  // namespace ppsim::sim
