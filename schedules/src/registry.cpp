#include <fmt/format.h>

#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/generator.hpp"
#include "ppsim/schedules/lowering.hpp"

namespace ppsim::schedules {

ParamSpec ranks_param(std::string description, std::int64_t min) {
  return ParamSpec("ranks", std::move(description)).must().range(min);
}
ParamSpec microbatches_param(std::string description, std::int64_t min) {
  return ParamSpec("microbatches", std::move(description)).must().range(min);
}

std::string describe_lowering(const std::string& style, const Params& params) {
  std::string out = style;
  const LoweringStyle* lowering = LoweringRegistry::instance().find(style);
  for (const auto& [name, value] : params.values()) {
    const ParamSpec* spec = lowering ? find_param(lowering->params, name) : nullptr;
    const bool word = spec && !spec->keyword.empty() && spec->keyword_value == value;
    out += fmt::format(", {} {}", name, word ? spec->keyword : std::to_string(value));
  }
  return out;
}

DefaultComm prefetch_comm(std::function<std::int64_t(const ScheduleParams&)> ahead,
                          const std::string& text, std::string why) {
  return {"async",
          [ahead = std::move(ahead)](const ScheduleParams& p) {
            return Params{{"prefetch", ahead(p)}};
          },
          "async, prefetch " + text, std::move(why)};
}

std::vector<ParamSpec> one_chunk_params() {
  return {ranks_param("pipeline ranks P (one stage each)"), microbatches_param("M >= 1"),
          ParamSpec("chunks", "one chunk per rank (interleaved-1f1b has more)")
              .with_default(1)
              .range(1, 1)};
}
std::vector<ScheduleParams> one_chunk_test_params() {
  return {{{"ranks", 1}, {"microbatches", 1}},
          {{"ranks", 2}, {"microbatches", 3}},
          {{"ranks", 4}, {"microbatches", 8}},
          {{"ranks", 5}, {"microbatches", 2}}};
}

Program generate(std::string_view kind, const ScheduleParams& given) {
  const Generator* g = Registry::instance().find(kind);
  if (g == nullptr)
    throw ParameterError("kind", fmt::format("unknown schedule '{}'; known schedules: {}", kind,
                                             fmt::join(Registry::instance().names(), ", ")));
  const ScheduleParams p = resolve(g->params, given, g->name);
  // A hard index bound, not a memory limit (that is config::check_resources, applied before
  // this): stage ids, op positions and endpoint ids are 32-bit. Up to 3 compute ops per (stage,
  // microbatch); the product is exact in a double, and cannot overflow.
  const double compute_ops = 3.0 * p.ranks() * p.chunks() * p.microbatches();
  if (compute_ops > 2147483647.0) {
    const char* key = p.microbatches() >= p.ranks() && p.microbatches() >= p.chunks()
                          ? "microbatches"
                      : p.ranks() >= p.chunks() ? "ranks"
                                                : "chunks";
    throw ParameterError(
        key, fmt::format("{} ranks x {} chunks x {} microbatches makes {:.3g} compute ops, above "
                         "the 2^31 - 1 that 32-bit op ids can index; lower {}",
                         p.ranks(), p.chunks(), p.microbatches(), compute_ops, key));
  }
  return g->build(p);
}

}  // namespace ppsim::schedules
