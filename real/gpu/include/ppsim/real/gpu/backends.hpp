#pragma once
// The GPU backends of the executor (docs/EXECUTOR.md "GPUs"): the `cuda` compute, the `cuda`
// transport (several ranks on one GPU) and the `nccl` transport (one GPU per rank).
namespace ppsim::real::gpu {

// Adds them to TransportRegistry and ComputeRegistry (idempotent). Call before a config's `real`
// section is checked, so that it accepts their names.
void register_backends();

}  // namespace ppsim::real::gpu
