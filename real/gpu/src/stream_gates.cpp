#include "stream_gates.hpp"

#include <cuda.h>  // driver types only: the functions come through driver_fn
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <numeric>
#include <utility>

#include "driver_entry.hpp"
#include "ppsim/real/gpu/checks.hpp"

namespace ppsim::real::gpu {

namespace {

decltype(&cuStreamWaitValue32) wait_value32() {
  static const auto fn = driver_fn<decltype(&cuStreamWaitValue32)>("cuStreamWaitValue32");
  return fn;
}
decltype(&cuStreamWriteValue32) write_value32() {
  static const auto fn = driver_fn<decltype(&cuStreamWriteValue32)>("cuStreamWriteValue32");
  return fn;
}

}  // namespace

StreamGates::~StreamGates() {
  if (host_) (void)cudaFreeHost(host_);
}

bool StreamGates::arm(const std::vector<std::size_t>& ops_per_rank, bool keep_old) {
  armed_.store(false, std::memory_order_release);
  if (const char* env = std::getenv("PPSIM_LAUNCH_AHEAD"); env && std::strcmp(env, "0") == 0) {
    refuse("off (PPSIM_LAUNCH_AHEAD=0)");
    return false;
  }
  if (!wait_value32() || !write_value32()) {
    refuse("this driver has no cuStreamWaitValue32 / cuStreamWriteValue32");
    return false;
  }
  offsets_.assign(ops_per_rank.size(), 0);
  std::exclusive_scan(ops_per_rank.begin(), ops_per_rank.end(), offsets_.begin(), std::size_t{0});
  const std::size_t count = std::max<std::size_t>(
      1, std::accumulate(ops_per_rank.begin(), ops_per_rank.end(), std::size_t{0}));
  if (count > count_ || !host_) {
    if (host_ && !keep_old) (void)cudaFreeHost(host_);
    host_ = nullptr;
    const cudaError_t e =
        cudaHostAlloc(reinterpret_cast<void**>(&host_), count * sizeof(std::uint32_t),
                      cudaHostAllocMapped | cudaHostAllocPortable);
    if (e != cudaSuccess) {
      host_ = nullptr;
      count_ = 0;
      refuse(fmt::format("no pinned host memory for {} flags ({})", count, cudaGetErrorName(e)));
      return false;
    }
    CUDA_CHECK(cudaHostGetDevicePointer(&device_, host_, 0));
    for (std::size_t i = 0; i < count; ++i) __atomic_store_n(host_ + i, 0u, __ATOMIC_RELEASE);
    count_ = count;
    epoch_ = 0;
  }
  // Flags of earlier runs hold smaller epochs: lowered without a write (a wrap after 2^32 runs
  // starts over at 1 with every flag lowered).
  if (++epoch_ == 0) {
    for (std::size_t i = 0; i < count_; ++i) __atomic_store_n(host_ + i, 0u, __ATOMIC_RELEASE);
    epoch_ = 1;
  }
  armed_.store(true, std::memory_order_release);
  return true;
}

void StreamGates::refuse(std::string why) {
  std::lock_guard lock(mu_);
  armed_.store(false, std::memory_order_release);
  note_ = std::move(why);
}

std::string StreamGates::note() const {
  std::lock_guard lock(mu_);
  return note_;
}

bool StreamGates::wait(cudaStream_t stream, int rank, int pos) {
  const auto address = reinterpret_cast<CUdeviceptr>(static_cast<char*>(device_) +
                                                     index(rank, pos) * sizeof(std::uint32_t));
  const CUresult r =
      wait_value32()(reinterpret_cast<CUstream>(stream), address, epoch_, CU_STREAM_WAIT_VALUE_GEQ);
  if (r == CUDA_SUCCESS) return true;
  refuse(fmt::format("cuStreamWaitValue32 on mapped host memory failed (driver error {})",
                     static_cast<int>(r)));
  return false;
}

void StreamGates::raise(cudaStream_t stream, int rank, int pos) {
  const auto address = reinterpret_cast<CUdeviceptr>(static_cast<char*>(device_) +
                                                     index(rank, pos) * sizeof(std::uint32_t));
  const CUresult r =
      write_value32()(reinterpret_cast<CUstream>(stream), address, epoch_, 0 /* with a fence */);
  if (r != CUDA_SUCCESS) {
    // A waiting stream must not wait for it: raised from here, later than it could have been.
    raise_now(rank, pos);
    throw LibraryError("CUDA driver", __FILE__, __LINE__, "cuStreamWriteValue32(flag)",
                       static_cast<long long>(r), "", "see the driver's error code");
  }
}

void StreamGates::raise_now(int rank, int pos) {
  if (!host_) return;
  __atomic_store_n(host_ + index(rank, pos), epoch_, __ATOMIC_RELEASE);
}

void StreamGates::raise_all() {
  for (std::size_t i = 0; i < count_; ++i) __atomic_store_n(host_ + i, epoch_, __ATOMIC_RELEASE);
}

}  // namespace ppsim::real::gpu
