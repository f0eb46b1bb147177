#include "ppsim/search/greedy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <queue>
#include <tuple>

#include "links.hpp"

namespace ppsim::search {

using schedules::Op;
using schedules::OpKind;

std::string Policy::describe() const {
  std::string out = fmt::format(
      "warm-up {}, {} first, fill {}",
      extra_warmup < 0 ? std::string("by memory") : fmt::format("1F1B+{}", extra_warmup),
      forward_first ? "F" : "B", fill_fraction);
  if (max_pending_w >= 0) out += fmt::format(", W cap {}", max_pending_w);
  if (!later_stage_first) out += ", earlier stage first";
  return out;
}

namespace {

constexpr double kUnknown = -1.0;

// The scheduler's state; one per call.
class ListScheduler {
 public:
  ListScheduler(const Instance& in, const Policy& policy, std::int64_t limit)
      : in_(in), policy_(policy), S_(in.stages()), M_(in.microbatches) {
    limit_ = limit > 0 ? limit : std::numeric_limits<std::int64_t>::max() / 4;
    const auto P = static_cast<std::size_t>(in.ranks);
    lanes_.resize(P);
    for (int s = 0; s < S_; ++s) lanes_[static_cast<std::size_t>(in.rank_of(s))].push_back({s});
    fin_.assign(2 * static_cast<std::size_t>(S_) * M_, kUnknown);
    arr_.assign(fin_.size(), kUnknown);
    mem_ = in.static_bytes;
    free_at_.assign(P, 0.0);
    grad_sent_.assign(P, 0.0);
    entry_need_.assign(P, 0);
    cap_.assign(P, 0);
    orders_.resize(P);
    for (std::size_t r = 0; r < P; ++r) {
      const auto& l = lanes_[r];
      if (l.empty()) continue;
      for (const auto& lane : l)
        entry_need_[r] += in.memory[static_cast<std::size_t>(lane.stage)].activation_bytes;
      // 1F1B keeps as many microbatches as there are stages from here to the end, per chunk.
      const int base = (S_ - l.front().stage + in.chunks - 1) / in.chunks;
      cap_[r] =
          policy.extra_warmup < 0 ? std::numeric_limits<int>::max() : base + policy.extra_warmup;
    }
  }

  std::optional<Orders> run() {
    for (int r = 0; r < in_.ranks; ++r) wake(0.0, r);
    while (!events_.empty()) {
      const auto [t, seq, r] = events_.top();
      events_.pop();
      (void)seq;
      if (free_at_[static_cast<std::size_t>(r)] > t) continue;  // busy: its own end wakes it
      decide(t, r);
    }
    for (std::size_t r = 0; r < lanes_.size(); ++r)
      for (const auto& lane : lanes_[r])
        if (lane.nb < M_ || (in_.split && lane.nw < M_)) return std::nullopt;
    return std::move(orders_);
  }

 private:
  struct Lane {
    int stage;
    int nf = 0, nb = 0, nw = 0;
  };

  std::size_t id(int k, int s, int m) const {
    return (static_cast<std::size_t>(k) * S_ + s) * M_ + m;
  }
  // When the output of op (k, from, m) is there for rank r: its end on r, else its transfer's end.
  double arrival(int k, int from, int m, int r) const {
    const double f = fin_[id(k, from, m)];
    if (f < 0) return kUnknown;
    return in_.rank_of(from) != r ? arr_[id(k, from, m)] : f;
  }
  void wake(double t, int r) { events_.emplace(t, seq_++, r); }

  double f_ready(const Lane& l, int r) const {
    if (l.nf >= M_) return kUnknown;
    return l.stage == 0 ? 0.0 : arrival(0, l.stage - 1, l.nf, r);
  }
  // As timing.cpp: the gradient's arrival, this stage's output sent, the last gradient sent.
  double b_ready(const Lane& l, int r) const {
    if (l.nb >= M_ || l.nf <= l.nb) return kUnknown;
    const double in =
        l.stage == S_ - 1 ? arrival(0, l.stage, l.nb, r) : arrival(1, l.stage + 1, l.nb, r);
    if (in < 0) return kUnknown;
    double ready = std::max(in, grad_sent_[static_cast<std::size_t>(r)]);
    if (l.stage + 1 < S_ && in_.rank_of(l.stage + 1) != r)
      ready = std::max(ready, arr_[id(0, l.stage, l.nb)]);
    return ready;
  }
  std::int64_t act(int s) const { return in_.memory[static_cast<std::size_t>(s)].activation_bytes; }
  // Memory an F of lane `c` may take: an entry (first lane) reserves the stashes the microbatch
  // will need on this rank's later lanes, so that every admitted microbatch can finish its
  // forward here whatever else arrives; later lanes use their reservation.
  bool admissible(std::size_t r, std::size_t c) const {
    const auto& l = lanes_[r];
    if (c > 0) return true;
    if (l[0].nf - l[0].nb >= cap_[r]) return false;
    std::int64_t committed = mem_[r];
    for (std::size_t k = 1; k < l.size(); ++k) committed += (l[0].nf - l[k].nf) * act(l[k].stage);
    return committed + entry_need_[r] <= limit_;
  }

  void run_op(double t, int r, Lane& lane, OpKind kind) {
    const auto ur = static_cast<std::size_t>(r);
    const int s = lane.stage;
    const int m = kind == OpKind::F ? lane.nf++ : kind == OpKind::W ? lane.nw++ : lane.nb++;
    const double end = t + in_.duration(kind, s);
    orders_[ur].push_back(Op::compute(kind, s, m));
    mem_[ur] += in_.memory_delta(kind, s);
    free_at_[ur] = end;
    wake(end, r);
    if (kind == OpKind::W) return;
    // The output goes to the next stage (F) or the previous one (I/B): on another rank, over
    // the link there, which wakes that rank when it arrives.
    const int k = kind == OpKind::F ? 0 : 1;
    const int next = kind == OpKind::F ? s + 1 : s - 1;
    fin_[id(k, s, m)] = end;
    if (next < 0 || next >= S_ || in_.rank_of(next) == r) return;
    const double at = links_.send(r, in_.rank_of(next), end, in_.hop);
    arr_[id(k, s, m)] = at;
    wake(at, in_.rank_of(next));
    if (k == 1) grad_sent_[ur] = at;
  }

  // The lane whose W has waited longest (most pending), or none.
  Lane* pending_w(std::size_t r, int* count) {
    Lane* best = nullptr;
    *count = 0;
    if (!in_.split) return nullptr;
    for (auto& l : lanes_[r]) {
      *count += l.nb - l.nw;
      if (l.nb > l.nw && (!best || l.nb - l.nw > best->nb - best->nw)) best = &l;
    }
    return best;
  }

  void decide(double t, int r) {
    const auto ur = static_cast<std::size_t>(r);
    auto& lanes = lanes_[ur];
    const OpKind back = in_.split ? OpKind::I : OpKind::B;
    Lane *ready_b = nullptr, *ready_f = nullptr, *blocked_f = nullptr;
    double next = std::numeric_limits<double>::infinity();
    bool forwards_left = false, backwards_left = false;
    for (std::size_t c = 0; c < lanes.size(); ++c) {
      Lane& l = lanes[c];
      forwards_left = forwards_left || l.nf < M_;
      backwards_left = backwards_left || l.nb < M_;
      const double b = b_ready(l, r);
      if (b >= 0 && b <= t) {
        if (!ready_b ||
            (policy_.later_stage_first ? l.stage > ready_b->stage : l.stage < ready_b->stage))
          ready_b = &l;
      } else if (b > t) {
        next = std::min(next, b);
      }
      const double f = f_ready(l, r);
      if (f < 0) continue;
      const bool ok = admissible(ur, c);
      if (f <= t) {
        if (!ok)
          blocked_f = &l;
        else if (!ready_f || l.stage > ready_f->stage)
          ready_f = &l;  // deeper first: frees sooner
      } else if (ok) {
        next = std::min(next, f);
      }
    }
    int waiting_w = 0;
    Lane* w = pending_w(ur, &waiting_w);
    if (w && policy_.max_pending_w >= 0 && waiting_w > policy_.max_pending_w &&
        (ready_b || ready_f))
      return run_op(t, r, *w, OpKind::W);
    const bool warming = lanes[0].nf - lanes[0].nb < cap_[ur];
    if (ready_f && policy_.forward_first && warming) return run_op(t, r, *ready_f, OpKind::F);
    if (ready_b) return run_op(t, r, *ready_b, back);
    if (ready_f) return run_op(t, r, *ready_f, OpKind::F);
    if (!w) {  // nothing to run: wait for the next input known, or for the event that tells it
      if (next < std::numeric_limits<double>::infinity()) wake(next, r);
      return;
    }
    if (blocked_f || (!forwards_left && !backwards_left)) return run_op(t, r, *w, OpKind::W);
    const double gap = next - t;  // infinite when no input is on its way yet
    if (gap >= policy_.fill_fraction * in_.duration(OpKind::W, w->stage))
      return run_op(t, r, *w, OpKind::W);
    if (next < std::numeric_limits<double>::infinity()) wake(next, r);
  }

  const Instance& in_;
  const Policy policy_;
  const int S_, M_;
  std::int64_t limit_;
  std::vector<std::vector<Lane>> lanes_;
  std::vector<double> fin_;  // end of F (slot 0) and I/B (slot 1) of each (stage, microbatch)
  std::vector<double> arr_;  // ... and when it reaches the next rank, if it goes to another
  detail::Links links_{in_.ranks};
  std::vector<std::int64_t> mem_;
  std::vector<double> free_at_;
  std::vector<double> grad_sent_;         // per rank: when its last gradient's send is done
  std::vector<std::int64_t> entry_need_;  // per rank: one microbatch's stashes on all its lanes
  std::vector<int> cap_;                  // per rank: forwards in flight allowed
  Orders orders_;
  using Event = std::tuple<double, std::uint64_t, int>;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::uint64_t seq_ = 0;
};

}  // namespace

std::optional<Orders> greedy(const Instance& in, const Policy& policy, std::int64_t limit) {
  ListScheduler scheduler(in, policy, limit);
  return scheduler.run();
}

}  // namespace ppsim::search
