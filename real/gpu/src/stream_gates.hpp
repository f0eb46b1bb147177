#pragma once
// Flags in pinned host memory, one per comm op of the program, that let a rank's next compute op
// be enqueued ahead of its call (internal to real/gpu/). The op's stream waits for the flags of
// the transfers the rank blocks on before it (cuStreamWaitValue32); the stream that moves a
// transfer raises its two flags after the copy (cuStreamWriteValue32). So the op starts when its
// transfers have completed on the GPU, without the host noticing them first and then launching
// it. A flag is raised when it holds the run's epoch: a new run needs no reset, and the host can
// raise every flag itself (a store), so that a stopped run leaves nothing waiting on the GPU.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace ppsim::real::gpu {

class StreamGates {
 public:
  StreamGates() = default;
  ~StreamGates();
  StreamGates(const StreamGates&) = delete;
  StreamGates& operator=(const StreamGates&) = delete;

  // A run whose transport raises the flags starts: flags for `ops_per_rank` ops, a new epoch.
  // False (and not armed) when this driver lacks the stream memory operations, the memory cannot
  // be had, or PPSIM_LAUNCH_AHEAD is 0; note() says why. `keep_old`: the previous flags may still
  // be waited on by a stalled stream, so they are never freed.
  bool arm(const std::vector<std::size_t>& ops_per_rank, bool keep_old);
  // The run's transport is done with them: later runs launch nothing ahead until armed again.
  void disarm() { armed_.store(false, std::memory_order_release); }
  bool armed() const { return armed_.load(std::memory_order_acquire); }
  std::string note() const;

  // Enqueues on `stream`: wait until the flag of op `pos` of `rank` is raised.
  bool wait(cudaStream_t stream, int rank, int pos);
  // Enqueues on `stream`: raise that flag once the stream's earlier work has completed.
  void raise(cudaStream_t stream, int rank, int pos);
  // Raises it now, from the host.
  void raise_now(int rank, int pos);
  // Raises every flag now: nothing still waits on one after a run stopped.
  void raise_all();

 private:
  std::size_t index(int rank, int pos) const {
    return offsets_[static_cast<std::size_t>(rank)] + static_cast<std::size_t>(pos);
  }
  void refuse(std::string why);

  std::vector<std::size_t> offsets_;
  std::size_t count_ = 0;
  std::uint32_t* host_ = nullptr;
  void* device_ = nullptr;  // the same memory as the GPU sees it
  std::uint32_t epoch_ = 0;
  std::atomic<bool> armed_ = false;
  mutable std::mutex mu_;
  std::string note_ = "not armed";
};

}  // namespace ppsim::real::gpu
