#include "ppsim/search/improve.hpp"

#include <algorithm>
#include <chrono>
#include <random>

namespace ppsim::search {

using schedules::Op;
using schedules::OpKind;

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace {

// Moves the op at `from` to `to` on one rank's list, shifting those between.
void move_op(std::vector<Op>& list, std::size_t from, std::size_t to) {
  if (from < to)
    std::rotate(list.begin() + static_cast<std::ptrdiff_t>(from),
                list.begin() + static_cast<std::ptrdiff_t>(from) + 1,
                list.begin() + static_cast<std::ptrdiff_t>(to) + 1);
  else if (to < from)
    std::rotate(list.begin() + static_cast<std::ptrdiff_t>(to),
                list.begin() + static_cast<std::ptrdiff_t>(from),
                list.begin() + static_cast<std::ptrdiff_t>(from) + 1);
}

}  // namespace

Timing improve(const Instance& in, Orders& orders, const ImproveOptions& options) {
  Timing best = evaluate(in, orders);
  if (!best.complete || options.budget <= 0) return best;
  std::size_t ops = 0;
  for (const auto& l : orders) ops += l.size();
  if (ops < 2) return best;
  std::mt19937_64 rng(options.seed);
  const long long tries = options.budget / static_cast<long long>(ops);
  const int window = std::max(2, 2 * in.ranks);
  std::uniform_int_distribution<int> rank_of(0, in.ranks - 1);
  std::uniform_int_distribution<int> shift(1, window);
  for (long long k = 0; k < tries; ++k) {
    if (options.deadline > 0 && (k & 15) == 0 && steady_seconds() > options.deadline) break;
    auto& list = orders[static_cast<std::size_t>(rank_of(rng))];
    if (list.size() < 2) continue;
    std::uniform_int_distribution<std::size_t> at(0, list.size() - 1);
    std::size_t from = at(rng);
    // Mostly W, the op with slack to give: look for one near the drawn place.
    if (in.split && (rng() % 4) != 0)
      for (std::size_t d = 0; d < list.size() && list[from].kind != OpKind::W; ++d)
        from = (from + 1) % list.size();
    const int delta = (rng() % 2 ? 1 : -1) * shift(rng);
    const auto to = static_cast<std::size_t>(std::clamp<long long>(
        static_cast<long long>(from) + delta, 0, static_cast<long long>(list.size()) - 1));
    if (to == from) continue;
    // Each kind of op stays in microbatch order on its stage, as pipelines run them (and as the
    // exact model's bound assumes): no move past an op of the same kind and stage.
    bool passes = false;
    for (std::size_t i = std::min(from, to); i <= std::max(from, to) && !passes; ++i)
      passes = i != from && list[i].kind == list[from].kind && list[i].stage == list[from].stage;
    if (passes) continue;
    move_op(list, from, to);
    const Timing t = evaluate(in, orders);
    if (t.complete && t.fits(options.limit) &&
        (t.makespan < best.makespan ||
         (t.makespan == best.makespan && t.max_peak() <= best.max_peak())))
      best = t;
    else
      move_op(list, to, from);
  }
  return best;
}

}  // namespace ppsim::search
