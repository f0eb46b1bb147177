#include "ppsim/model/kernels.hpp"

#include <algorithm>
#include <cmath>

namespace ppsim::model {

namespace {

struct Tile {
  double m, n;
};
// CUTLASS/cuBLAS tensor-core tile shapes; the library picks the one that finishes first.
constexpr Tile kTiles[] = {{256, 128}, {128, 256}, {128, 128}, {128, 64}, {64, 128}, {64, 64}};
constexpr double kTileK = 64;  // K is consumed in slices of this many

// A tile's rate relative to the largest: the tensor cores wait on operand loads, m·n/(m+n)
// FLOPs per loaded value.
double reuse(const Tile& t) {
  const Tile& big = kTiles[0];
  return (t.m * t.n / (t.m + t.n)) / (big.m * big.n / (big.m + big.n));
}

}  // namespace

double gemm_time(const KernelModel& km, const Gpu& gpu, double m, double n, double k, double batch,
                 double bytes) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return 0;
  const double sms = gpu.sms > 0 ? gpu.sms : 108;
  const double per_sm = gpu.peak_flops * km.gemm_peak_fraction / sms;  // FLOP/s of one SM
  double best = 1e300;
  for (const Tile& t : kTiles) {
    const double tiles = batch * std::ceil(m / t.m) * std::ceil(n / t.n);
    // Split-K: few tiles and a long K (weight gradients) split K over more SMs, then sum the
    // fp32 partial results.
    for (double split : {1.0, 2.0, 4.0, 8.0, 16.0}) {
      if (split > 1 && (k / split < 256 || tiles >= sms)) break;
      const double k_padded = std::ceil(k / split / kTileK) * kTileK;
      const double waves = std::ceil(tiles * split / sms);
      const double tile_time = 2 * t.m * t.n * k_padded / (per_sm * reuse(t));
      const double reduce = split > 1 ? memory_time(km, gpu, batch * m * n * 4 * (split + 1)) : 0;
      best = std::min(best, waves * tile_time + reduce);
    }
  }
  const double traffic = batch * (m * k + k * n + m * n) * bytes;
  return std::max(best, memory_time(km, gpu, traffic));
}

double memory_time(const KernelModel& km, const Gpu& gpu, double bytes) {
  if (bytes <= 0) return 0;
  return bytes / (gpu.memory_bandwidth * km.memory_fraction);
}

}  // namespace ppsim::model
