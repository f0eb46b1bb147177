#pragma once
// The `model` section: the transformer MLP block the GPU compute runs for each op (docs/EXECUTOR.md
// "GPUs"). Tokens = micro-batch size x sequence length; forward, input gradient and weight
// gradient are two GEMMs each of equal FLOPs, so F : I : W = 1 : 1 : 1 and B = I + W.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ppsim/config/config.hpp"
#include "ppsim/model/model.hpp"
#include "ppsim/schedules/op.hpp"
#include "ppsim/schedules/program.hpp"

namespace ppsim::real {

struct MlpModel {
  int hidden = 0;            // h
  int ffn_hidden = 0;        // f (default 4h)
  int sequence_length = 0;   // s
  int micro_batch_size = 1;  // b
  int layers = 1;            // MLP blocks per stage chunk (each op runs them all)
  std::string dtype = "bf16";

  std::int64_t tokens() const { return std::int64_t{micro_batch_size} * sequence_length; }
  int dtype_bytes() const { return dtype == "fp32" ? 4 : 2; }
};

// One GEMM in row-major terms: C[m, n] = op(A) op(B), A stored [k, m] when trans_a (else [m, k]),
// B stored [n, k] when trans_b (else [k, n]).
struct Gemm {
  std::string name;  // "X*W1", ...
  std::int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  double flops() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  }
};

// The GEMMs of one layer for a plain compute kind: F (2), I (2), W (2), B (I's then W's).
// Throws std::invalid_argument for any other kind.
std::vector<Gemm> gemms_of(schedules::OpKind kind, const MlpModel& model);
// FLOPs of one op of `kind` over all layers.
double flops_of(schedules::OpKind kind, const MlpModel& model);

// The `model` section of `config` (read by config/) as the cuda compute runs it; nullopt when
// absent. Throws config::ConfigError naming the key for what the cuda compute cannot run.
std::optional<MlpModel> mlp_model_of(const config::Config& config);

// Each rank's peak of live activation stash bytes (F stashes activation_bytes; I keeps
// weight_stash_bytes; B and W release), in program order: what the GPU compute really allocates
// on the device, so its measured peak is compared with this.
std::vector<std::int64_t> stash_peaks(const schedules::Program& program,
                                      const model::MemoryOptions& memory);

}  // namespace ppsim::real
