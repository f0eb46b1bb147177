#include "gpu_runtime.hpp"

#include <cuda.h>  // driver types only: its functions come through cudaGetDriverEntryPointByVersion
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "driver_entry.hpp"
#include "ppsim/real/backend_error.hpp"
#include "ppsim/real/gpu/checks.hpp"

namespace ppsim::real::gpu {

namespace {

struct Driver {
  decltype(&cuDeviceGet) device_get = driver_fn<decltype(&cuDeviceGet)>("cuDeviceGet");
  decltype(&cuDeviceGetDevResource) get_resource =
      driver_fn<decltype(&cuDeviceGetDevResource)>("cuDeviceGetDevResource");
  decltype(&cuDevSmResourceSplitByCount) split =
      driver_fn<decltype(&cuDevSmResourceSplitByCount)>("cuDevSmResourceSplitByCount");
  decltype(&cuDevResourceGenerateDesc) generate =
      driver_fn<decltype(&cuDevResourceGenerateDesc)>("cuDevResourceGenerateDesc");
  decltype(&cuGreenCtxCreate) create = driver_fn<decltype(&cuGreenCtxCreate)>("cuGreenCtxCreate");
  decltype(&cuGreenCtxStreamCreate) stream_create =
      driver_fn<decltype(&cuGreenCtxStreamCreate)>("cuGreenCtxStreamCreate");
  decltype(&cuCtxFromGreenCtx) to_ctx =
      driver_fn<decltype(&cuCtxFromGreenCtx)>("cuCtxFromGreenCtx");
  decltype(&cuCtxSetCurrent) set_current = driver_fn<decltype(&cuCtxSetCurrent)>("cuCtxSetCurrent");
  decltype(&cuCtxGetCurrent) get_current = driver_fn<decltype(&cuCtxGetCurrent)>("cuCtxGetCurrent");
  decltype(&cuGetErrorString) error_string =
      driver_fn<decltype(&cuGetErrorString)>("cuGetErrorString");

  // The green-context functions this driver lacks ("" when it has them all).
  std::string missing_green() const {
    std::string out;
    const std::pair<const void*, const char*> fns[] = {
        {reinterpret_cast<const void*>(device_get), "cuDeviceGet"},
        {reinterpret_cast<const void*>(get_resource), "cuDeviceGetDevResource"},
        {reinterpret_cast<const void*>(split), "cuDevSmResourceSplitByCount"},
        {reinterpret_cast<const void*>(generate), "cuDevResourceGenerateDesc"},
        {reinterpret_cast<const void*>(create), "cuGreenCtxCreate"},
        {reinterpret_cast<const void*>(stream_create), "cuGreenCtxStreamCreate"},
        {reinterpret_cast<const void*>(to_ctx), "cuCtxFromGreenCtx"},
        {reinterpret_cast<const void*>(set_current), "cuCtxSetCurrent"}};
    for (const auto& [fn, name] : fns)
      if (!fn) out += (out.empty() ? "" : ", ") + std::string(name);
    return out;
  }
  std::string error(CUresult r) const {
    const char* s = nullptr;
    if (error_string) error_string(r, &s);
    return fmt::format("CUDA driver error {} ({})", static_cast<int>(r), s ? s : "no message");
  }
};

const Driver& driver() {
  static const Driver d;
  return d;
}

}  // namespace

std::string describe_device(int device) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) return fmt::format("device {}", device);
  return fmt::format("{} (sm_{}{}, {} SMs, {:.1f} GiB)", p.name, p.major, p.minor,
                     p.multiProcessorCount,
                     static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024 * 1024));
}

GpuRuntime& GpuRuntime::instance() {
  static GpuRuntime runtime;  // a failed construction throws and is tried again next time
  return runtime;
}

GpuRuntime::GpuRuntime() {
  const cudaError_t e = cudaGetDeviceCount(&devices_);
  if (e != cudaSuccess)
    throw BackendUnavailable(fmt::format(
        "no usable CUDA device: cudaGetDeviceCount failed with {} ({}); the GPU backends need "
        "an NVIDIA GPU and its driver (the host backend runs anywhere: --backend host "
        "--compute emulated)",
        cudaGetErrorName(e), cudaGetErrorString(e)));
  if (devices_ == 0)
    throw BackendUnavailable(
        "no CUDA device: the driver reports 0 GPUs (check CUDA_VISIBLE_DEVICES); the host "
        "backend runs anywhere: --backend host --compute emulated");
}

std::string GpuRuntime::device_name(int device) const {
  return describe_device(device);
}

void GpuRuntime::release_layout() {
  for (auto& r : ranks_) {
    (void)cudaSetDevice(r.device);
    if (r.cublas) cublasDestroy(r.cublas);
    if (r.pool) cudaMemPoolDestroy(r.pool);
    // Green context streams and contexts live as long as the process: destroying a green
    // context needs every stream of it idle, which a stopped run does not promise.
    if (!r.green_ctx && r.stream) cudaStreamDestroy(r.stream);
  }
  ranks_.clear();
  layout_ranks_ = -1;
}

bool GpuRuntime::make_green_contexts(int ranks) {
  const Driver& d = driver();
  if (const char* env = std::getenv("PPSIM_SM_PARTITION"); env && std::strcmp(env, "0") == 0) {
    partition_note_ = "SM partitioning off (PPSIM_SM_PARTITION=0): the ranks share every SM";
    return false;
  }
  if (const std::string missing = d.missing_green(); !missing.empty()) {
    partition_note_ = fmt::format(
        "SM partitioning unavailable: the driver lacks {} (green contexts: CUDA >= 12.5): the "
        "ranks share every SM",
        missing);
    return false;
  }
  CUdevice dev = 0;
  CUdevResource all{};
  if (CUresult r = d.device_get(&dev, 0); r != CUDA_SUCCESS) {
    partition_note_ = "SM partitioning unavailable: cuDeviceGet: " + d.error(r);
    return false;
  }
  if (CUresult r = d.get_resource(dev, &all, CU_DEV_RESOURCE_TYPE_SM); r != CUDA_SUCCESS) {
    partition_note_ = "SM partitioning unavailable: cuDeviceGetDevResource: " + d.error(r);
    return false;
  }
  const unsigned align =
      std::max(1u, std::max(all.sm.minSmPartitionSize, all.sm.smCoscheduledAlignment));
  const unsigned per = all.sm.smCount / static_cast<unsigned>(ranks) / align * align;
  if (per < all.sm.minSmPartitionSize || per == 0) {
    partition_note_ = fmt::format(
        "SM partitioning unavailable: {} SMs cannot be split into {} groups of at least {} "
        "(the ranks share every SM)",
        all.sm.smCount, ranks, all.sm.minSmPartitionSize);
    return false;
  }
  std::vector<CUdevResource> groups(static_cast<std::size_t>(ranks));
  unsigned n = static_cast<unsigned>(ranks);
  CUdevResource rest{};
  if (CUresult r = d.split(groups.data(), &n, &all, &rest, 0, per);
      r != CUDA_SUCCESS || n < static_cast<unsigned>(ranks)) {
    partition_note_ = fmt::format(
        "SM partitioning unavailable: cuDevSmResourceSplitByCount: {}",
        r != CUDA_SUCCESS ? d.error(r) : fmt::format("{} groups of {} wanted", ranks, per));
    return false;
  }
  for (int i = 0; i < ranks; ++i) {
    CUdevResourceDesc desc{};
    CUgreenCtx g{};
    CUstream s{};
    CUcontext c{};
    CUresult r = d.generate(&desc, &groups[static_cast<std::size_t>(i)], 1);
    if (r == CUDA_SUCCESS) r = d.create(&g, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM);
    if (r == CUDA_SUCCESS) r = d.stream_create(&s, g, CU_STREAM_NON_BLOCKING, 0);
    if (r == CUDA_SUCCESS) r = d.to_ctx(&c, g);
    if (r != CUDA_SUCCESS) {
      partition_note_ = "SM partitioning unavailable: creating a green context: " + d.error(r);
      return false;  // (the contexts made so far stay: see release_layout)
    }
    auto& rk = ranks_[static_cast<std::size_t>(i)];
    rk.stream = reinterpret_cast<cudaStream_t>(s);
    rk.green_ctx = c;
    rk.sms = static_cast<int>(groups[static_cast<std::size_t>(i)].sm.smCount);
  }
  partition_note_ =
      fmt::format("SM partitioning: {} green contexts of {} SMs each (of {}; {} left idle)", ranks,
                  per, all.sm.smCount, all.sm.smCount - per * static_cast<unsigned>(ranks));
  return true;
}

void GpuRuntime::layout(int ranks, bool shared) {
  std::lock_guard lock(mu_);
  if (ranks == layout_ranks_ && shared == shared_) return;
  release_layout();
  shared_ = shared;
  ranks_.assign(static_cast<std::size_t>(ranks), RankGpu{});
  cudaDeviceProp prop{};
  bool green = false;
  if (shared) {
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaFree(nullptr));  // the primary context, before the green ones
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    green = ranks > 1 && make_green_contexts(ranks);
    if (ranks == 1) partition_note_ = "one rank: it has every SM";
  } else {
    partition_note_ = "one GPU per rank";
  }
  for (int r = 0; r < ranks; ++r) {
    RankGpu& g = ranks_[static_cast<std::size_t>(r)];
    g.device = shared ? 0 : r;
    CUDA_CHECK(cudaSetDevice(g.device));
    if (!green) {
      if (!g.green_ctx && g.stream) cudaStreamDestroy(g.stream);
      g.stream = nullptr;
      g.green_ctx = nullptr;
      CUDA_CHECK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
      CUDA_CHECK(cudaGetDeviceProperties(&prop, g.device));
      g.sms = prop.multiProcessorCount;
    }
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = g.device;
    CUDA_CHECK(cudaMemPoolCreate(&g.pool, &props));
    // Freed memory stays in the pool: an allocation in the timed run never goes to the OS.
    std::uint64_t keep = ~std::uint64_t{0};
    CUDA_CHECK(cudaMemPoolSetAttribute(g.pool, cudaMemPoolAttrReleaseThreshold, &keep));
  }
  layout_ranks_ = ranks;
}

void GpuRuntime::ensure_layout(int ranks) {
  {
    std::lock_guard lock(mu_);
    if (layout_ranks_ == ranks) return;
  }
  layout(ranks, true);
}

bool GpuRuntime::stalled() {
  if (!stalled_.load()) return false;
  std::lock_guard lock(mu_);
  for (const RankGpu& g : ranks_)
    if (g.stream && cudaStreamQuery(g.stream) == cudaErrorNotReady) return true;
  stalled_.store(false);
  return false;
}

void GpuRuntime::bind(int r) {
  RankGpu& g = rank(r);
  if (g.green_ctx) {
    // Already its context (a rank's thread, op after op): nothing to do, no driver call.
    CUcontext current = nullptr;
    if (driver().get_current && driver().get_current(&current) == CUDA_SUCCESS &&
        current == static_cast<CUcontext>(g.green_ctx))
      return;
  }
  CUDA_CHECK(cudaSetDevice(g.device));
  if (g.green_ctx) {
    const CUresult res = driver().set_current(static_cast<CUcontext>(g.green_ctx));
    if (res != CUDA_SUCCESS)
      throw LibraryError("CUDA driver", __FILE__, __LINE__, "cuCtxSetCurrent(green context)",
                         static_cast<long long>(res), "", driver().error(res));
  }
}

}  // namespace ppsim::real::gpu
