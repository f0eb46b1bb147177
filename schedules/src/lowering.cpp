#include "ppsim/schedules/lowering.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ppsim/base/huge_pages.hpp"
#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/rank_blocks.hpp"

namespace ppsim::schedules {

OpsOfOne RankLowering::recvs_needed(const Op& c) const {
  OpsOfOne out;
  sem_.for_each_part(rank_, c, [&](const Op& part) {
    if (auto r = sem_.input_recv(part)) out.push_back(*r);
  });
  return out;
}

OpsOfOne RankLowering::sends_after(const Op& c) const {
  OpsOfOne out;
  sem_.for_each_part(rank_, c, [&](const Op& part) {
    if (auto s = sem_.output_send(part)) out.push_back(*s);
  });
  return out;
}

void RankLowering::emit(Op op) {
  if (is_composite(op.kind))  // its parts move to the output's pool
    op = out_.pool_composite(rank_, op.kind, in_.parts(rank_, op));
  ops_.push_back(op);
}

void RankLowering::wait(std::vector<std::int32_t>& ids) {
  if (ids.empty()) return;
  std::sort(ids.begin(), ids.end());
  ops_.push_back(append_wait(wait_ids_, ids));
  ids.clear();
}

void RankLowering::end_batch() {
  if (!groups_ || ops_.size() < batch_begin_ + 2) return;
  ops_.insert(ops_.begin() + static_cast<std::ptrdiff_t>(batch_begin_),
              Op::group(OpKind::GROUP_START));
  ops_.push_back(Op::group(OpKind::GROUP_END));
}

namespace {
// Ops per compute op that a lowered rank is expected to hold: async 1F1B lowers to exactly 4 plus
// a closing WAIT. Only sizes the arena's first mapping and the scratch list; more still works.
constexpr std::size_t kOpsPerComputeHint = 5;
}  // namespace

static Program lower_compute(const Program& compute, const LoweringOptions& options);

// PyTorch's resource actions (UNSHARD, RESHARD, REDUCE_GRAD) move no tensor between ranks: they
// are set aside, the compute ops lowered, and each put back right before the compute op it came
// before (after the rank's last op when no compute op follows it).
Program lower(const Program& compute, const LoweringOptions& options) {
  struct SetAside {
    std::size_t before;  // compute ops before it on its rank
    Op op;
  };
  std::vector<std::vector<SetAside>> aside(static_cast<std::size_t>(compute.ranks()));
  bool any = false;
  for (int r = 0; r < compute.ranks(); ++r) {
    std::size_t computes = 0;
    for (const Op& op : compute.ops(r)) {
      if (info(op.kind).cls == OpClass::resource) {
        aside[static_cast<std::size_t>(r)].push_back({computes, op});
        any = true;
      } else if (is_compute(op.kind)) {
        ++computes;
      } else {
        throw ParameterError("kind",
                             fmt::format("lowering expects compute ops only, found {} on rank {}",
                                         compute.op_text(r, op), r));
      }
    }
  }
  if (!any) return lower_compute(compute, options);
  Program stripped = compute;
  for (int r = 0; r < compute.ranks(); ++r) {
    if (aside[static_cast<std::size_t>(r)].empty()) continue;
    std::vector<Op> ops;
    for (const Op& op : compute.ops(r))
      if (is_compute(op.kind)) ops.push_back(op);
    stripped.set_ops(r, ops, {});
  }
  Program out = lower_compute(stripped, options);
  for (int r = 0; r < out.ranks(); ++r) {
    const auto& rank_aside = aside[static_cast<std::size_t>(r)];
    if (rank_aside.empty()) continue;
    std::vector<Op> ops;
    std::size_t computes = 0, next = 0;
    for (const Op& op : out.ops(r)) {
      if (is_compute(op.kind)) {
        while (next < rank_aside.size() && rank_aside[next].before == computes)
          ops.push_back(rank_aside[next++].op);
        ++computes;
      }
      ops.push_back(op);
    }
    while (next < rank_aside.size()) ops.push_back(rank_aside[next++].op);
    auto& list = out.ops(r);
    list.assign(ops.begin(), ops.end());
  }
  return out;
}

static Program lower_compute(const Program& compute, const LoweringOptions& options) {
  const LoweringStyle* style = LoweringRegistry::instance().find(options.style);
  if (!style)
    throw ParameterError("style",
                         fmt::format("unknown comm style '{}'; known styles: {}", options.style,
                                     fmt::join(LoweringRegistry::instance().names(), ", ")));
  const Params params = resolve(style->params, options.params, style->name);
  if (style->refuses)
    if (auto error = style->refuses(compute, params)) throw *error;
  if (style->lower_program) return style->lower_program(compute, options, params);
  Program out(compute.microbatches(), compute.placement(), compute.routes());
  out.ensure_ranks(compute.ranks());
  out.use_arena(compute.total_ops() * kOpsPerComputeHint * sizeof(Op));
  // Ranks are lowered independently (each writes only its own lists), on several threads when the
  // program is large enough for that to pay, each taking the next rank: a rank's cost is mostly
  // page faults, uneven from thread to thread. Each thread lowers into scratch lists, which stay
  // faulted in from rank to rank.
  struct alignas(64) Scratch {  // a cache line each: emit's push_backs write the vectors' ends
    std::vector<Op> ops;
    std::vector<std::int32_t> wait_ids;
  };
  const unsigned workers = base::blocks_for(compute.total_ops(), options.threads);
  std::vector<Scratch> scratch(workers);
  base::for_each_rank(compute.ranks(), workers, [&](unsigned worker, int r) {
    auto& [ops, wait_ids] = scratch[worker];
    ops.clear();
    wait_ids.clear();
    base::reserve_prefaulted(ops, compute.ops(r).size() * kOpsPerComputeHint + 64);
    // A compute op receives its input and sends its output: about two request ids each.
    base::reserve_prefaulted(wait_ids, compute.ops(r).size() * 2 + 64);
    RankLowering l(compute, out, ops, wait_ids, r, params, options.groups);
    style->lower_rank(l);
    out.set_ops(r, ops, wait_ids);
  });
  return out;
}

}  // namespace ppsim::schedules
