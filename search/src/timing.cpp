#include "ppsim/search/timing.hpp"

#include <algorithm>
#include <deque>

#include "links.hpp"

namespace ppsim::search {

using schedules::Op;
using schedules::OpKind;

std::int64_t Timing::max_peak() const {
  std::int64_t m = 0;
  for (auto p : peak) m = std::max(m, p);
  return m;
}

namespace {

// Slots of the op table: F, then I or B (the op a backward neighbour waits for), then W.
int slot(OpKind k) {
  return k == OpKind::F ? 0 : k == OpKind::W ? 2 : 1;
}

}  // namespace

Timing evaluate(const Instance& in, const Orders& orders) {
  const int P = in.ranks, S = in.stages(), M = in.microbatches;
  auto id = [S, M](int k, int s, int m) { return (static_cast<std::size_t>(k) * S + s) * M + m; };
  std::vector<double> finish(3 * static_cast<std::size_t>(S) * M, -1.0);
  std::vector<int> waiter(finish.size(), -1);
  std::vector<std::size_t> pos(static_cast<std::size_t>(P), 0);
  std::vector<double> free(static_cast<std::size_t>(P), 0.0);
  std::vector<double> grad_sent(static_cast<std::size_t>(P), 0.0);  // last gradient's send done
  std::vector<double> arrive(finish.size(), -1.0);  // at its consumer, for ops sent to another rank
  detail::Links links(P);
  Timing t;
  t.peak = in.static_bytes;
  std::vector<std::int64_t> mem = in.static_bytes;
  double first = -1, last = 0;
  std::deque<int> ready;
  for (int r = 0; r < P; ++r) ready.push_back(r);
  while (!ready.empty()) {
    const int r = ready.front();
    ready.pop_front();
    const auto ur = static_cast<std::size_t>(r);
    const auto& list = orders[ur];
    while (pos[ur] < list.size()) {
      const Op& op = list[pos[ur]];
      const int s = op.stage, m = op.microbatch;
      // The op this one reads: its input (F, I/B) or its own I (W).
      std::size_t dep = finish.size();
      if (op.kind == OpKind::F) {
        if (s > 0) dep = id(0, s - 1, m);
      } else if (op.kind == OpKind::W) {
        dep = id(1, s, m);
      } else {
        dep = s == S - 1 ? id(0, s, m) : id(1, s + 1, m);
      }
      double start = free[ur];
      if (dep < finish.size()) {
        if (finish[dep] < 0) {
          waiter[dep] = r;
          break;
        }
        const int from = op.kind == OpKind::F                   ? s - 1
                         : (s == S - 1 || op.kind == OpKind::W) ? s
                                                                : s + 1;
        start = std::max(start, in.rank_of(from) != r ? arrive[dep] : finish[dep]);
      }
      const bool backward = op.kind != OpKind::F && op.kind != OpKind::W;
      if (backward) {
        // A backward needs this stage's own forward, on this rank; it frees that forward's
        // output, so the output's send must be done; and it reuses the gradient buffer of the
        // rank's previous backward, whose send must be done too (the async lowering's waits).
        const double f = finish[id(0, s, m)];
        if (f < 0) {
          waiter[id(0, s, m)] = r;
          break;
        }
        if (s + 1 < S && in.rank_of(s + 1) != r) start = std::max(start, arrive[id(0, s, m)]);
        start = std::max(start, grad_sent[ur]);
      }
      const double end = start + in.duration(op.kind, s);
      const std::size_t me = id(slot(op.kind), s, m);
      finish[me] = end;
      free[ur] = end;
      if (first < 0 || start < first) first = start;
      last = std::max(last, end);
      // Its output's transfer, on the link to the consumer's rank.
      const int to = op.kind == OpKind::F ? (s + 1 < S ? in.rank_of(s + 1) : r)
                     : backward           ? (s > 0 ? in.rank_of(s - 1) : r)
                                          : r;
      if (to != r) arrive[me] = links.send(r, to, end, in.hop);
      if (backward && to != r) grad_sent[ur] = arrive[me];
      mem[ur] += in.memory_delta(op.kind, s);
      t.peak[ur] = std::max(t.peak[ur], mem[ur]);
      ++pos[ur];
      if (waiter[me] >= 0) {
        ready.push_back(waiter[me]);
        waiter[me] = -1;
      }
    }
  }
  t.complete = true;
  for (int r = 0; r < P; ++r)
    t.complete = t.complete &&
                 pos[static_cast<std::size_t>(r)] == orders[static_cast<std::size_t>(r)].size();
  t.makespan = first < 0 ? 0 : last - first;
  return t;
}

}  // namespace ppsim::search
