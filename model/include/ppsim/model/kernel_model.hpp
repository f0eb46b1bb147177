#pragma once
// The constants of the kernel model (kernels.hpp), fitted to measured runs (docs/MODEL.md says
// on which); `hardware.kernels` replaces them.

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

}  // namespace ppsim::model
