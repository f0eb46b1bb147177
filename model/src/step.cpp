#include "ppsim/model/step.hpp"

#include <algorithm>

#include "ppsim/model/layer_costs.hpp"

namespace ppsim::model {

double bucket_params(int data_parallel) {
  return std::max(40e6, 1e6 * data_parallel);
}

double optimizer_bytes_per_param(int dtype_bytes, bool fp16) {
  // Adam (FusedAdam) reads the fp32 parameter, gradient and both moments and writes three
  // back: 28; the gradient norm reads the gradients: 4; the new fp32 parameter is copied to
  // the 16-bit weights: 4 + 2. fp16 first copies the fp16 gradients to fp32 (2 + 4) and
  // unscales them checking for overflow (4 + 4). fp32 training: Adam and the norm only.
  if (dtype_bytes >= 4) return 32;
  return fp16 ? 52 : 38;
}

namespace {

// Gradient bytes per parameter as Megatron reduces them: fp16 models in fp16, bf16 in fp32
// (it sets accumulate_allreduce_grads_in_fp32 for bf16).
double grad_bytes(const Transformer& m) {
  return m.dtype_bytes >= 4 || !m.fp16 ? 4.0 : 2.0;
}

}  // namespace

void derive_step(const Transformer& m, const Layout& layout, const Hardware& hw, int route_stages,
                 Derivation& d) {
  const KernelModel& kernels = hw.kernels;
  CollectiveModel coll;
  coll.cluster = {hw.gpus_per_node, hw.intra_node, hw.inter_node};
  coll.bus_efficiency = hw.bus_efficiency;
  coll.base_latency = hw.collective_latency;
  const Parallel par{layout.tensor_parallel, layout.context_parallel, layout.expert_parallel,
                     layout.data_parallel, layout.pipeline_parallel};
  const CostContext c{m, layout, hw.gpu, kernels, coll, par};
  const PassTimes layer = layer_times(c), emb = embedding_times(c), head = head_times(c);
  d.per_op = true;
  d.gpus_per_node = hw.gpus_per_node;
  d.intra_node = hw.intra_node;
  d.inter_node = hw.inter_node;

  const double t = layout.tensor_parallel, h = m.hidden, V = static_cast<double>(m.vocab);
  const double gb = grad_bytes(m);
  const int G = hw.gpus_per_node;
  const int dp = layout.data_parallel * layout.context_parallel;
  const GroupSpan dense_group = span_of(dp, static_cast<long long>(layout.tensor_parallel), G);
  const int edp = std::max(1, dp / layout.expert_parallel);
  const GroupSpan expert_group =
      span_of(edp, 1LL * layout.tensor_parallel * layout.expert_parallel, G);
  const Collective reduce =
      layout.distributed_optimizer ? Collective::reduce_scatter : Collective::all_reduce;
  const double per_bucket = bucket_params(dp);
  const double opt_bytes = optimizer_bytes_per_param(m.dtype_bytes, m.fp16);
  // Per layer, this GPU's expert parameters (reduced over the expert-data-parallel group).
  const double gated = m.swiglu ? 1.5 : 1.0;
  const double expert_params =
      m.experts > 0 ? 2 * h * m.moe_ffn_hidden * gated * m.experts / layout.expert_parallel / t
                    : 0.0;

  for (StageFigures& f : d.stages) {
    PassTimes times = layer.scaled(f.layers);
    if (f.embedding) times += emb;
    if (f.head) times += head;
    f.times = times;
    f.forward = times.forward.total();
    f.backward_input = times.backward_input.total();
    f.backward_weight = times.backward_weight.total();

    // Gradients in the order the backward produces them: the head, the layers last to first,
    // the embedding; a bucket is ready when its last gradient is.
    const double emb_p = f.embedding ? h * V / t : 0.0;
    const double norm = m.rmsnorm ? 1 : 2;
    const bool own_head = !m.tied_embeddings || route_stages > 1;
    const double head_p = f.head ? (norm * h + (own_head ? h * V : 0.0)) / t : 0.0;
    const double layer_p = f.layers > 0 ? (f.params - emb_p - head_p) / f.layers : 0.0;
    const double dense_layer_p = layer_p - expert_params;
    std::vector<std::pair<double, double>> pieces;  // (dense params, expert params), in order
    if (head_p > 0) pieces.push_back({head_p, 0});
    for (int l = 0; l < f.layers; ++l) pieces.push_back({dense_layer_p, expert_params});
    if (emb_p > 0) pieces.push_back({emb_p, 0});
    const double total = std::max(1.0, f.params);
    f.buckets.clear();
    double done = 0, dense = 0, expert = 0;
    auto flush = [&] {
      if (dense + expert <= 0) return;
      GradBucket b;
      b.ready = std::min(1.0, done / total);
      b.duration = collective_time(coll, reduce, dense * gb, dense_group) +
                   collective_time(coll, reduce, expert * gb, expert_group);
      f.buckets.push_back(b);
      dense = expert = 0;
    };
    for (const auto& [dp_part, ep_part] : pieces) {
      dense += dp_part;
      expert += ep_part;
      done += dp_part + ep_part;
      if (layout.overlap_grad_reduce && dense + expert >= per_bucket) flush();
    }
    flush();

    // The optimizer over this GPU's share of the parameters, then (distributed optimizer) the
    // updated 16-bit parameters gathered back.
    const double local = layout.distributed_optimizer ? (f.params - f.layers * expert_params) / dp +
                                                            f.layers * expert_params / edp
                                                      : f.params;
    f.optimizer = memory_time(kernels, hw.gpu, local * opt_bytes);
    f.param_gather = 0;
    if (layout.distributed_optimizer && !layout.overlap_param_gather)
      f.param_gather =
          collective_time(coll, Collective::all_gather,
                          (f.params - f.layers * expert_params) * m.dtype_bytes, dense_group) +
          collective_time(coll, Collective::all_gather, f.layers * expert_params * m.dtype_bytes,
                          expert_group);
  }
  // The tied embedding: the last stage's copy and the first stage's word embedding are summed
  // (Megatron's embedding group), across the whole pipeline.
  d.embedding_sync = 0;
  if (m.tied_embeddings && route_stages > 1) {
    const GroupSpan ends =
        span_of(2, 1LL * (layout.pipeline_parallel - 1) * layout.tensor_parallel * dp, G);
    d.embedding_sync = collective_time(coll, Collective::all_reduce, h * V / t * gb, ends);
  }
}

}  // namespace ppsim::model
