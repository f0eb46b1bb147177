// The GPU compute's arithmetic without a GPU (real/mlp_model.hpp): the `model` section read
// strictly, the GEMMs of each op kind (shapes that chain, FLOPs in closed form, F : I : W equal),
// the device stash peaks it allocates (equal to the simulator's memory model), and the message
// format of the GPU libraries' errors (real/backend_error.hpp).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "config_test.hpp"
#include "helpers.hpp"
#include "paths.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/real/backend_error.hpp"
#include "ppsim/real/mlp_model.hpp"
#include "ppsim/schedules/program.hpp"
#include "ppsim/sim/analysis.hpp"

namespace {

using namespace ppsim::test::config_test;
using schedules::OpKind;

config::Config with_model(json section) {
  return config::parse_config(minimal_with("model", std::move(section)), kSource);
}

real::MlpModel mlp(int h, int f, int s, int b, int layers = 1) {
  real::MlpModel m;
  m.hidden = h;
  m.ffn_hidden = f;
  m.sequence_length = s;
  m.micro_batch_size = b;
  m.layers = layers;
  return m;
}

}  // namespace

TEST_CASE("mlp_model.values_defaults_f_4h_b", "[mlp-model]") {
  // model section: values, defaults (f = 4h, b = 1, one layer, bf16)
  const auto m = real::mlp_model_of(with_model({{"hidden", 1024}, {"sequence_length", 2048}}));
  REQUIRE(m);
  CHECK(m->hidden == 1024);
  CHECK(m->ffn_hidden == 4096);
  CHECK(m->sequence_length == 2048);
  CHECK(m->micro_batch_size == 1);
  CHECK(m->layers == 1);
  CHECK(m->dtype == "bf16");
  CHECK(m->dtype_bytes() == 2);
  CHECK(m->tokens() == 2048);
  const auto n = real::mlp_model_of(with_model({{"hidden", 64},
                                                {"ffn_hidden", 100},
                                                {"sequence_length", 8},
                                                {"micro_batch_size", 3},
                                                {"layers", 2},
                                                {"dtype", "fp32"}}));
  REQUIRE(n);
  CHECK(n->ffn_hidden == 100);
  CHECK(n->tokens() == 24);
  CHECK(n->layers == 2);
  CHECK(n->dtype_bytes() == 4);
  CHECK_FALSE(real::mlp_model_of(config::parse_config(
      json::parse(R"({"schedule": {"kind": "gpipe", "ranks": 2, "microbatches": 2}})"), kSource)));
}

TEST_CASE("mlp_model.bad_value_names_file_key", "[mlp-model]") {
  // model section: each bad value names the file and the key
  const std::vector<std::pair<json, std::string>> bad = {
      {json{{"sequence_length", 8}}, "model.hidden"},
      {json{{"hidden", 8}}, "model.sequence_length"},
      {json{{"hidden", 0}, {"sequence_length", 8}}, "model.hidden"},
      {json{{"hidden", -4}, {"sequence_length", 8}}, "model.hidden"},
      {json{{"hidden", "big"}, {"sequence_length", 8}}, "model.hidden"},
      {json{{"hidden", 8}, {"sequence_length", 8}, {"dtype", "int8"}}, "model.dtype"},
      {json{{"hidden", 8}, {"sequence_length", 8}, {"layers", 0}}, "model.layers"},
      {json{{"hidden", 8}, {"sequence_length", 8}, {"layers", 5000}}, "model.layers"},
      {json{{"hidden", 8}, {"sequence_length", 8}, {"micro_batch_size", 0}},
       "model.micro_batch_size"},
      {json{{"hidden", 2000000}, {"sequence_length", 8}}, "model.hidden"},
      {json{{"hidden", 8}, {"ffn_hidden", 5000000}, {"sequence_length", 8}}, "model.ffn_hidden"},
      {json{{"hidden", 8}, {"sequence_length", 1 << 20}, {"micro_batch_size", 1 << 10}},
       "model.sequence_length"},
      {json{{"hidden", 8}, {"sequence_length", 8}, {"hiden", 8}}, "model.hiden"},
  };
  for (const auto& one : bad) {
    const auto& [section, key] = one;
    INFO(section.dump());
    // (clang 14 cannot capture a structured binding)
    const auto e = test::error_of([&] { (void)real::mlp_model_of(with_model(one.first)); });
    INFO("what(): " << e.what());
    CHECK(e.source() == kSource);
    CHECK(e.key() == key);
    CHECK_THAT(e.what(), StartsWith(kSource + ": key '" + key + "'"));
  }
}

TEST_CASE("mlp_model.shapes_mlp_block_chained_weight", "[mlp-model]") {
  // GEMMs: shapes of the MLP block, chained, with weight gradients shaped as weights
  const auto m = mlp(1024, 4096, 512, 2);  // t = 1024 tokens
  const std::int64_t t = 1024, h = 1024, f = 4096;
  const auto fw = real::gemms_of(OpKind::F, m);
  REQUIRE(fw.size() == 2);
  // X [t, h] * W1 [h, f] -> A [t, f]; A * W2 [f, h] -> Y [t, h].
  CHECK((fw[0].m == t && fw[0].n == f && fw[0].k == h && !fw[0].trans_a && !fw[0].trans_b));
  CHECK((fw[1].m == t && fw[1].n == h && fw[1].k == f));
  CHECK(fw[0].n == fw[1].k);  // A feeds the second GEMM
  const auto in = real::gemms_of(OpKind::I, m);
  REQUIRE(in.size() == 2);
  // dY [t, h] * W2^T -> dA [t, f]; dA * W1^T -> dX [t, h]: the input's shape.
  CHECK((in[0].m == t && in[0].n == f && in[0].k == h && in[0].trans_b));
  CHECK((in[1].m == t && in[1].n == h && in[1].k == f && in[1].trans_b));
  // W2 stored [f, h] = [n, k] of the first (transposed), [k, n] of the forward's second.
  CHECK((in[0].n == fw[1].k && in[0].k == fw[1].n));
  const auto wg = real::gemms_of(OpKind::W, m);
  REQUIRE(wg.size() == 2);
  // A^T dY -> dW2 [f, h] (W2's shape); X^T dA -> dW1 [h, f] (W1's shape); summed over tokens.
  CHECK((wg[0].m == f && wg[0].n == h && wg[0].k == t && wg[0].trans_a && !wg[0].trans_b));
  CHECK((wg[1].m == h && wg[1].n == f && wg[1].k == t && wg[1].trans_a));
  CHECK((wg[0].m == fw[1].k && wg[0].n == fw[1].n));
  CHECK((wg[1].m == fw[0].k && wg[1].n == fw[0].n));
  const auto b = real::gemms_of(OpKind::B, m);
  REQUIRE(b.size() == 4);
  CHECK(b[0].name == in[0].name);
  CHECK(b[3].name == wg[1].name);
  CHECK_THROWS_WITH(real::gemms_of(OpKind::SEND_F, m), Contains("plain F, B, I and W"));
}

TEST_CASE("mlp_model.4_t_h_f_per", "[mlp-model]") {
  // FLOPs: 4 t h f per layer for F, I and W alike, B = I + W
  for (const auto& m :
       {mlp(1024, 4096, 512, 2, 1), mlp(768, 3072, 128, 1, 3), mlp(100, 37, 7, 3, 2)}) {
    const double per = 4.0 * static_cast<double>(m.tokens()) * m.hidden * m.ffn_hidden * m.layers;
    CHECK(real::flops_of(OpKind::F, m) == per);
    CHECK(real::flops_of(OpKind::I, m) == per);
    CHECK(real::flops_of(OpKind::W, m) == per);
    CHECK(real::flops_of(OpKind::B, m) == 2 * per);
  }
  // h = 4096, f = 16384, 4096 tokens: 1.1 TFLOP per op (16 t h^2).
  CHECK(real::flops_of(OpKind::F, mlp(4096, 16384, 4096, 1)) ==
        Approx(16.0 * 4096 * 4096.0 * 4096));
}

TEST_CASE("mlp_model.closed_forms_gpipe_1f1b_i", "[mlp-model]") {
  // stash peaks: closed forms for GPipe and 1F1B, I keeps the weight part until W
  model::MemoryOptions mem;
  mem.activation_bytes = 1000;
  mem.weight_stash_bytes = 300;
  const int P = 4, M = 8;
  const auto gpipe = real::stash_peaks(test::lowered("gpipe", P, M), mem);
  const auto one = real::stash_peaks(test::lowered("1f1b", P, M), mem);
  for (int r = 0; r < P; ++r) {
    CHECK(gpipe[static_cast<std::size_t>(r)] == M * 1000);      // every forward before a backward
    CHECK(one[static_cast<std::size_t>(r)] == (P - r) * 1000);  // warm-up P - r - 1, then one
  }
  // One rank, I and W split: F0 A; I0 leaves w; F1 w + A; W0 A; I1 w; W1 0.
  const auto split = schedules::Program::parse("0F0,0I0,0F1,0W0,0I1,0W1");
  CHECK(real::stash_peaks(split, mem) == std::vector<std::int64_t>{1300});
  const auto forwards_first = schedules::Program::parse("0F0,0F1,0I0,0I1,0W0,0W1");
  CHECK(real::stash_peaks(forwards_first, mem) == std::vector<std::int64_t>{2000});
}

TEST_CASE("mlp_model.stash_peaks_equal_simulator_s", "[mlp-model]") {
  // stash peaks equal the simulator's peak memory when stashes are all it holds
  for (const char* name : {"1f1b.json", "gpipe.json", "interleaved-1f1b.json",
                           "1f1b-async-send.json", "1f1b-batched.json"}) {
    INFO(name);
    auto c = config::load_config(
        std::string(PPSIM_SOURCE_DIR) + "/configs/" + name,
        {"comm.boundary_bytes=0", "memory.static_bytes=0", "memory.activation_bytes=3000000",
         "memory.weight_stash_bytes=1000000"});
    const auto prepared = config::prepare(c);
    const auto run = sim::analyze(prepared);
    REQUIRE(run.metrics);
    const auto peaks = real::stash_peaks(*prepared.program, prepared.model.memory);
    REQUIRE(peaks.size() == run.metrics->per_rank.size());
    for (std::size_t r = 0; r < peaks.size(); ++r) {
      CHECK(peaks[r] == run.metrics->per_rank[r].peak_memory_bytes);
      CHECK(peaks[r] > 0);
    }
  }
}

TEST_CASE("mlp_model.file_line_library_code_name", "[backend-error]") {
  // GPU library errors: file:line, library, code, name and message, and the call
  CHECK(real::format_library_error("CUDA", "/src/real/gpu/src/x.cpp", 42, "cudaMalloc(&p, n)", 2,
                                   "cudaErrorMemoryAllocation", "out of memory") ==
        "x.cpp:42: CUDA error 2 (cudaErrorMemoryAllocation: out of memory) in cudaMalloc(&p, n)");
  CHECK(real::format_library_error("NCCL", "n.cpp", 7, "ncclSend(...)", 3, "", "internal error") ==
        "n.cpp:7: NCCL error 3 (internal error) in ncclSend(...)");
  CHECK(real::format_library_error("cuBLAS", nullptr, 1, "f()", 13, "", "") ==
        "?:1: cuBLAS error 13 (no message) in f()");
  const real::LibraryError e("CUDA", "a/b.cpp", 9, "g()", 700, "cudaErrorIllegalAddress",
                             "an illegal memory access was encountered");
  CHECK(e.code() == 700);
  CHECK_THAT(e.what(), StartsWith("b.cpp:9: CUDA error 700 (cudaErrorIllegalAddress: "));
}
