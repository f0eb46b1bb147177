#pragma once
// The whole training step of a layout (docs/MODEL.md, "The whole step"): every stage's F, I and
// W from its kernels and collectives (layer_costs.hpp), and the phases after the pipeline
// (step_phases.hpp) in seconds: gradient buckets, the tied embedding's all-reduce, the optimizer
// and the distributed optimizer's parameter all-gather.
#include <vector>

#include "ppsim/model/transformer.hpp"

namespace ppsim::model {

// Megatron's DDP bucket: max(40M, 1M·d) parameters (distributed/distributed_data_parallel
// _config.py); with overlap_grad_reduce off all of a stage's gradients are one bucket.
double bucket_params(int data_parallel);

// Bytes of HBM traffic per local parameter of one optimizer step, counted from the kernels
// Megatron's mixed-precision Adam runs (docs/MODEL.md).
double optimizer_bytes_per_param(int dtype_bytes, bool fp16);

// Fills each stage's per-op times and phases, and the derivation's step figures, into the
// stages derive() made; `route_stages` as it takes it.
void derive_step(const Transformer& m, const Layout& layout, const Hardware& hw, int route_stages,
                 Derivation& d);

}  // namespace ppsim::model
