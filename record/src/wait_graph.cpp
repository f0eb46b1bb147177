#include "ppsim/record/wait_graph.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace ppsim::record {

namespace {
record::BlockedOp blocked_op(const WaitEdge& e) {
  return {e.rank, e.position, e.op, e.peer, e.waiting_for};
}

// The rank -> peer graph in compressed rows; each row keeps the order of `edges` and holds one
// entry per peer (a WAIT on two requests to one peer is one edge), naming the first such edge.
struct Graph {
  std::vector<std::size_t> begin;  // row r is [begin[r], begin[r + 1])
  std::vector<int> to;
  std::vector<std::size_t> edge;      // index into edges
  std::vector<std::size_t> entry_of;  // edges -> row entry (edges with a peer)

  Graph(int ranks, const std::vector<WaitEdge>& edges)
      : begin(static_cast<std::size_t>(ranks) + 1) {
    for (const auto& e : edges)
      if (e.peer >= 0) ++begin[static_cast<std::size_t>(e.rank) + 1];
    for (std::size_t r = 0; r < static_cast<std::size_t>(ranks); ++r) begin[r + 1] += begin[r];
    std::vector<std::size_t> fill(begin.begin(), begin.end() - 1);
    to.resize(begin.back());
    edge.resize(begin.back());
    for (std::size_t i = 0; i < edges.size(); ++i) {
      const auto& e = edges[i];
      if (e.peer < 0) continue;
      const auto r = static_cast<std::size_t>(e.rank);
      to[fill[r]] = e.peer;
      edge[fill[r]++] = i;
    }
    // Merge repeated peers within a row, keeping the first; entry_of[i] is edge i's row entry.
    entry_of.assign(edges.size(), 0);
    std::vector<std::size_t> row_of(static_cast<std::size_t>(ranks), begin.size()),
        at(row_of.size());
    std::vector<std::size_t> new_begin(begin.size());
    std::size_t out = 0;
    for (std::size_t r = 0; r + 1 < begin.size(); ++r) {
      new_begin[r] = out;
      for (std::size_t k = begin[r]; k < begin[r + 1]; ++k) {
        const auto peer = static_cast<std::size_t>(to[k]);
        if (row_of[peer] == r) {
          entry_of[edge[k]] = at[peer];
          continue;
        }
        row_of[peer] = r;
        at[peer] = out;
        entry_of[edge[k]] = out;
        to[out] = to[k];
        edge[out++] = edge[k];
      }
    }
    new_begin.back() = out;
    begin = std::move(new_begin);
    to.resize(out);
    edge.resize(out);
  }
  std::size_t size() const { return begin.size() - 1; }
};

// Strongly connected components (Tarjan, with an explicit stack so that a wait chain as long as
// the ranks cannot overflow the call stack). comp[v] is v's component.
std::vector<int> components(const Graph& g) {
  const std::size_t n = g.size();
  constexpr int kNone = -1;
  std::vector<int> index(n, kNone), low(n, 0), comp(n, kNone);
  std::vector<int> stack;
  std::vector<std::pair<int, std::size_t>> call;  // (vertex, next row entry to look at)
  int next_index = 0, next_comp = 0;
  for (std::size_t root = 0; root < n; ++root) {
    if (index[root] != kNone) continue;
    call.emplace_back(static_cast<int>(root), g.begin[root]);
    index[root] = low[root] = next_index++;
    stack.push_back(static_cast<int>(root));
    while (!call.empty()) {
      auto& [v, k] = call.back();
      const auto uv = static_cast<std::size_t>(v);
      if (k < g.begin[uv + 1]) {
        const auto w = static_cast<std::size_t>(g.to[k++]);
        if (index[w] == kNone) {
          index[w] = low[w] = next_index++;
          stack.push_back(static_cast<int>(w));
          call.emplace_back(static_cast<int>(w), g.begin[w]);
        } else if (comp[w] == kNone) {
          low[uv] = std::min(low[uv], index[w]);
        }
        continue;
      }
      if (low[uv] == index[uv]) {
        int w;
        do {
          w = stack.back();
          stack.pop_back();
          comp[static_cast<std::size_t>(w)] = next_comp;
        } while (w != v);
        ++next_comp;
      }
      const int done = v;
      call.pop_back();
      if (!call.empty()) {
        const auto parent = static_cast<std::size_t>(call.back().first);
        low[parent] = std::min(low[parent], low[static_cast<std::size_t>(done)]);
      }
    }
  }
  return comp;
}

// The first circuit through s that a depth-first search in row order finds, staying inside s's
// component: the circuit Hawick-James reports first for s, as a list of row entries.
std::vector<std::size_t> first_circuit(const Graph& g, const std::vector<int>& comp, int s,
                                       std::vector<char>& visited) {
  std::vector<std::pair<int, std::size_t>> path;  // (vertex, next row entry); entry-1 taken
  const auto us = static_cast<std::size_t>(s);
  path.emplace_back(s, g.begin[us]);
  visited[us] = 1;
  while (!path.empty()) {
    auto& [v, k] = path.back();
    const auto uv = static_cast<std::size_t>(v);
    if (k == g.begin[uv + 1]) {
      path.pop_back();
      continue;
    }
    const std::size_t taken = k++;
    const int w = g.to[taken];
    const auto uw = static_cast<std::size_t>(w);
    if (w == s) {
      std::vector<std::size_t> entries;
      for (const auto& [u, next] : path) entries.push_back(next - 1);
      return entries;
    }
    if (comp[uw] != comp[us] || visited[uw]) continue;
    visited[uw] = 1;
    path.emplace_back(w, g.begin[uw]);
  }
  return {};
}
}  // namespace

record::Deadlock find_deadlock(int ranks, const std::vector<WaitEdge>& edges,
                               const std::vector<bool>& finished) {
  const Graph g(ranks, edges);
  const auto comp = components(g);

  // One circuit per component that has one (more than one rank, or a rank waiting on itself),
  // started at its smallest rank; components in the order of their smallest rank.
  std::vector<std::uint8_t> cyclic(g.size(), 0);
  std::vector<int> size(g.size(), 0);
  for (std::size_t v = 0; v < g.size(); ++v) ++size[static_cast<std::size_t>(comp[v])];
  for (std::size_t v = 0; v < g.size(); ++v)
    for (std::size_t k = g.begin[v]; k < g.begin[v + 1]; ++k)
      if (static_cast<std::size_t>(g.to[k]) == v) cyclic[static_cast<std::size_t>(comp[v])] = 1;
  for (std::size_t c = 0; c < g.size(); ++c)
    if (size[c] > 1) cyclic[c] = 1;

  record::Deadlock d;
  std::vector<char> in_cycle(edges.size(), 0);  // edges on a reported circuit
  std::vector<char> first_seen(g.size(), 0), visited(g.size(), 0), unlisted(g.size(), 0);
  for (std::size_t v = 0; v < g.size(); ++v) {
    const auto c = static_cast<std::size_t>(comp[v]);
    if (!cyclic[c] || first_seen[c]) continue;
    first_seen[c] = 1;
    ++d.cycles_total;
    if (d.cycles.size() == record::Deadlock::kMaxCycles) {
      unlisted[c] = 1;
      continue;
    }
    std::vector<record::BlockedOp> ops;
    for (const std::size_t k : first_circuit(g, comp, static_cast<int>(v), visited)) {
      in_cycle[g.edge[k]] = 1;
      ops.push_back(blocked_op(edges[g.edge[k]]));
    }
    d.cycles.push_back(std::move(ops));
  }

  // The rest, one entry per (rank, peer): an edge sharing its pair with a circuit edge is part of
  // that circuit, and so is an edge inside a component whose cycle was not listed.
  std::vector<char> pair_in_cycle(g.to.size(), 0), pair_seen(g.to.size(), 0);
  for (std::size_t k = 0; k < g.to.size(); ++k) pair_in_cycle[k] = in_cycle[g.edge[k]];
  std::vector<char> seen_none(g.size(), 0);  // edges without a peer, once per rank
  for (std::size_t i = 0; i < edges.size(); ++i) {
    const auto& e = edges[i];
    if (e.peer < 0) {
      if (seen_none[static_cast<std::size_t>(e.rank)]) continue;
      seen_none[static_cast<std::size_t>(e.rank)] = 1;
      d.unmatched.push_back(blocked_op(e));
      continue;
    }
    const std::size_t k = g.entry_of[i];
    if (pair_in_cycle[k] || pair_seen[k]) continue;
    const auto c = static_cast<std::size_t>(comp[static_cast<std::size_t>(e.rank)]);
    if (unlisted[c] &&
        comp[static_cast<std::size_t>(e.peer)] == comp[static_cast<std::size_t>(e.rank)])
      continue;  // on a cycle the report counts but does not list
    pair_seen[k] = 1;
    if (finished[static_cast<std::size_t>(e.peer)])
      d.unmatched.push_back(blocked_op(e));
    else
      d.blocked.push_back(blocked_op(e));
  }
  return d;
}

}  // namespace ppsim::record
