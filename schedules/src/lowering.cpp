#include "ppsim/schedules/lowering.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/rank_blocks.hpp"

namespace ppsim::schedules {

// Defined in the file CMake generates from schedules/src/lowerings/*.cpp.
void register_builtin_lowerings(LoweringRegistry& registry);

LoweringRegistry& LoweringRegistry::instance() {
  static LoweringRegistry registry = [] {
    LoweringRegistry r;
    register_builtin_lowerings(r);
    return r;
  }();
  return registry;
}

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
    out_.push_composite(rank_, op.kind, in_.parts(rank_, op));
  else
    out_.push(rank_, op);
}

void RankLowering::wait(std::vector<std::int32_t>& ids) {
  if (ids.empty()) return;
  std::sort(ids.begin(), ids.end());
  out_.push_wait(rank_, ids);
  ids.clear();
}

void RankLowering::end_batch() {
  auto& ops = out_.ops(rank_);
  if (!groups_ || ops.size() < batch_begin_ + 2) return;
  ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(batch_begin_),
             Op::group(OpKind::GROUP_START));
  ops.push_back(Op::group(OpKind::GROUP_END));
}

Program lower(const Program& compute, const LoweringOptions& options) {
  const LoweringStyle* style = LoweringRegistry::instance().find(options.style);
  if (!style)
    throw ParameterError("style",
                         fmt::format("unknown comm style '{}'; known styles: {}", options.style,
                                     fmt::join(LoweringRegistry::instance().names(), ", ")));
  const Params params = resolve(style->params, options.params, style->name);
  for (int r = 0; r < compute.ranks(); ++r) {
    for (const Op& op : compute.ops(r)) {
      if (!is_compute(op.kind))
        throw ParameterError("kind",
                             fmt::format("lowering expects compute ops only, found {} on rank {}",
                                         compute.op_text(r, op), r));
    }
  }
  if (style->refuses)
    if (auto error = style->refuses(compute, params)) throw *error;
  if (style->lower_program) return style->lower_program(compute, options, params);
  Program out(compute.microbatches(), compute.placement(), compute.routes());
  out.ensure_ranks(compute.ranks());
  // Ranks are lowered independently (each writes only its own lists), on several threads when the
  // program is large enough for that to pay.
  for_rank_blocks(rank_blocks(compute, options.threads), [&](std::size_t, int first, int end) {
    for (int r = first; r < end; ++r) {
      out.reserve(r, compute.ops(r).size() * 4);
      RankLowering l(compute, out, r, params, options.groups);
      style->lower_rank(l);
      // No shrink_to_fit: the reserve's untouched tail costs no memory, and the
      // copy cost time and page faults.
    }
  });
  return out;
}

}  // namespace ppsim::schedules
