// cuBLAS and NCCL loaded on first use instead of at process start. Linking them made every
// `ppsim` run (also `run --json`, `--help`) map and relocate ~800 MB of shared libraries
// (libcublasLt, libnccl) before main: ~0.05 s CPU and most of the peak RSS of a small run. Each
// function the backends call is defined here once, with the header's signature, and forwards to
// the real one, looked up with dlopen/dlsym the first time. A library that cannot be loaded makes
// the call return an error status whose message (the *String functions) says why.
#include <cublas_v2.h>
#include <dlfcn.h>
#include <nccl.h>

#include <string>

namespace {

struct Lib {
  void* handle = nullptr;
  std::string error;  // why it could not be loaded
};

Lib open_lib(const char* configured, const char* soname) {
  Lib lib;
  for (const char* name : {configured, soname}) {
    if ((lib.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) return lib;
    if (const char* e = dlerror()) lib.error += std::string(lib.error.empty() ? "" : "; ") + e;
  }
  return lib;
}

const Lib& cublas_lib() {
  static const Lib lib = open_lib(PPSIM_CUBLAS_LIBRARY, "libcublas.so." PPSIM_CUBLAS_SOVERSION);
  return lib;
}
const Lib& nccl_lib() {
  static const Lib lib = open_lib(PPSIM_NCCL_LIBRARY, "libnccl.so.2");
  return lib;
}

template <class Fn>
Fn* lookup(const Lib& lib, const char* name) {
  return lib.handle ? reinterpret_cast<Fn*>(dlsym(lib.handle, name)) : nullptr;
}

const std::string& cublas_missing() {
  static const std::string msg = "cuBLAS could not be loaded: " + cublas_lib().error;
  return msg;
}
const std::string& nccl_missing() {
  static const std::string msg = "NCCL could not be loaded: " + nccl_lib().error;
  return msg;
}

}  // namespace

// One forwarding definition: looks the symbol up once, returns `fail` when it is missing.
#define PPSIM_FORWARD(LIB, FAIL, RET, NAME, PARAMS, ARGS) \
  RET NAME PARAMS {                                       \
    using Fn = RET PARAMS;                                \
    static Fn* const fn = lookup<Fn>(LIB##_lib(), #NAME); \
    if (fn == nullptr) return FAIL;                       \
    return fn ARGS;                                       \
  }

extern "C" {

PPSIM_FORWARD(cublas, CUBLAS_STATUS_NOT_INITIALIZED, cublasStatus_t, cublasCreate_v2,
              (cublasHandle_t * handle), (handle))
PPSIM_FORWARD(cublas, CUBLAS_STATUS_NOT_INITIALIZED, cublasStatus_t, cublasDestroy_v2,
              (cublasHandle_t handle), (handle))
PPSIM_FORWARD(cublas, CUBLAS_STATUS_NOT_INITIALIZED, cublasStatus_t, cublasSetStream_v2,
              (cublasHandle_t handle, cudaStream_t stream), (handle, stream))
PPSIM_FORWARD(cublas, cublas_missing().c_str(), const char*, cublasGetStatusName,
              (cublasStatus_t status), (status))
PPSIM_FORWARD(cublas, cublas_missing().c_str(), const char*, cublasGetStatusString,
              (cublasStatus_t status), (status))
PPSIM_FORWARD(cublas, CUBLAS_STATUS_NOT_INITIALIZED, cublasStatus_t, cublasGemmEx,
              (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
               int n, int k, const void* alpha, const void* A, cudaDataType Atype, int lda,
               const void* B, cudaDataType Btype, int ldb, const void* beta, void* C,
               cudaDataType Ctype, int ldc, cublasComputeType_t computeType, cublasGemmAlgo_t algo),
              (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype,
               ldc, computeType, algo))

PPSIM_FORWARD(nccl, ncclSystemError, ncclResult_t, ncclGetVersion, (int* version), (version))
PPSIM_FORWARD(nccl, nccl_missing().c_str(), const char*, ncclGetErrorString, (ncclResult_t result),
              (result))
PPSIM_FORWARD(nccl, ncclSystemError, ncclResult_t, ncclCommInitAll,
              (ncclComm_t * comm, int ndev, const int* devlist), (comm, ndev, devlist))
PPSIM_FORWARD(nccl, ncclSystemError, ncclResult_t, ncclCommDestroy, (ncclComm_t comm), (comm))
PPSIM_FORWARD(nccl, ncclSystemError, ncclResult_t, ncclCommAbort, (ncclComm_t comm), (comm))
PPSIM_FORWARD(nccl, ncclSystemError, ncclResult_t, ncclGroupStart, (), ())
PPSIM_FORWARD(nccl, ncclSystemError, ncclResult_t, ncclGroupEnd, (), ())
PPSIM_FORWARD(nccl, ncclSystemError, ncclResult_t, ncclSend,
              (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
               ncclComm_t comm, cudaStream_t stream),
              (sendbuff, count, datatype, peer, comm, stream))
PPSIM_FORWARD(nccl, ncclSystemError, ncclResult_t, ncclRecv,
              (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
               cudaStream_t stream),
              (recvbuff, count, datatype, peer, comm, stream))
// The collectives `--calibrate` measures (nccl transport).
PPSIM_FORWARD(nccl, ncclSystemError, ncclResult_t, ncclAllReduce,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),
              (sendbuff, recvbuff, count, datatype, op, comm, stream))
PPSIM_FORWARD(nccl, ncclSystemError, ncclResult_t, ncclAllGather,
              (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
               ncclComm_t comm, cudaStream_t stream),
              (sendbuff, recvbuff, sendcount, datatype, comm, stream))
PPSIM_FORWARD(nccl, ncclSystemError, ncclResult_t, ncclReduceScatter,
              (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),
              (sendbuff, recvbuff, recvcount, datatype, op, comm, stream))
PPSIM_FORWARD(nccl, ncclSystemError, ncclResult_t, ncclBroadcast,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
               int root, ncclComm_t comm, cudaStream_t stream),
              (sendbuff, recvbuff, count, datatype, root, comm, stream))

}  // extern "C"
