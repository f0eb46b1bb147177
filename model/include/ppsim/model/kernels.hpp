#pragma once
// How long one GPU kernel runs, from its shape (docs/MODEL.md, "Kernels"): a GEMM as tiles in
// waves over the SMs, each tile at the tensor cores' rate scaled by its operand reuse, never
// faster than its operands stream from HBM; a memory-bound operator at HBM bandwidth. Device
// time only: the host's time to issue the kernels is Work's (layer_costs.cpp).
#include "ppsim/model/kernel_model.hpp"
#include "ppsim/model/transformer.hpp"

namespace ppsim::model {

// C (m x n) = A (m x k) · B (k x n), `batch` times, `bytes` per value.
double gemm_time(const KernelModel& km, const Gpu& gpu, double m, double n, double k,
                 double batch = 1, double bytes = 2);
// Seconds to read and write `bytes` of HBM in one kernel.
double memory_time(const KernelModel& km, const Gpu& gpu, double bytes);

}  // namespace ppsim::model
