#include "ppsim/real/mlp_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>

#include "ppsim/config/reader.hpp"
#include "ppsim/config/section.hpp"
#include "ppsim/schedules/semantics.hpp"

namespace ppsim::real {

namespace {

// Keeps every GEMM dimension and the bytes of one operand within what cuBLAS's int sizes and a
// GPU's memory can take.
constexpr int kMaxDim = 1 << 20;
constexpr std::int64_t kMaxTokens = std::int64_t{1} << 24;

MlpModel read_model(config::Reader& r) {
  MlpModel m;
  m.hidden = r.integer("hidden", 0, 1, /*required=*/true);
  m.ffn_hidden = r.integer("ffn_hidden", 0, 0);
  m.sequence_length = r.integer("sequence_length", 0, 1, /*required=*/true);
  m.micro_batch_size = r.integer("micro_batch_size", m.micro_batch_size, 1);
  m.layers = r.integer("layers", m.layers, 1);
  m.dtype = r.one_of("dtype", m.dtype, {"bf16", "fp16", "fp32"});
  if (m.ffn_hidden == 0) {
    if (m.hidden > kMaxDim / 4)
      r.fail("hidden",
             fmt::format("expected at most {} (ffn_hidden defaults to 4 x hidden), got {}",
                         kMaxDim / 4, m.hidden));
    m.ffn_hidden = 4 * m.hidden;
  }
  if (m.hidden > kMaxDim)
    r.fail("hidden", fmt::format("expected an integer in 1..{}, got {}", kMaxDim, m.hidden));
  if (m.ffn_hidden > kMaxDim)
    r.fail("ffn_hidden",
           fmt::format("expected an integer in 1..{}, got {}", kMaxDim, m.ffn_hidden));
  if (m.tokens() > kMaxTokens)
    r.fail("sequence_length",
           fmt::format("micro_batch_size x sequence_length is {} tokens; expected at most {}",
                       m.tokens(), kMaxTokens));
  if (m.layers > 1024)
    r.fail("layers", fmt::format("expected an integer in 1..1024, got {}", m.layers));
  r.reject_unknown();
  return m;
}

}  // namespace

std::vector<Gemm> gemms_of(schedules::OpKind kind, const MlpModel& model) {
  using schedules::OpKind;
  const std::int64_t t = model.tokens(), h = model.hidden, f = model.ffn_hidden;
  // Row-major: X [t, h], W1 [h, f], A = act(X W1) [t, f], W2 [f, h], Y = A W2 [t, h].
  const std::vector<Gemm> forward = {{"X*W1", t, f, h, false, false},
                                     {"A*W2", t, h, f, false, false}};
  const std::vector<Gemm> input = {{"dY*W2^T", t, f, h, false, true},
                                   {"dA*W1^T", t, h, f, false, true}};
  const std::vector<Gemm> weight = {{"A^T*dY", f, h, t, true, false},
                                    {"X^T*dA", h, f, t, true, false}};
  switch (kind) {
    case OpKind::F:
      return forward;
    case OpKind::I:
      return input;
    case OpKind::W:
      return weight;
    case OpKind::B: {
      auto all = input;
      all.insert(all.end(), weight.begin(), weight.end());
      return all;
    }
    default:
      throw std::invalid_argument(fmt::format("the MLP model runs plain F, B, I and W ops, not {}",
                                              schedules::to_string(kind)));
  }
}

double flops_of(schedules::OpKind kind, const MlpModel& model) {
  double sum = 0;
  for (const Gemm& g : gemms_of(kind, model)) sum += g.flops();
  return sum * model.layers;
}

void register_model_section() {
  config::SectionRegistry::instance().add(
      {"model", "the transformer MLP block the GPU compute runs (docs/EXECUTOR.md)",
       [](config::Reader& r) { (void)read_model(r); }});
}

std::optional<MlpModel> mlp_model_of(const config::Config& config) {
  const auto it = config.sections.find("model");
  if (it == config.sections.end()) return std::nullopt;
  try {
    config::Reader r(it->second, config.source, "model.");
    return read_model(r);
  } catch (const config::ConfigError& e) {
    const std::string blame = config.source_of(e.key());
    if (e.source() == config.source && blame != config.source)
      throw config::ConfigError(blame, e.key(), e.message());
    throw;
  }
}

std::vector<std::int64_t> stash_peaks(const schedules::Program& program,
                                      const model::MemoryOptions& memory) {
  using Stash = schedules::Semantics::Stash;
  const schedules::Semantics sem(program);
  std::vector<std::int64_t> peaks(static_cast<std::size_t>(program.ranks()), 0);
  for (int r = 0; r < program.ranks(); ++r) {
    std::map<std::pair<int, int>, std::int64_t> held;  // (stage, microbatch) -> bytes
    std::int64_t live = 0, peak = 0;
    for (const auto& op : program.ops(r)) {
      if (!schedules::is_compute(op.kind)) continue;
      sem.for_each_part(r, op, [&](const schedules::Op& part) {
        const std::pair<int, int> cell{part.stage, part.microbatch};
        auto it = held.find(cell);
        switch (schedules::Semantics::stash_effect(part.kind)) {
          case Stash::take:
            if (it != held.end()) live -= it->second;
            held[cell] = memory.activation_bytes;
            live += memory.activation_bytes;
            break;
          case Stash::keep_weights:
            if (it != held.end()) {
              live += memory.weight_stash_bytes - it->second;
              it->second = memory.weight_stash_bytes;
            }
            break;
          case Stash::release:
          case Stash::release_weights:
            if (it != held.end()) {
              live -= it->second;
              held.erase(it);
            }
            break;
          default:
            break;
        }
        peak = std::max(peak, live);
      });
    }
    peaks[static_cast<std::size_t>(r)] = peak;
  }
  return peaks;
}

}  // namespace ppsim::real
