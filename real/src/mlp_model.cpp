#include "ppsim/real/mlp_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>

#include "ppsim/schedules/semantics.hpp"

namespace ppsim::real {

namespace {

// Keeps every GEMM dimension and the bytes of one operand within what cuBLAS's int sizes and a
// GPU's memory can take (the config reader holds hidden to kMaxDim already).
constexpr int kMaxDim = 1 << 20;
constexpr std::int64_t kMaxTokens = std::int64_t{1} << 24;

// The cuda compute's limits on the `model` the config reader checked.
MlpModel mlp_of(const config::ModelSection& section, const std::string& source) {
  const model::Transformer& t = section.transformer;
  auto fail = [&](const char* key, const std::string& msg) {
    throw config::ConfigError(source, std::string("model.") + key, msg);
  };
  MlpModel m;
  m.hidden = t.hidden;
  m.ffn_hidden = static_cast<int>(t.ffn());
  m.sequence_length = t.sequence_length;
  m.micro_batch_size = t.micro_batch_size;
  m.layers = t.layers;
  m.dtype = t.dtype_bytes == 4 ? "fp32" : "bf16";
  if (m.ffn_hidden > 4 * kMaxDim)
    fail("ffn_hidden",
         fmt::format("expected an integer in 1..{}, got {}", 4 * kMaxDim, m.ffn_hidden));
  if (m.tokens() > kMaxTokens)
    fail("sequence_length",
         fmt::format("micro_batch_size x sequence_length is {} tokens; the cuda compute takes at "
                     "most {}",
                     m.tokens(), kMaxTokens));
  if (m.layers > 1024)
    fail("layers",
         fmt::format("the cuda compute runs 1..1024 MLP blocks per op, got {}", m.layers));
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

std::optional<MlpModel> mlp_model_of(const config::Config& config) {
  if (!config.model_section) return std::nullopt;
  try {
    MlpModel m = mlp_of(*config.model_section, config.source);
    // fp16 and bf16 are both 2 bytes to the formulas; the GEMMs run what was asked.
    if (const auto it = config.sections.find("model"); it != config.sections.end())
      if (const auto d = it->second.find("dtype"); d != it->second.end() && d->is_string())
        m.dtype = d->get<std::string>();
    return m;
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
            held[cell] = memory.stage(part.stage).activation_bytes;
            live += memory.stage(part.stage).activation_bytes;
            break;
          case Stash::keep_weights:
            if (it != held.end()) {
              live += memory.stage(part.stage).weight_stash_bytes - it->second;
              it->second = memory.stage(part.stage).weight_stash_bytes;
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
