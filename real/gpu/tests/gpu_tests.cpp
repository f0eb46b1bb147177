// The GPU backends on a GPU (ctest gpu.backends). Without a usable GPU it checks what it can (the
// CHECK macros' messages, the error for a missing device), then exits 77: ctest reports SKIP with
// the reason printed here. Each check prints one line; any failure exits 1.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "../src/gpu_runtime.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/real/backend_error.hpp"
#include "ppsim/real/comparison.hpp"
#include "ppsim/real/executor.hpp"
#include "ppsim/real/gpu/backends.hpp"
#include "ppsim/real/gpu/checks.hpp"
#include "ppsim/real/mlp_model.hpp"
#include "ppsim/real/settings.hpp"
#include "ppsim/sim/analysis.hpp"

namespace {

int failures = 0;

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
  std::ifstream in(std::string(PPSIM_SOURCE_DIR) + "/configs/" + bundled);
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

}  // namespace

int main() {
  using namespace ppsim;
  real::gpu::register_backends();
  real::register_settings_section();
  real::register_model_section();

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
    bool stash_ok = false;
    for (const auto& line : ex.notes) {
      std::printf("     %s\n", line.c_str());
      if (line.find("stash peaks equal yes") == 0) stash_ok = true;
    }
    check(stash_ok, fmt::format("{}: device stash peaks equal the prediction", bundled));
  }

  // The all-blocking 1F1B hangs on the GPU as the simulator predicts; the watchdog stops it.
  {
    std::ifstream in(std::string(PPSIM_SOURCE_DIR) + "/configs/1f1b-blocking-deadlock.json");
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
