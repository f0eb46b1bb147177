// The GPU backends on a GPU (ctest gpu.backends; `ppsim_gpu_tests stall` is ctest gpu.stall).
// Without a usable GPU it checks what it can (the CHECK macros' messages, the error for a missing
// device), then exits 77: ctest reports SKIP with the reason printed here. Each check prints one
// line; any failure exits 1.
#include <fmt/format.h>

#include <cuda.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <string>

#include "../src/gpu_runtime.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/real/backend_error.hpp"
#include "ppsim/real/comparison.hpp"
#include "ppsim/real/compute.hpp"
#include "ppsim/real/executor.hpp"
#include "ppsim/real/gpu/backends.hpp"
#include "ppsim/real/gpu/checks.hpp"
#include "ppsim/real/mlp_model.hpp"
#include "ppsim/real/settings.hpp"
#include "ppsim/sim/analysis.hpp"

namespace {

int failures = 0;

// The checkout whose configs/ it reads: the build's, or $PPSIM_SOURCE_DIR (a copy of the binary
// run elsewhere: scripts/gpu-bundle.sh).
std::string source_dir() {
  const char* env = std::getenv("PPSIM_SOURCE_DIR");
  return env && *env ? env : PPSIM_SOURCE_DIR;
}

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

template <typename Fn>
std::string thrown(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

ppsim::config::Config make_config(const std::string& bundled, int ranks, int microbatches) {
  std::ifstream in(source_dir() + "/configs/" + bundled);
  nlohmann::json j = nlohmann::json::parse(in);
  j["schedule"]["ranks"] = ranks;
  j["schedule"]["microbatches"] = microbatches;
  j["model"] = {{"hidden", 1024}, {"sequence_length", 1024}};
  j["memory"]["activation_bytes"] = 4 << 20;  // whole 2 MiB pages: peaks compare exactly
  j["memory"]["static_bytes"] = 0;
  return ppsim::config::parse_config(j, bundled);
}

ppsim::real::Execution run(const ppsim::config::Config& c, const std::string& backend,
                           const std::string& compute, double hang_timeout = 2) {
  ppsim::real::Settings s;
  s.backend = backend;
  s.compute = compute;
  s.time_scale = 1e-3;
  s.iterations = 2;
  s.warmup = 1;
  s.hang_timeout = hang_timeout;
  const auto prepared = ppsim::config::prepare(c, {0, ppsim::config::Workload::trace});
  return ppsim::real::execute(prepared, {s, nullptr});
}

// cuStreamWaitValue32, from the driver (not linked).
using WaitValue = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
WaitValue wait_value() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, CUDART_VERSION,
                                       cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<WaitValue>(fn);
}

// The cuda compute, except that rank 1's third op first makes its stream wait for a flag in
// memory that nobody sets (cuStreamWaitValue32): a GPU hang, for the watchdog to catch. Where the
// cuda compute launches each op ahead (during the previous op's call), the wait goes in one call
// earlier, so that it is still the third op that waits.
class StallingCompute final : public ppsim::real::Compute {
 public:
  explicit StallingCompute(std::uint32_t* flag)
      : inner_(ppsim::real::ComputeRegistry::instance().find("cuda")->make()), flag_(flag) {}
  void begin(const ppsim::real::ComputeContext& c) override {
    seen_ = 0;
    inner_->begin(c);
    ahead_ = ppsim::real::gpu::GpuRuntime::instance().gates().armed();
  }
  void run(int rank, const ppsim::schedules::Op& op, double start, double duration, double blocked,
           std::span<ppsim::real::Buffer* const> in,
           std::span<ppsim::real::Buffer* const> out) override {
    if (rank == 1 && ++seen_ == (ahead_ ? 2 : 3)) {
      auto& rt = ppsim::real::gpu::GpuRuntime::instance();
      rt.bind(rank);
      const CUresult r =
          wait_value()(reinterpret_cast<CUstream>(rt.rank(rank).stream),
                       reinterpret_cast<CUdeviceptr>(flag_), 1, CU_STREAM_WAIT_VALUE_GEQ);
      if (r != CUDA_SUCCESS) throw std::runtime_error("cuStreamWaitValue32 failed");
    }
    inner_->run(rank, op, start, duration, blocked, in, out);
  }
  std::vector<std::string> report() const override { return inner_->report(); }
  std::optional<std::pair<double, double>> span(int rank) const override {
    return inner_->span(rank);
  }
  void end() override { inner_->end(); }
  bool holds_memory() const override { return inner_->holds_memory(); }
  bool may_hang() const override { return inner_->may_hang(); }

 private:
  std::unique_ptr<ppsim::real::Compute> inner_;
  std::uint32_t* flag_;
  int seen_ = 0;
  bool ahead_ = false;
};

// ctest gpu.stall (a process of its own: a GPU that hangs may take the process with it). A GPU op
// that never completes: the watchdog stops the run and names the op, and nothing waits for the
// stalled stream on the way out. The flag is host memory mapped into the GPU, so that the host
// releases the stream without any GPU queue (one could sit behind the stalled one).
int stall_test() {
  using namespace ppsim;
  CUDA_CHECK(cudaSetDevice(0));
  std::uint32_t* flag = nullptr;
  void* device_flag = nullptr;
  CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&flag), sizeof *flag, cudaHostAllocMapped));
  __atomic_store_n(flag, 0u, __ATOMIC_SEQ_CST);
  CUDA_CHECK(cudaHostGetDevicePointer(&device_flag, flag, 0));
  {  // A wait that is met at once, on a stream of its own: can this GPU wait on host memory?
    if (!wait_value()) {
      std::printf("SKIP: this driver has no cuStreamWaitValue32\n");
      return 77;
    }
    cudaStream_t s = nullptr;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const CUresult r =
        wait_value()(reinterpret_cast<CUstream>(s), reinterpret_cast<CUdeviceptr>(device_flag), 0,
                     CU_STREAM_WAIT_VALUE_GEQ);
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaStreamDestroy(s));
    if (r != CUDA_SUCCESS) {
      std::printf("SKIP: cuStreamWaitValue32 on mapped host memory failed (%d)\n",
                  static_cast<int>(r));
      return 77;
    }
  }
  real::ComputeRegistry::instance().add(
      {"test-stalling-cuda", "the cuda compute; rank 1's third op never completes", [device_flag] {
         return std::make_unique<StallingCompute>(static_cast<std::uint32_t*>(device_flag));
       }});
  const auto c = make_config("1f1b.json", 4, 8);
  real::Execution ex;
  const std::string threw = thrown([&] { ex = run(c, "cuda", "test-stalling-cuda", 0.5); });
  check(threw.empty() && ex.outcome == real::Outcome::failed && ex.failure.find("rank 1 op") == 0 &&
            ex.failure.find("never completed its work") != std::string::npos,
        "a GPU op that never completes: the watchdog stops the run and names it: " + threw +
            ex.failure);
  check(real::gpu::GpuRuntime::instance().stalled(), "the runtime knows the GPU is stalled");
  __atomic_store_n(flag, 1u, __ATOMIC_SEQ_CST);
  CUDA_CHECK(cudaDeviceSynchronize());
  check(!real::gpu::GpuRuntime::instance().stalled(), "the stalled stream drained once released");
  std::printf("%s\n", failures ? "FAILED" : "all passed");
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ppsim;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line out at once, should the GPU hang
  real::gpu::register_backends();
  real::register_settings_section();
  const bool stall = argc > 1 && std::string(argv[1]) == "stall";

  // The macros, on calls that fail whether or not there is a GPU.
  const std::string cuda = thrown([] { CUDA_CHECK(cudaSetDevice(1 << 20)); });
  check(cuda.find("gpu_tests.cpp:") == 0 && cuda.find("CUDA error") != std::string::npos &&
            cuda.find("cudaError") != std::string::npos &&
            cuda.find("in cudaSetDevice(1 << 20)") != std::string::npos,
        "CUDA_CHECK names file:line, the error and the call: " + cuda);
  const std::string nccl = thrown([] { NCCL_CHECK(ncclInvalidArgument); });
  check(nccl.find("NCCL error 4 (") != std::string::npos, "NCCL_CHECK: " + nccl);
  const std::string blas = thrown([] { CUBLAS_CHECK(CUBLAS_STATUS_INVALID_VALUE); });
  check(blas.find("cuBLAS error 7 (CUBLAS_STATUS_INVALID_VALUE") != std::string::npos,
        "CUBLAS_CHECK: " + blas);

  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    const std::string why = thrown([] { (void)real::gpu::GpuRuntime::instance(); });
    check(why.find("no ") == 0, "without a GPU the runtime says so: " + why);
    std::printf("SKIP: no usable CUDA device (%s); the GPU runs need one\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return failures ? 1 : 77;
  }
  if (stall) return stall_test();
  std::printf("device: %s, %d GPU(s)\n", real::gpu::describe_device(0).c_str(), devices);

  // Several ranks on one GPU: the run finishes, agrees with the simulator, and the device
  // stash peaks are the predicted ones.
  for (const char* bundled : {"1f1b.json", "gpipe.json"}) {
    const auto c = make_config(bundled, 4, 8);
    const auto ex = run(c, "cuda", "cuda");
    const auto predicted =
        sim::analyze(config::prepare(c, {0, config::Workload::trace}), {.trace = true});
    const auto cmp = real::compare(predicted, ex.record);
    check(ex.outcome == real::Outcome::finished && cmp.verdicts_agree,
          fmt::format("{} on cuda/cuda finishes as predicted ({})", bundled, ex.failure));
    bool inflight = true;
    for (const auto& r : cmp.ranks)
      inflight = inflight && r.predicted_inflight == r.measured_inflight;
    check(inflight, fmt::format("{}: in-flight peaks equal", bundled));
    bool stash_ok = false, partitioned = false, ahead = false;
    for (const auto& line : ex.notes) {
      std::printf("     %s\n", line.c_str());
      if (line.find("stash peaks equal yes") == 0) stash_ok = true;
      if (line.find("gpu ") == 0 && line.find("green contexts") != std::string::npos)
        partitioned = true;
      if (line.find("launched ahead ") == 0 && line.find("launched ahead   no") != 0 &&
          line.find("launched ahead   0 of") != 0)
        ahead = true;
    }
    check(stash_ok, fmt::format("{}: device stash peaks equal the prediction", bundled));
    // Each rank in a green context of its own: every op after a rank's first is enqueued during
    // the previous op's call, behind its transfers' flags (PPSIM_LAUNCH_AHEAD=0 turns it off).
    const char* off = std::getenv("PPSIM_LAUNCH_AHEAD");
    if (partitioned && !(off && std::string(off) == "0"))
      check(ahead, fmt::format("{}: ops launched ahead behind their transfers' flags", bundled));
  }

  // The all-blocking 1F1B hangs on the GPU as the simulator predicts; the watchdog stops it.
  {
    std::ifstream in(source_dir() + "/configs/1f1b-blocking-deadlock.json");
    nlohmann::json j = nlohmann::json::parse(in);
    j["model"] = {{"hidden", 512}, {"sequence_length", 512}};
    const auto c = config::parse_config(j, "1f1b-blocking-deadlock.json");
    const auto ex = run(c, "cuda", "cuda", 0.5);
    const auto predicted =
        sim::analyze(config::prepare(c, {0, config::Workload::trace}), {.trace = true});
    const auto cmp = real::compare(predicted, ex.record);
    check(ex.outcome == real::Outcome::hang && cmp.verdicts_agree,
          "all-blocking 1F1B hangs on cuda as predicted: " + cmp.measured_verdict);
  }

  // Eager sends (comm.eager_limit covers the message): a send completes when posted and its copy
  // goes at once. The all-blocking 1F1B then runs, as predicted; under fifo matching too. Each
  // message goes from the send the simulator pairs it with, and the in-flight peaks are equal.
  for (const char* matching : {"tag", "fifo"}) {
    std::ifstream in(source_dir() + "/configs/1f1b-blocking-deadlock.json");
    nlohmann::json j = nlohmann::json::parse(in);
    j["model"] = {{"hidden", 512}, {"sequence_length", 512}};
    j["comm"]["eager_limit"] = 1e12;
    j["comm"]["matching"] = matching;
    const auto c = config::parse_config(j, "1f1b-blocking-deadlock.json");
    const auto ex = run(c, "cuda", "cuda");
    const auto predicted =
        sim::analyze(config::prepare(c, {0, config::Workload::trace}), {.trace = true});
    const auto cmp = real::compare(predicted, ex.record);
    check(ex.outcome == real::Outcome::finished && cmp.verdicts_agree,
          fmt::format("eager sends ({} matching): the all-blocking 1F1B runs on cuda as predicted "
                      "({}{})",
                      matching, cmp.measured_verdict, ex.failure));
    const auto pairs = [](const record::RunRecord& r) {
      std::vector<std::array<int, 4>> p;
      if (r.trace)
        for (const auto& t : r.trace->transfers)
          p.push_back({t.src_rank, t.src_pos, t.dst_rank, t.dst_pos});
      std::sort(p.begin(), p.end());
      return p;
    };
    const auto got = pairs(ex.record), want = pairs(predicted);
    check(!want.empty() && got == want,
          fmt::format("eager sends ({}): the {} messages pair the predicted sends and receives "
                      "({} measured)",
                      matching, want.size(), got.size()));
    bool inflight = true;
    for (const auto& r : cmp.ranks)
      inflight = inflight && r.predicted_inflight == r.measured_inflight;
    check(inflight && ex.record.diagnostics.empty(),
          fmt::format("eager sends ({}): in-flight peaks equal, no hazard", matching));
  }

  // NCCL: one GPU per rank, as many ranks as there are GPUs (at least 2); with one GPU the
  // backend says to use cuda.
  if (devices >= 2) {
    const auto c = make_config("1f1b.json", devices >= 4 ? 4 : 2, 8);
    const auto ex = run(c, "nccl", "cuda");
    check(ex.outcome == real::Outcome::finished, "1f1b on nccl/cuda finishes: " + ex.failure);
    const auto dl = make_config("1f1b-blocking-deadlock.json", 2, 4);
    const auto hung = run(dl, "nccl", "cuda", 0.5);
    check(hung.outcome == real::Outcome::hang, "all-blocking 1F1B hangs on nccl, aborted cleanly");
  } else {
    const auto c = make_config("1f1b.json", 4, 8);
    const std::string why = thrown([&] { (void)run(c, "nccl", "cuda"); });
    check(why.find("use --backend cuda") != std::string::npos,
          "nccl with fewer GPUs than ranks says to use cuda: " + why);
    // What one GPU allows: NCCL itself, one rank (a communicator of one) is all it takes.
    ncclComm_t comm = nullptr;
    int dev = 0;
    const std::string init = thrown([&] { NCCL_CHECK(ncclCommInitAll(&comm, 1, &dev)); });
    check(init.empty(), "NCCL initialises a communicator on this GPU " + init);
    if (comm) ncclCommDestroy(comm);
  }
  std::printf("%s\n", failures ? "FAILED" : "all passed");
  return failures ? 1 : 0;
}
