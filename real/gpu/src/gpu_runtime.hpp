#pragma once
// The GPUs of this process, shared by the GPU transports and compute (internal to real/gpu/):
// which device each rank uses, its stream (in a green context holding its share of the SMs when
// several ranks share one GPU), its device memory pool (its peak is the measured peak), and its
// cuBLAS handle. Set up once per layout and kept across iterations.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "stream_gates.hpp"

namespace ppsim::real::gpu {

struct RankGpu {
  int device = 0;
  cudaStream_t stream = nullptr;  // where the rank's compute runs
  void* green_ctx = nullptr;      // CUcontext of its green context (nullptr: the primary one)
  cudaMemPool_t pool = nullptr;   // its activation stashes
  cublasHandle_t cublas = nullptr;
  int sms = 0;  // streaming multiprocessors it may use
};

class GpuRuntime {
 public:
  // Throws BackendUnavailable when there is no driver or no device (the message says which).
  static GpuRuntime& instance();

  int device_count() const { return devices_; }
  std::string device_name(int device) const;

  // Lays `ranks` ranks out: all on device 0 (`shared`, the SMs split among them by green
  // contexts where the driver has them and PPSIM_SM_PARTITION is not 0), or rank r on device r.
  // Idempotent for the same arguments.
  void layout(int ranks, bool shared);
  // The current layout, or a shared one of `ranks` when none has that many ranks.
  void ensure_layout(int ranks);
  bool shared() const { return shared_; }
  RankGpu& rank(int r) { return ranks_.at(static_cast<std::size_t>(r)); }
  // Makes the calling thread issue into rank r's context (its green context, if any).
  void bind(int r);
  // "SM partitioning: 4 green contexts of 32 SMs (of 132)" or why there is none.
  const std::string& partition_note() const { return partition_note_; }
  // A run stopped while GPU work was under way that may never finish (a hung kernel or stream):
  // nothing may then wait for the device (cudaFree, cudaDeviceSynchronize wait for all of it).
  void mark_stalled() { stalled_.store(true); }
  // True while marked and a rank's stream still has work; the mark goes once every one is idle.
  bool stalled();
  // The flags a rank's op launched ahead waits on (armed by the cuda transport for its run).
  StreamGates& gates() { return gates_; }

 private:
  GpuRuntime();
  void release_layout();
  bool make_green_contexts(int ranks);

  int devices_ = 0;
  std::mutex mu_;
  bool shared_ = true;
  int layout_ranks_ = -1;
  std::vector<RankGpu> ranks_;
  std::string partition_note_;
  std::atomic<bool> stalled_ = false;
  StreamGates gates_;
};

// The device's name and memory, "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB)".
std::string describe_device(int device);

}  // namespace ppsim::real::gpu
