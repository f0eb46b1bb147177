#include "ppsim/search/exact.hpp"

#include <fmt/format.h>
#include <glpk.h>

#include <algorithm>
#include <bitset>
#include <cmath>
#include <memory>
#include <mutex>
#include <numeric>

#include "ppsim/search/improve.hpp"
#include "ppsim/search/timing.hpp"

namespace ppsim::search {

using schedules::Op;
using schedules::OpKind;

namespace {

struct Node {
  OpKind kind;
  int stage, mb, rank;
  double duration;
  double send_lag;  // a backward whose gradient crosses ranks: its send must end first
  std::int64_t delta;
};

struct Problem {
  std::vector<Node> nodes;
  std::vector<std::bitset<kExactMaxOps>> reach;  // reach[a][b]: a must precede b
  struct Edge {
    int from, to;
    double lag;
  };
  std::vector<Edge> edges;
  struct Pair {
    int a, b, column;
  };
  std::vector<Pair> pairs;  // open orders on one rank: y = 1 means a first
};

Problem build(const Instance& in) {
  Problem p;
  const int S = in.stages(), M = in.microbatches;
  const OpKind back = in.split ? OpKind::I : OpKind::B;
  std::vector<OpKind> kinds = {OpKind::F, back};
  if (in.split) kinds.push_back(OpKind::W);
  auto index = [&](int k, int s, int m) { return (k * S + s) * M + m; };
  for (std::size_t k = 0; k < kinds.size(); ++k)
    for (int s = 0; s < S; ++s)
      for (int m = 0; m < M; ++m) {
        const int r = in.rank_of(s);
        const bool sends = kinds[k] == back && s > 0 && in.rank_of(s - 1) != r;
        p.nodes.push_back({kinds[k], s, m, r, in.duration(kinds[k], s), sends ? in.hop : 0.0,
                           in.memory_delta(kinds[k], s)});
      }
  auto edge = [&](int a, int b, double lag) { p.edges.push_back({a, b, lag}); };
  for (int s = 0; s < S; ++s)
    for (int m = 0; m < M; ++m) {
      const int f = index(0, s, m), b = index(1, s, m);
      const double hop_down = s + 1 < S && in.rank_of(s + 1) != in.rank_of(s) ? in.hop : 0.0;
      if (s + 1 < S) edge(f, index(0, s + 1, m), hop_down);
      if (s + 1 < S) edge(index(1, s + 1, m), b, hop_down);
      edge(f, b, 0.0);
      if (in.split) edge(b, index(2, s, m), 0.0);
      // Each kind in microbatch order on its stage.
      if (m + 1 < M)
        for (std::size_t k = 0; k < kinds.size(); ++k)
          edge(index(static_cast<int>(k), s, m), index(static_cast<int>(k), s, m + 1), 0.0);
    }
  const int n = static_cast<int>(p.nodes.size());
  p.reach.assign(static_cast<std::size_t>(n), {});
  // Nodes are not in topological order (backwards run down the stages): close by iteration.
  for (const auto& e : p.edges)
    p.reach[static_cast<std::size_t>(e.from)].set(static_cast<std::size_t>(e.to));
  for (bool changed = true; changed;) {
    changed = false;
    for (int a = 0; a < n; ++a) {
      auto next = p.reach[static_cast<std::size_t>(a)];
      for (int b = 0; b < n; ++b)
        if (p.reach[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)])
          next |= p.reach[static_cast<std::size_t>(b)];
      if (next != p.reach[static_cast<std::size_t>(a)]) {
        p.reach[static_cast<std::size_t>(a)] = next;
        changed = true;
      }
    }
  }
  return p;
}

struct Callback {
  long long nodes = 0, node_limit = 0;
  double bound = -1;
  double deadline = 0;
  bool stopped = false, timed_out = false;
};

void on_event(glp_tree* tree, void* info) {
  auto* cb = static_cast<Callback*>(info);
  // Every call, not only at node selection: one node's LP can take long on a hard instance.
  if (cb->deadline > 0 && !cb->timed_out && steady_seconds() > cb->deadline) {
    cb->stopped = cb->timed_out = true;
    glp_ios_terminate(tree);
  }
  switch (glp_ios_reason(tree)) {
    case GLP_ISELECT:
      if (++cb->nodes > cb->node_limit) {
        cb->stopped = true;
        glp_ios_terminate(tree);
      }
      break;
    default:
      break;
  }
  if (const int best = glp_ios_best_node(tree); best > 0)
    cb->bound = glp_ios_node_bound(tree, best);
}

// The time op `b` may start after op `a` on one rank: a's duration, and for two backwards also
// the send of a's gradient (the async lowering waits it before the next backward).
double gap_after(const Problem& p, int a, int b) {
  const auto& na = p.nodes[static_cast<std::size_t>(a)];
  const auto& nb = p.nodes[static_cast<std::size_t>(b)];
  const bool both_back =
      na.kind != OpKind::F && na.kind != OpKind::W && nb.kind != OpKind::F && nb.kind != OpKind::W;
  return na.duration + (both_back ? na.send_lag : 0.0);
}

// The program under construction: columns x_0..x_{n-1} (starts), C (makespan), then one binary
// per open pair; rows gathered as triplets for glp_load_matrix.
struct Mip {
  std::unique_ptr<glp_prob, decltype(&glp_delete_prob)> lp{glp_create_prob(), glp_delete_prob};
  std::vector<int> ia{0}, ja{0};
  std::vector<double> ar{0.0};
  int n = 0, makespan = 0;

  static int x(int node) { return node + 1; }
  int add_row(int type, double lo, double hi) {
    const int r = glp_add_rows(lp.get(), 1);
    glp_set_row_bnds(lp.get(), r, type, lo, hi);
    return r;
  }
  void term(int r, int col, double coef) {
    ia.push_back(r);
    ja.push_back(col);
    ar.push_back(coef);
  }
  void at_least(std::initializer_list<std::pair<int, double>> terms, double lo) {
    const int r = add_row(GLP_LO, lo, 0.0);
    for (const auto& [col, coef] : terms) term(r, col, coef);
  }
};

// Columns, the dependencies, the makespan and one op at a time per rank.
void add_schedule(Mip& m, Problem& p, double big) {
  const int n = m.n;
  glp_set_obj_dir(m.lp.get(), GLP_MIN);
  glp_add_cols(m.lp.get(), n + 1);
  for (int i = 1; i <= n + 1; ++i) glp_set_col_bnds(m.lp.get(), i, GLP_LO, 0.0, 0.0);
  m.makespan = n + 1;
  glp_set_obj_coef(m.lp.get(), m.makespan, 1.0);
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) {
      const auto ua = static_cast<std::size_t>(a), ub = static_cast<std::size_t>(b);
      if (p.nodes[ua].rank != p.nodes[ub].rank || p.reach[ua][ub] || p.reach[ub][ua]) continue;
      const int col = glp_add_cols(m.lp.get(), 1);
      glp_set_col_kind(m.lp.get(), col, GLP_BV);
      p.pairs.push_back({a, b, col});
    }
  for (const auto& e : p.edges)
    m.at_least({{Mip::x(e.to), 1.0}, {Mip::x(e.from), -1.0}},
               p.nodes[static_cast<std::size_t>(e.from)].duration + e.lag);
  for (int v = 0; v < n; ++v)
    m.at_least({{m.makespan, 1.0}, {Mip::x(v), -1.0}},
               p.nodes[static_cast<std::size_t>(v)].duration);
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b && p.reach[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)] &&
          p.nodes[static_cast<std::size_t>(a)].rank == p.nodes[static_cast<std::size_t>(b)].rank &&
          gap_after(p, a, b) > p.nodes[static_cast<std::size_t>(a)].duration)
        m.at_least({{Mip::x(b), 1.0}, {Mip::x(a), -1.0}}, gap_after(p, a, b));
  for (const auto& pr : p.pairs) {  // y = 1: a first
    m.at_least({{Mip::x(pr.b), 1.0}, {Mip::x(pr.a), -1.0}, {pr.column, -big}},
               gap_after(p, pr.a, pr.b) - big);
    m.at_least({{Mip::x(pr.a), 1.0}, {Mip::x(pr.b), -1.0}, {pr.column, big}},
               gap_after(p, pr.b, pr.a));
  }
}

// Memory at each forward: static + every op before it on its rank + itself <= limit.
void add_memory(Mip& m, const Instance& in, const Problem& p, std::int64_t limit) {
  const int n = m.n;
  std::vector<std::vector<const Problem::Pair*>> pairs_of(static_cast<std::size_t>(n));
  for (const auto& pr : p.pairs) {
    pairs_of[static_cast<std::size_t>(pr.a)].push_back(&pr);
    pairs_of[static_cast<std::size_t>(pr.b)].push_back(&pr);
  }
  for (int f = 0; f < n; ++f) {
    const auto& nf = p.nodes[static_cast<std::size_t>(f)];
    if (nf.kind != OpKind::F) continue;
    double fixed =
        static_cast<double>(in.static_bytes[static_cast<std::size_t>(nf.rank)] + nf.delta);
    for (int o = 0; o < n; ++o)
      if (o != f && p.nodes[static_cast<std::size_t>(o)].rank == nf.rank &&
          p.reach[static_cast<std::size_t>(o)][static_cast<std::size_t>(f)])
        fixed += static_cast<double>(p.nodes[static_cast<std::size_t>(o)].delta);
    // Open pairs add delta_o x [o before f]: y when o is the pair's a, 1 - y when it is its b.
    const int r = m.add_row(GLP_UP, 0.0, 0.0);
    for (const auto* pr : pairs_of[static_cast<std::size_t>(f)]) {
      const int o = pr->a == f ? pr->b : pr->a;
      const auto d = static_cast<double>(p.nodes[static_cast<std::size_t>(o)].delta);
      if (d == 0) continue;
      m.term(r, pr->column, pr->a == o ? d : -d);
      if (pr->a != o) fixed += d;
    }
    glp_set_row_bnds(m.lp.get(), r, GLP_UP, 0.0, static_cast<double>(limit) - fixed);
  }
}

// Each rank's ops by their start in the solution.
Orders orders_of(const Mip& m, const Instance& in, const Problem& p) {
  std::vector<std::vector<std::pair<double, int>>> by_rank(static_cast<std::size_t>(in.ranks));
  for (int v = 0; v < m.n; ++v)
    by_rank[static_cast<std::size_t>(p.nodes[static_cast<std::size_t>(v)].rank)].push_back(
        {glp_mip_col_val(m.lp.get(), Mip::x(v)), v});
  std::vector<std::size_t> depth(static_cast<std::size_t>(m.n), 0);
  for (int a = 0; a < m.n; ++a)
    for (int b = 0; b < m.n; ++b)
      if (p.reach[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)])
        ++depth[static_cast<std::size_t>(b)];
  Orders out(static_cast<std::size_t>(in.ranks));
  for (std::size_t r = 0; r < by_rank.size(); ++r) {
    auto& l = by_rank[r];
    // Ties (ops of zero duration) in a topological order: by how many ops precede each.
    std::sort(l.begin(), l.end(), [&](const auto& a, const auto& b) {
      if (a.first != b.first) return a.first < b.first;
      const auto da = depth[static_cast<std::size_t>(a.second)];
      const auto db = depth[static_cast<std::size_t>(b.second)];
      return da != db ? da < db : a.second < b.second;
    });
    for (const auto& [t, v] : l) {
      const auto& nd = p.nodes[static_cast<std::size_t>(v)];
      out[r].push_back(Op::compute(nd.kind, nd.stage, nd.mb));
    }
  }
  return out;
}

// One solve, under exact()'s lock; every GLPK object it makes is gone when it returns.
std::optional<ExactResult> solve(const Instance& in, const ExactOptions& options) {
  Problem p = build(in);
  double big = 1;  // longer than any schedule: the disjunctions' big M
  for (const auto& v : p.nodes) big += v.duration + v.send_lag + in.hop;
  glp_term_out(GLP_OFF);
  Mip m;
  m.n = static_cast<int>(p.nodes.size());
  add_schedule(m, p, big);
  if (options.limit > 0) add_memory(m, in, p, options.limit);
  glp_load_matrix(m.lp.get(), static_cast<int>(m.ia.size()) - 1, m.ia.data(), m.ja.data(),
                  m.ar.data());

  Callback cb;
  cb.node_limit = options.node_limit;
  cb.deadline = options.deadline;
  glp_iocp parm;
  glp_init_iocp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  parm.presolve = GLP_ON;  // (so no incumbent is passed in: the callback sees presolved columns)
  parm.cb_func = on_event;
  parm.cb_info = &cb;
  parm.mip_gap = 0.0;
  if (options.deadline > 0)  // GLPK's own clock too, for the presolve and the root LP
    parm.tm_lim =
        static_cast<int>(std::clamp((options.deadline - steady_seconds()) * 1000.0, 1.0, 2.0e9));
  const int rc = glp_intopt(m.lp.get(), &parm);
  const int status = glp_mip_status(m.lp.get());
  cb.timed_out = cb.timed_out || rc == GLP_ETMLIM;
  if ((rc != 0 && rc != GLP_ESTOP && rc != GLP_EMIPGAP && rc != GLP_ETMLIM) ||
      (status != GLP_OPT && status != GLP_FEAS))
    return std::nullopt;
  ExactResult out;
  out.cut_short = cb.timed_out;
  out.orders = orders_of(m, in, p);
  const Timing t = evaluate(in, out.orders);
  if (!t.complete) return std::nullopt;
  out.makespan = t.makespan;
  // The model leaves out that transfers on one link queue (they only do when a hop is longer
  // than the ops between them): optimal only where the schedule runs as the model timed it.
  out.optimal = status == GLP_OPT && !cb.stopped && !cb.timed_out &&
                t.makespan <= glp_mip_obj_val(m.lp.get()) * (1 + 1e-12);
  const double objective = glp_mip_obj_val(m.lp.get());
  out.bound = out.optimal ? objective : std::min(objective, std::max(0.0, cb.bound));
  out.status = out.optimal     ? "optimal"
               : out.cut_short ? fmt::format("stopped by --time-limit after {} nodes", cb.nodes)
               : out.bound > 0
                   ? fmt::format("gap {:.2f}% after {} nodes", (out.makespan / out.bound - 1) * 100,
                                 options.node_limit)
                   : fmt::format("no bound after {} nodes", options.node_limit);
  return out;
}

}  // namespace

std::optional<ExactResult> exact(const Instance& in, const ExactOptions& options) {
  const int ops = (in.split ? 3 : 2) * in.stages() * in.microbatches;
  if (ops > kExactMaxOps || ops == 0) return std::nullopt;
  // One solve at a time: GLPK keeps its environment in thread-local storage only where it was
  // built so; the models are small, so nothing is lost.
  static std::mutex glpk;
  const auto expired = [&] { return options.deadline > 0 && steady_seconds() > options.deadline; };
  if (expired()) return std::nullopt;
  const std::lock_guard<std::mutex> lock(glpk);
  if (expired()) return std::nullopt;  // (waited for another solve)
  auto out = solve(in, options);
  // GLPK's environment lives in this thread's storage: a search's worker thread that ends would
  // leave it unreachable (LeakSanitizer reports it), so it goes with the solve.
  glp_free_env();
  return out;
}

}  // namespace ppsim::search
