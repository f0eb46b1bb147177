#pragma once
// A transformer, its parallel layout and the GPUs it runs on: what a user knows about a training
// job. derive() turns them into per-stage costs and memory (docs/MODEL.md gives every formula
// with its source).
#include <cstdint>
#include <string>
#include <vector>

#include "ppsim/model/kernel_model.hpp"
#include "ppsim/model/pass_times.hpp"
#include "ppsim/model/step_phases.hpp"

namespace ppsim::model {

enum class Recompute { none, selective, full };

struct Transformer {
  int layers = 0;        // L, over the whole network
  int hidden = 0;        // h
  int heads = 0;         // a
  int kv_heads = 0;      // g (grouped-query attention); 0 = heads
  int ffn_hidden = 0;    // f; 0 = 4h
  bool swiglu = false;   // gated MLP: three h x f matrices instead of two
  bool rmsnorm = false;  // RMSNorm (one vector per norm) instead of LayerNorm (two)
  std::int64_t vocab = 0;
  int sequence_length = 0;   // s
  int micro_batch_size = 1;  // b
  bool tied_embeddings = false;
  int dtype_bytes = 2;  // activations and boundary tensors: bf16/fp16 2, fp32 4
  bool fp16 = false;    // fp16 (loss scaling, fp16 gradients) rather than bf16
  // Mixture of experts: every layer's MLP is `experts` experts of `moe_ffn_hidden`, each token
  // routed to `top_k` of them; 0 experts = dense.
  int experts = 0, top_k = 0, moe_ffn_hidden = 0;
  // Experts every token goes through besides its routed ones (Qwen2-MoE, DeepSeek), of width
  // shared_ffn_hidden each; 0 = none.
  int shared_experts = 0, shared_ffn_hidden = 0;
  bool flash_attention = false;  // fused attention: no s x s scores in memory
  bool dropout = true;           // hidden and attention dropout (GPT's 0.1), with their masks

  int query_groups() const { return kv_heads > 0 ? kv_heads : heads; }
  std::int64_t ffn() const { return ffn_hidden > 0 ? ffn_hidden : std::int64_t{4} * hidden; }
  std::int64_t tokens() const { return std::int64_t{sequence_length} * micro_batch_size; }
};

struct Layout {
  int tensor_parallel = 1;  // t
  bool sequence_parallel = false;
  int data_parallel = 1;      // d
  int context_parallel = 1;   // cp: the sequence split over cp ranks, K/V passed round a ring
  int expert_parallel = 1;    // ep: the experts split over ep of the d·cp data-parallel ranks
  int global_batch_size = 0;  // sequences per step over all replicas; 0 = M·b·d
  // Megatron's overlap flags (all off by default there): gradient reduction under the last
  // backward, the parameter all-gather under the next forward, TP collectives under GEMMs.
  bool overlap_grad_reduce = false, overlap_param_gather = false, tp_comm_overlap = false;
  int pipeline_parallel = 1;  // the schedule's ranks (set from it, not read)
  bool distributed_optimizer = false;
  Recompute recompute = Recompute::none;
  std::vector<int> layers_per_stage;  // one per virtual stage; empty = even
};

// A GPU as its datasheet gives it.
struct Gpu {
  std::string name;
  double peak_flops = 0;  // dense bf16/fp16 FLOP/s
  std::int64_t memory_bytes = 0;
  double memory_bandwidth = 0;  // HBM bytes/s
  std::string link;             // its NVLink preset
  int sms = 0;                  // streaming multiprocessors (GEMM waves); 0 = unknown
};

// The link between two pipeline stages.
struct Link {
  std::string name;
  double bandwidth = 0;  // bytes/s, one direction
  double latency = 0;    // seconds per transfer
};

struct Hardware {
  Gpu gpu;
  std::int64_t memory_bytes = 0;  // the limit a rank's peak is held to; 0 = none
  // Given: every op at this flat fraction of peak (the FLOPs model); absent: per-op costs from
  // kernel shapes and collectives (docs/MODEL.md).
  double flops_efficiency = 0.5;
  bool flops_efficiency_given = false;
  Link link;  // between pipeline stages (hardware.p2p); empty name = from the placement
  int gpus_per_node = 8;
  Link intra_node, inter_node;
  KernelModel kernels;
  // Collectives: the share of a link's bandwidth their bus reaches, and each call's fixed cost.
  double bus_efficiency = kBusEfficiency, collective_latency = kCollectiveLatency;
};

const std::vector<Gpu>& gpu_presets();
const std::vector<Link>& link_presets();
const Gpu* find_gpu(const std::string& name);
const Link* find_link(const std::string& name);

// One virtual stage's share of the network, per GPU of its tensor-parallel group, per microbatch.
struct StageFigures {
  int stage = 0;
  int layers = 0;
  bool embedding = false, head = false;  // holds the input embedding / the final norm + LM head
  double params = 0;                     // parameters per GPU (÷ t)
  std::int64_t static_bytes = 0;         // weights + gradients + optimizer state
  std::int64_t activation_bytes = 0;     // stashed by one F until its backward
  std::int64_t weight_stash_bytes = 0;   // what W still needs after I
  double flops_forward = 0, flops_backward_input = 0, flops_backward_weight = 0;
  double forward = 0, backward_input = 0, backward_weight = 0;  // seconds
  // Per-op costs (no flops_efficiency): the three by what they are spent on, and the step's
  // phases of this stage: its gradient buckets, optimizer and parameter all-gather (seconds).
  PassTimes times;
  std::vector<GradBucket> buckets;
  double optimizer = 0, param_gather = 0;
};

struct Derivation {
  std::vector<StageFigures> stages;  // one per virtual stage
  std::int64_t boundary_bytes = 0;   // a tensor crossing two stages, per GPU
  double bytes_per_param = 18;
  double achieved_flops = 0;  // peak x efficiency, FLOP/s
  Link link;                  // between stages
  bool per_op = false;        // costs from kernels and collectives, not one efficiency
  double embedding_sync = 0;  // the tied embedding's all-reduce between first and last stage
  double model_flops = 0;     // one sequence's training FLOPs as Megatron counts them
  int gpus_per_node = 8;
  Link intra_node, inter_node;
};

// Layer counts per position along a microbatch's route of `route_stages` stages:
// `layout.layers_per_stage`, or L / route_stages each. Throws std::invalid_argument when L does
// not split as asked.
std::vector<int> stage_layers(const Transformer& m, const Layout& layout, int route_stages);

// `positions[s]`: virtual stage s's place along its route (0 = the embedding's stage,
// route_stages - 1 = the LM head's). A linear schedule has positions 0..S-1; DualPipe's two
// routes each run the whole network, so each of its stages holds L / P layers. Throws
// std::invalid_argument when the layers do not split as asked.
Derivation derive(const Transformer& m, const Layout& layout, const Hardware& hw,
                  const std::vector<int>& positions, int route_stages);

}  // namespace ppsim::model
