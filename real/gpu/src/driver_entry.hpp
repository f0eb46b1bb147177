#pragma once
// A driver API function without linking libcuda (internal to real/gpu/): a machine without a
// driver still starts ppsim, and cudaGetDeviceCount says what is missing. Asked for at the
// version of the headers compiled against (CUDART_VERSION), whose prototypes these are: at 12.4,
// cuGreenCtxStreamCreate (12.5) was not found and every GPU ran without SM partitioning.
#include <cuda_runtime_api.h>

namespace ppsim::real::gpu {

// nullptr when this driver lacks it.
template <typename Fn>
Fn driver_fn(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, CUDART_VERSION, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<Fn>(fn);
}

}  // namespace ppsim::real::gpu
