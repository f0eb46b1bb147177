#pragma once
// The constants of the kernel model (kernels.hpp) and of the collectives (collectives.hpp), fitted
// to measured runs or taken from NCCL (docs/MODEL.md says which); `hardware.kernels` and
// `hardware.collectives` replace them.

namespace ppsim::model {

struct KernelModel {
  // The largest tile's share of the datasheet peak (cuBLAS's best on a large square GEMM).
  double gemm_peak_fraction = 0.8;
  // The share of HBM bandwidth a streaming kernel reaches.
  double memory_fraction = 0.765;
  // The host's time to issue one kernel (the framework's Python and dispatch, then the launch):
  // the shortest a kernel can take.
  double launch = 66e-6;
};

// The share of a link's bandwidth a collective's bus reaches, and a call's fixed cost (NCCL's
// ring/Simple base latency, src/graph/tuning.cc).
inline constexpr double kBusEfficiency = 0.77;
inline constexpr double kCollectiveLatency = 8.4e-6;

}  // namespace ppsim::model
