#pragma once
// CUDA_CHECK / CUBLAS_CHECK / NCCL_CHECK: a failed call throws real::LibraryError saying where
// (file:line), which call, and the library's code, name and message. The executor then stops the
// run and names the rank and op (exit 3).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "ppsim/real/backend_error.hpp"

#define CUDA_CHECK(expr)                                                                           \
  do {                                                                                             \
    const cudaError_t ppsim_e_ = (expr);                                                           \
    if (ppsim_e_ != cudaSuccess)                                                                   \
      throw ::ppsim::real::LibraryError("CUDA", __FILE__, __LINE__, #expr, ppsim_e_,               \
                                        cudaGetErrorName(ppsim_e_), cudaGetErrorString(ppsim_e_)); \
  } while (0)

#define CUBLAS_CHECK(expr)                                                             \
  do {                                                                                 \
    const cublasStatus_t ppsim_s_ = (expr);                                            \
    if (ppsim_s_ != CUBLAS_STATUS_SUCCESS)                                             \
      throw ::ppsim::real::LibraryError("cuBLAS", __FILE__, __LINE__, #expr, ppsim_s_, \
                                        cublasGetStatusName(ppsim_s_),                 \
                                        cublasGetStatusString(ppsim_s_));              \
  } while (0)

// ncclInProgress is not a failure (non-blocking communicators); every other code but ncclSuccess
// is.
#define NCCL_CHECK(expr)                                                                 \
  do {                                                                                   \
    const ncclResult_t ppsim_r_ = (expr);                                                \
    if (ppsim_r_ != ncclSuccess && ppsim_r_ != ncclInProgress)                           \
      throw ::ppsim::real::LibraryError("NCCL", __FILE__, __LINE__, #expr, ppsim_r_, "", \
                                        ncclGetErrorString(ppsim_r_));                   \
  } while (0)
