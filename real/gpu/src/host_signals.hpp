#pragma once
// Counters in pinned host memory that streams write when they reach a point
// (cuStreamWriteValue32), so that a host thread sees the GPU's progress with a memory read instead
// of a driver call per poll (cudaEventQuery), which also takes the context's lock that launches
// take (internal to real/gpu/).
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace ppsim::real::gpu {

class HostSignals {
 public:
  // `count` counters at 0, each on a cache line of its own (the host spins on them). Allocates in
  // the calling thread's current device; the memory is portable: any context may write it.
  explicit HostSignals(std::size_t count);
  ~HostSignals();
  HostSignals(const HostSignals&) = delete;
  HostSignals& operator=(const HostSignals&) = delete;

  // False when this driver lacks cuStreamWriteValue32, a write failed, or PPSIM_HOST_SIGNALS is 0:
  // callers then poll events instead (note() says why, for the report).
  bool available() const { return available_.load(std::memory_order_acquire); }
  std::string note() const;
  std::size_t size() const { return count_; }

  // Enqueues on `stream`: counter `i` becomes `value` once the stream's earlier work has
  // completed. False (and no longer available) when the driver refuses.
  bool write(cudaStream_t stream, std::size_t i, std::uint32_t value);
  // Writes `value` (above the counter's) through `stream`, waits for the stream and checks that it
  // arrived: whether this stream's context may write host memory this way (a failure turns the
  // signals off).
  bool probe(cudaStream_t stream, std::size_t i, std::uint32_t value);
  // True once counter `i` has reached `value` (counters only grow; a wrap of 2^31 is allowed).
  bool reached(std::size_t i, std::uint32_t value) const {
    const std::uint32_t now = __atomic_load_n(slot(i), __ATOMIC_ACQUIRE);
    return static_cast<std::int32_t>(now - value) >= 0;
  }

 private:
  static constexpr std::size_t kStride = 64 / sizeof(std::uint32_t);  // one cache line each
  std::uint32_t* slot(std::size_t i) const { return host_ + i * kStride; }
  void refuse(std::string why);

  std::size_t count_ = 0;
  std::uint32_t* host_ = nullptr;
  void* device_ = nullptr;  // the same memory as the GPU sees it
  std::atomic<bool> available_ = false;
  mutable std::mutex mu_;
  std::string note_;  // why not available
};

}  // namespace ppsim::real::gpu
