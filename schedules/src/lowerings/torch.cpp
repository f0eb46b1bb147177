// torch: PyTorch pipelining's lowering of a compute_only schedule (_add_send_recv), then its
// runtime's waits. All ranks are walked together, one time step per round in rank order: a rank
// runs its next action once its input is on the rank (a receive already placed there, or the
// producing stage's op run on the same rank); the action is followed by the SEND of its output,
// and the matching RECV is appended to the receiving rank at that moment. A blank step only takes
// its turn. Then every SEND/RECV is made asynchronous, each receive waited right before its
// consumer and all sends at the end (torch_runtime). docs/INTEROP.md.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <queue>
#include <set>
#include <unordered_set>

#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/lowering.hpp"
#include "ppsim/schedules/torch_csv.hpp"

namespace ppsim::schedules::lowerings {

namespace {

std::uint64_t key(OpKind kind, int stage, int mb) {
  return (static_cast<std::uint64_t>(kind) << 60) | (static_cast<std::uint64_t>(stage) << 30) |
         static_cast<std::uint64_t>(mb);
}
std::uint64_t key(const Op& op) {
  return key(op.kind, op.stage, op.microbatch);
}

// One rank's actions in step order: an op index, or -1 for an idle step.
std::vector<std::int64_t> slots_of(const Program& compute, int rank,
                                   const std::vector<std::vector<std::int32_t>>& steps) {
  const auto& ops = compute.ops(rank);
  std::vector<std::int64_t> slots;
  const auto r = static_cast<std::size_t>(rank);
  if (r < steps.size() && steps[r].size() == ops.size()) {
    std::int32_t at = 0;
    for (std::size_t k = 0; k < ops.size(); ++k) {
      for (; at < steps[r][k]; ++at) slots.push_back(-1);
      slots.push_back(static_cast<std::int64_t>(k));
      at = std::max(at, steps[r][k]) + 1;
    }
  } else {
    for (std::size_t k = 0; k < ops.size(); ++k) slots.push_back(static_cast<std::int64_t>(k));
  }
  return slots;
}

// _merge_bw: an I followed by the W of the same stage and microbatch (blank steps between them
// skipped) becomes one B. Like PyTorch's, it drops the blank steps.
Program merge_bw(const Program& in, std::vector<std::vector<std::int32_t>>& steps) {
  Program out(in.microbatches(), in.placement(), in.routes());
  for (int r = 0; r < in.ranks(); ++r) {
    const auto& ops = in.ops(r);
    for (std::size_t k = 0; k < ops.size(); ++k) {
      const Op& op = ops[k];
      if (op.kind == OpKind::I && k + 1 < ops.size() && ops[k + 1].kind == OpKind::W &&
          ops[k + 1].stage == op.stage && ops[k + 1].microbatch == op.microbatch) {
        out.push(r, Op::compute(OpKind::B, op.stage, op.microbatch));
        ++k;
      } else if (is_composite(op.kind)) {
        out.push_composite(r, op.kind, in.parts(r, op));
      } else {
        out.push(r, op);
      }
    }
  }
  steps.clear();
  return out;
}

// The stages a rank computes on from op `i` on, in order of first use, as PyTorch's
// _add_unshard_reshard looks ahead: the first `count` of them, or one more when the count is
// reached at the first part of an OVERLAP_F_B whose second part is a new stage too.
class StagesAhead {
 public:
  StagesAhead(const Program& p, int rank) {
    const auto& ops = p.ops(rank);
    for (std::size_t k = 0; k < ops.size(); ++k) {
      int part = 0;
      auto add = [&](const Op& x) {
        uses_[x.stage].push_back({static_cast<std::int64_t>(k), part++});
      };
      if (is_composite(ops[k].kind))
        for (const Op& x : p.parts(rank, ops[k])) add(x);
      else
        add(ops[k]);
    }
    for (const auto& [stage, list] : uses_) next_.emplace(stage, 0);
  }
  // Call with i = 0, 1, 2, ... in turn.
  std::vector<int> at(std::int64_t i, std::size_t count) {
    std::vector<std::pair<std::pair<std::int64_t, int>, int>> ahead;  // ((op, part), stage)
    for (const auto& [stage, list] : uses_) {
      std::size_t& n = next_[stage];
      while (n < list.size() && list[n].first < i) ++n;
      if (n < list.size()) ahead.push_back({list[n], stage});
    }
    std::sort(ahead.begin(), ahead.end());
    std::size_t n = std::min(count, ahead.size());
    // A composite's parts are taken together before the count is checked.
    if (n == count && n > 0 && n < ahead.size() && ahead[n - 1].first.second == 0 &&
        ahead[n].first == std::pair<std::int64_t, int>{ahead[n - 1].first.first, 1})
      ++n;
    std::vector<int> out(n);
    for (std::size_t k = 0; k < n; ++k) out[k] = ahead[k].second;
    return out;
  }

 private:
  std::map<int, std::vector<std::pair<std::int64_t, int>>> uses_;
  std::map<int, std::size_t> next_;
};

// What PyTorch's runtime does to a compute-only list before _add_send_recv
// (_prepare_schedule_with_comms): UNSHARD the next 3 stages to be used before each action and
// RESHARD the others (_add_unshard_reshard; evicted in ascending stage order where Python iterates
// a set), and a REDUCE_GRAD after the last W or B of each stage (_add_reduce_grad). Blank steps
// are dropped, as those passes drop them.
Program add_runtime_actions(const Program& in, std::vector<std::vector<std::int32_t>>& steps) {
  constexpr std::size_t kMaxActiveStages = 3;
  Program out(in.microbatches(), in.placement(), in.routes());
  for (int r = 0; r < in.ranks(); ++r) {
    const auto& ops = in.ops(r);
    StagesAhead ahead(in, r);
    std::set<int> active;
    std::map<int, int> backwards;  // W and B done per stage
    for (std::size_t k = 0; k < ops.size(); ++k) {
      const std::vector<int> next = ahead.at(static_cast<std::int64_t>(k), kMaxActiveStages);
      for (auto it = active.begin(); it != active.end();) {
        if (std::find(next.begin(), next.end(), *it) != next.end()) {
          ++it;
          continue;
        }
        out.push(r, Op::resource(OpKind::RESHARD, *it));
        it = active.erase(it);
      }
      for (int s : next)
        if (active.insert(s).second) out.push(r, Op::resource(OpKind::UNSHARD, s));
      if (is_composite(ops[k].kind))
        out.push_composite(r, ops[k].kind, in.parts(r, ops[k]));
      else
        out.push(r, ops[k]);
      std::vector<int> done;
      auto count = [&](const Op& part) {
        if ((part.kind == OpKind::W || part.kind == OpKind::B) &&
            ++backwards[part.stage] == in.microbatches())
          done.push_back(part.stage);
      };
      if (is_composite(ops[k].kind))
        for (const Op& part : in.parts(r, ops[k])) count(part);
      else
        count(ops[k]);
      for (int s : done) out.push(r, Op::resource(OpKind::REDUCE_GRAD, s));
    }
    for (int s : active) out.push(r, Op::resource(OpKind::RESHARD, s));
  }
  steps.clear();
  return out;
}

Program lower_program(const Program& input, const LoweringOptions& options, const Params& params) {
  std::vector<std::vector<std::int32_t>> steps = options.steps;
  const Program merged = params.get("merge_bw") ? merge_bw(input, steps) : Program();
  const Program& merged_or_input = params.get("merge_bw") ? merged : input;
  const Program with_runtime =
      params.get("runtime") ? add_runtime_actions(merged_or_input, steps) : Program();
  const Program& compute = params.get("runtime") ? with_runtime : merged_or_input;
  const Semantics sem(compute);
  const int P = compute.ranks();
  Program comms(compute.microbatches(), compute.placement(), compute.routes());
  std::vector<std::vector<std::int64_t>> slots(static_cast<std::size_t>(P));
  std::vector<std::size_t> head(static_cast<std::size_t>(P), 0);
  std::vector<std::unordered_set<std::uint64_t>> seen(static_cast<std::size_t>(P));
  std::size_t left = 0;
  for (int r = 0; r < P; ++r) {
    slots[static_cast<std::size_t>(r)] = slots_of(compute, r, steps);
    left += slots[static_cast<std::size_t>(r)].size();
  }
  // Whether a part's input is on the rank: its receive placed, or its local producer run.
  auto ready = [&](int rank, const Op& part) {
    const auto& s = seen[static_cast<std::size_t>(rank)];
    if (auto recv = sem.input_recv(part)) return s.count(key(*recv)) > 0;
    const int local = sem.local_producer_stage(part);
    if (local < 0) return true;
    if (part.kind == OpKind::F) return s.count(key(OpKind::F, local, part.microbatch)) > 0;
    return s.count(key(OpKind::I, local, part.microbatch)) > 0 ||
           s.count(key(OpKind::B, local, part.microbatch)) > 0;
  };
  // PyTorch's _add_send_recv goes round the ranks in order, each placing at most its next step
  // per round when that step's input is there. A rank whose step is not ready stays so until a
  // receive is placed on it, so only ranks that can move are visited: the same rounds in the same
  // order, linear in the steps instead of ranks x rounds (a chain of P ranks takes P rounds).
  std::vector<char> awake(static_cast<std::size_t>(P), 1);    // in this round or the next
  std::vector<char> current(static_cast<std::size_t>(P), 0);  // in this round, not yet visited
  std::priority_queue<int, std::vector<int>, std::greater<>> round;
  std::vector<int> next;
  for (int r = 0; r < P; ++r)
    if (!slots[static_cast<std::size_t>(r)].empty()) next.push_back(r);
  int at = -1;  // the rank being visited
  auto wake = [&](int rank) {
    const auto ru = static_cast<std::size_t>(rank);
    if (awake[ru] || head[ru] >= slots[ru].size()) return;
    awake[ru] = 1;
    if (rank > at) {  // still ahead in this round: visited in it, as the full loop would
      current[ru] = 1;
      round.push(rank);
    } else {
      next.push_back(rank);
    }
  };
  while (left > 0) {
    if (next.empty()) {
      std::vector<std::string> stuck;
      for (int r = 0; r < P && stuck.size() < 4; ++r) {
        const auto ru = static_cast<std::size_t>(r);
        if (head[ru] < slots[ru].size())
          stuck.push_back(fmt::format(
              "rank {} at {}", r,
              compute.op_text(r, compute.ops(r)[static_cast<std::size_t>(slots[ru][head[ru]])])));
      }
      throw ParameterError(
          "style",
          fmt::format("comm style torch cannot place the sends and receives: no rank's next action "
                      "has its input ({}); PyTorch rejects this schedule as malformed",
                      fmt::join(stuck, ", ")));
    }
    for (const int r : next) {
      current[static_cast<std::size_t>(r)] = 1;
      round.push(r);
    }
    next.clear();
    while (!round.empty()) {
      const int r = round.top();
      round.pop();
      at = r;
      const auto ru = static_cast<std::size_t>(r);
      current[ru] = 0;
      const std::int64_t slot = slots[ru][head[ru]];
      if (slot >= 0) {
        const Op& op = compute.ops(r)[static_cast<std::size_t>(slot)];
        bool all = true;
        sem.for_each_part(r, op, [&](const Op& part) { all = all && ready(r, part); });
        if (!all) {
          awake[ru] = 0;  // until a receive is placed on it
          continue;
        }
        if (is_composite(op.kind))
          comms.push_composite(r, op.kind, compute.parts(r, op));
        else
          comms.push(r, op);
        sem.for_each_part(r, op, [&](const Op& part) {
          seen[ru].insert(key(part));
          if (auto send = sem.output_send(part)) {
            comms.push(r, *send);
            const int peer = sem.peer_stage(*send);
            const Op recv = Op::comm(send->kind == OpKind::SEND_F ? OpKind::RECV_F : OpKind::RECV_B,
                                     peer, part.microbatch);
            const int to = compute.rank_of(peer);
            comms.push(to, recv);
            seen[static_cast<std::size_t>(to)].insert(key(recv));
            wake(to);
          }
        });
      }
      ++head[ru];
      --left;
      if (head[ru] < slots[ru].size())
        next.push_back(r);
      else
        awake[ru] = 0;
    }
    at = -1;
  }
  return torch_runtime(comms);
}

}  // namespace

void register_torch(LoweringRegistry& registry) {
  registry.add({"torch",
                {},
                "PyTorch pipelining's lowering (_add_send_recv) and runtime: async sends and "
                "receives, each receive waited before its consumer, sends at the end",
                {ParamSpec("merge_bw",
                           "1: merge an I directly followed by its W into one B first, as "
                           "PyTorch's _merge_bw (default 0, as its runtime)")
                     .with_default(0)
                     .range(0, 1),
                 ParamSpec("runtime",
                           "1: first add UNSHARD/RESHARD and REDUCE_GRAD and drop idle steps, as "
                           "PyTorch's runtime does before _add_send_recv (default 0)")
                     .with_default(0)
                     .range(0, 1)},
                nullptr,
                nullptr,
                lower_program});
}

}  // namespace ppsim::schedules::lowerings
