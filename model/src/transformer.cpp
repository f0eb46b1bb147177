#include "ppsim/model/transformer.hpp"

#include "ppsim/model/step.hpp"

#include <fmt/format.h>

#include <cmath>
#include <numeric>
#include <stdexcept>

namespace ppsim::model {

// Datasheet figures (docs/MODEL.md cites each): dense bf16 FLOP/s without sparsity, memory in
// the datasheet's GB (10^9 bytes), HBM bandwidth.
const std::vector<Gpu>& gpu_presets() {
  static const std::vector<Gpu> gpus = {
      {"h100-sxm", 989e12, 80'000'000'000, 3.35e12, "nvlink4", 132},
      {"h200", 989e12, 141'000'000'000, 4.8e12, "nvlink4", 132},
      {"a100-80gb", 312e12, 80'000'000'000, 2.039e12, "nvlink3", 108},
      {"b200", 2.25e15, 180'000'000'000, 8e12, "nvlink5", 148},
  };
  return gpus;
}

// One direction of one GPU's link; latencies are the order of NCCL's point-to-point latency.
const std::vector<Link>& link_presets() {
  static const std::vector<Link> links = {
      {"nvlink3", 300e9, 5e-6},  // A100: 600 GB/s both directions
      {"nvlink4", 450e9, 5e-6},  // H100/H200: 900 GB/s both directions
      {"nvlink5", 900e9, 5e-6},  // B200: 1.8 TB/s both directions
      {"ib-hdr", 25e9, 10e-6},   // 200 Gb/s per GPU
      {"ib-ndr", 50e9, 10e-6},   // 400 Gb/s per GPU
      {"ib-xdr", 100e9, 10e-6},  // 800 Gb/s per GPU
  };
  return links;
}

const Gpu* find_gpu(const std::string& name) {
  for (const Gpu& g : gpu_presets())
    if (g.name == name) return &g;
  return nullptr;
}

const Link* find_link(const std::string& name) {
  for (const Link& l : link_presets())
    if (l.name == name) return &l;
  return nullptr;
}

std::vector<int> stage_layers(const Transformer& m, const Layout& layout, int stages) {
  // `stages`: the stages along one route.
  if (!layout.layers_per_stage.empty()) {
    if (static_cast<int>(layout.layers_per_stage.size()) != stages)
      throw std::invalid_argument(
          fmt::format("gives {} stages; a microbatch of this schedule passes {} stages",
                      layout.layers_per_stage.size(), stages));
    const long long sum =
        std::accumulate(layout.layers_per_stage.begin(), layout.layers_per_stage.end(), 0LL);
    if (sum != m.layers)
      throw std::invalid_argument(
          fmt::format("adds up to {} layers; model.layers is {}", sum, m.layers));
    return layout.layers_per_stage;
  }
  if (m.layers % stages != 0)
    throw std::invalid_argument(
        fmt::format("{} layers do not split evenly over the {} stages a microbatch passes; give "
                    "model.layers_per_stage",
                    m.layers, stages));
  return std::vector<int>(static_cast<std::size_t>(stages), m.layers / stages);
}

namespace {

// What one transformer layer holds and computes, per GPU, per microbatch.
struct LayerFigures {
  double params = 0;
  double activation = 0, weight_stash = 0;    // bytes
  double forward = 0, input = 0, weight = 0;  // FLOPs
  double recompute = 0;                       // FLOPs added to I by the recompute mode
};

LayerFigures layer_figures(const Transformer& m, const Layout& layout) {
  const double h = m.hidden, a = m.heads, g = m.query_groups(), s = m.sequence_length,
               b = m.micro_batch_size, t = layout.tensor_parallel, d = m.dtype_bytes;
  const double gated = m.swiglu ? 1.5 : 1.0;  // Megatron's gated_linear_multiplier
  const double norm = m.rmsnorm ? 1 : 2;
  const bool moe = m.experts > 0;
  // The MLP width a token goes through, and the width whose weights the layer holds.
  // Shared experts run on every token beside its routed ones; each rank holds experts / ep of
  // the routed experts.
  const double shared = double(m.shared_experts) * m.shared_ffn_hidden;
  const double f_token = moe ? double(m.top_k) * m.moe_ffn_hidden + shared : double(m.ffn());
  const double f_held = moe ? double(m.experts) / layout.expert_parallel * m.moe_ffn_hidden + shared
                            : double(m.ffn());
  LayerFigures out;
  // theoretical_memory_usage.py: 2h(f·gated + norm) + 2h²(1 + g/a).
  out.params = (2 * h * (f_held * gated + norm) + 2 * h * h * (1 + g / a)) / t;

  // Korthikanti et al. 2022, Table 2, with f = 4h written out (Megatron's 18 + 4f/h): parts
  // replicated across tensor-parallel ranks unless sequence parallel, parts split by it, and the
  // attention scores. 1-byte dropout masks, d-byte tensors.
  const double E = s * b * h;
  const double replicated = 4 * E * d + 2 * E;  // 2 norm inputs, QKV and MLP inputs; masks
  // Q, K and V (K and V of g groups), the projection's input; the MLP's activation input (both
  // halves with SwiGLU) and output.
  const double split = (2 + 2 * g / a) * E * d + (m.swiglu ? 3 : 2) * s * b * f_token * d;
  const double scores = a * s * s * b * (2 * d + 1);  // softmax out, its mask, dropout out
  const bool sp = layout.sequence_parallel;
  switch (layout.recompute) {
    case Recompute::none:
      out.activation = (sp ? replicated / t : replicated) + (split + scores) / t;
      break;
    case Recompute::selective:
      out.activation = (sp ? replicated / t : replicated) + split / t;
      break;
    case Recompute::full:
      out.activation = sp ? E * d / t : E * d;  // the layer's input only
      break;
  }
  // After I, W needs each linear's input and its output's gradient (the zero-bubble paper's
  // 32sbh at f = 4h, t = 1): QKV and fc1 inputs, proj and fc2 output gradients replicated unless
  // sequence parallel; the rest split.
  const double w_replicated = 4 * E * d;
  const double w_split = E * d + s * b * f_token * d + s * b * h * (1 + 2 * g / a) * d +
                         s * b * f_token * (m.swiglu ? 2 : 1) * d;
  out.weight_stash = (sp ? w_replicated / t : w_replicated) + w_split / t;

  // Megatron's FLOPs (training.py): per token 4h²(1 + g/a) for the attention GEMMs, 2sh for the
  // causal core (half of QK^T and AV), 4hf·gated for the MLP. F runs each once; I the GEMMs once
  // and the core twice (it has no weights, so W has none of it); W the GEMMs once.
  const double T = s * b;
  const double gemm = 4 * T * h * h * (1 + g / a) + 4 * T * h * f_token * gated;
  const double core = 2 * T * s * h;
  out.forward = (gemm + core) / t;
  out.input = (gemm + 2 * core) / t;
  out.weight = gemm / t;
  if (layout.recompute == Recompute::full) out.recompute = out.forward;
  if (layout.recompute == Recompute::selective) out.recompute = core / t;
  return out;
}

}  // namespace

Derivation derive(const Transformer& m, const Layout& layout, const Hardware& hw,
                  const std::vector<int>& positions, int route_stages) {
  const std::vector<int> layers = stage_layers(m, layout, route_stages);
  const int stages = static_cast<int>(positions.size());
  const LayerFigures one = layer_figures(m, layout);
  const double h = m.hidden, s = m.sequence_length, b = m.micro_batch_size,
               t = layout.tensor_parallel, d = m.dtype_bytes, V = static_cast<double>(m.vocab);
  const double norm = m.rmsnorm ? 1 : 2;
  const bool sp = layout.sequence_parallel;
  Derivation out;
  // The weights, their gradient buffer in the dtype it is reduced in (fp32 for bf16, fp16 for
  // fp16: step.cpp's grad_bytes), and Adam's fp32 state (master weights and two moments; fp32
  // training keeps no master copy), sharded over the d·cp ranks by the distributed optimizer
  // (theoretical_memory_usage.py's 18 and 6 + 12/d for bf16).
  const double weights = m.dtype_bytes, grads = m.dtype_bytes >= 4 || !m.fp16 ? 4.0 : 2.0;
  const double state = m.dtype_bytes >= 4 ? 8.0 : 12.0;
  const double shards = 1.0 * layout.data_parallel * layout.context_parallel;
  out.bytes_per_param = weights + grads + (layout.distributed_optimizer ? state / shards : state);
  out.achieved_flops = hw.gpu.peak_flops * hw.flops_efficiency;
  out.link = hw.link;
  out.boundary_bytes = std::llround(s * b * h * d / (sp ? t : 1));
  for (int st = 0; st < stages; ++st) {
    StageFigures f;
    f.stage = st;
    const int at = positions[static_cast<std::size_t>(st)];
    f.layers = layers[static_cast<std::size_t>(at)];
    f.embedding = at == 0;
    f.head = at == route_stages - 1;
    const double L = f.layers;
    // Context parallel splits every token-proportional figure over its cp ranks.
    const double cp = layout.context_parallel;
    double params = L * one.params, act = L * one.activation / cp,
           stash = L * one.weight_stash / cp;
    double fwd = L * one.forward / cp, inp = L * (one.input + one.recompute) / cp,
           wgt = L * one.weight / cp;
    if (f.embedding) {
      params += h * V / t;
      act += (8 * s * b + s * b * h) / t / cp;  // token ids; the embedding's dropout mask
    }
    if (f.head) {
      // The final norm and the LM head. A tied head is the embedding itself only when one stage
      // holds both; otherwise Megatron keeps a copy of the word embedding on the last stage
      // (summed with the first's gradient every step).
      params += norm * h / t + (m.tied_embeddings && route_stages == 1 ? 0 : h * V / t);
      act += 4 * s * b * (h + V) / t / cp;  // inputs of the output layer and of the loss
      stash += ((sp ? s * b * h * d / t : s * b * h * d) + s * b * V * d / t) / cp;
      const double logits = 2 * s * b * h * V / t / cp;
      fwd += logits;
      inp += logits;
      wgt += logits;
    }
    f.params = params;
    f.static_bytes = std::llround(params * out.bytes_per_param);
    f.activation_bytes = std::llround(act);
    f.weight_stash_bytes = std::llround(stash);
    f.flops_forward = fwd;
    f.flops_backward_input = inp;
    f.flops_backward_weight = wgt;
    if (out.achieved_flops > 0) {
      f.forward = fwd / out.achieved_flops;
      f.backward_input = inp / out.achieved_flops;
      f.backward_weight = wgt / out.achieved_flops;
    }
    out.stages.push_back(f);
  }
  // Megatron's count (training.py): forward, and two of it for the backward, recompute aside.
  const double logits_flops = 2 * s * b * h * V / t;
  out.model_flops = 3 * (m.layers * one.forward + logits_flops) * t / b;
  if (!hw.flops_efficiency_given) derive_step(m, layout, hw, route_stages, out);
  return out;
}

}  // namespace ppsim::model
