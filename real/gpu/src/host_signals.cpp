#include "host_signals.hpp"

#include <cuda.h>  // driver types only: the function comes through driver_fn
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "driver_entry.hpp"
#include "ppsim/real/gpu/checks.hpp"

namespace ppsim::real::gpu {

namespace {

decltype(&cuStreamWriteValue32) write_value32() {
  static const auto fn = driver_fn<decltype(&cuStreamWriteValue32)>("cuStreamWriteValue32");
  return fn;
}

}  // namespace

HostSignals::HostSignals(std::size_t count) : count_(count) {
  const std::size_t bytes = std::max<std::size_t>(count, 1) * kStride * sizeof(std::uint32_t);
  CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host_), bytes,
                           cudaHostAllocMapped | cudaHostAllocPortable));
  for (std::size_t i = 0; i < count_; ++i) __atomic_store_n(slot(i), 0u, __ATOMIC_RELEASE);
  CUDA_CHECK(cudaHostGetDevicePointer(&device_, host_, 0));
  available_ = write_value32() != nullptr;
  if (!available_) note_ = "this driver has no cuStreamWriteValue32";
  if (const char* env = std::getenv("PPSIM_HOST_SIGNALS"); env && std::strcmp(env, "0") == 0) {
    available_ = false;
    note_ = "host signals off (PPSIM_HOST_SIGNALS=0)";
  }
}

HostSignals::~HostSignals() {
  if (host_) (void)cudaFreeHost(host_);
}

void HostSignals::refuse(std::string why) {
  std::lock_guard lock(mu_);
  if (!available_.exchange(false)) return;
  note_ = std::move(why);
}

std::string HostSignals::note() const {
  std::lock_guard lock(mu_);
  return note_;
}

bool HostSignals::write(cudaStream_t stream, std::size_t i, std::uint32_t value) {
  if (!available()) return false;
  const auto address = reinterpret_cast<CUdeviceptr>(static_cast<char*>(device_) +
                                                     i * kStride * sizeof(std::uint32_t));
  const CUresult r =
      write_value32()(reinterpret_cast<CUstream>(stream), address, value, 0 /* with a fence */);
  if (r == CUDA_SUCCESS) return true;
  refuse(fmt::format("cuStreamWriteValue32 on mapped host memory failed (driver error {})",
                     static_cast<int>(r)));
  return false;
}

bool HostSignals::probe(cudaStream_t stream, std::size_t i, std::uint32_t value) {
  if (!write(stream, i, value)) return false;
  CUDA_CHECK(cudaStreamSynchronize(stream));
  if (reached(i, value) && !reached(i, value + 1)) return true;
  refuse(fmt::format("a value written by cuStreamWriteValue32 did not arrive in host memory"));
  return false;
}

}  // namespace ppsim::real::gpu
