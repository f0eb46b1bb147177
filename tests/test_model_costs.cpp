// Costs and memory derived from `model` + `hardware` (docs/MODEL.md), checked against the
// sources: published parameter counts, Megatron-LM's theoretical_memory_usage.py and FLOPs
// accounting (training.py), Korthikanti et al. 2022 Table 2, the zero-bubble paper's F/B/W split.
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "ppsim/config/prepare.hpp"
#include "ppsim/sim/analysis.hpp"

using namespace ppsim;
using nlohmann::json;

namespace {

const std::string kModelSource = "model.json";

json base_config(json model, json schedule = {{"kind", "1f1b"}, {"ranks", 4}, {"microbatches", 8}},
                 json hardware = {{"gpu", "h100-sxm"}}) {
  return {{"schedule", schedule}, {"model", model}, {"hardware", hardware}};
}

config::Prepared prepared(const json& j) {
  return config::prepare(config::parse_config(j, kModelSource));
}

json llama2_70b() {
  return {{"layers", 80},
          {"hidden", 8192},
          {"heads", 64},
          {"kv_heads", 8},
          {"ffn_hidden", 28672},
          {"swiglu", true},
          {"normalization", "rmsnorm"},
          {"vocab", 32000},
          {"sequence_length", 4096}};
}

json llama3_8b() {
  return {{"layers", 32},
          {"hidden", 4096},
          {"heads", 32},
          {"kv_heads", 8},
          {"ffn_hidden", 14336},
          {"swiglu", true},
          {"normalization", "rmsnorm"},
          {"vocab", 128256},
          {"sequence_length", 8192}};
}

// Llama 2 70B in 1F1B on 8 ranks (16 microbatches), tensor parallel 8, sequence parallel and
// selective recompute: the setting of Megatron's activation memory formula.
json llama2_70b_on_8() {
  json m = llama2_70b();
  m["tensor_parallel"] = 8;
  m["sequence_parallel"] = true;
  m["recompute"] = "selective";
  return base_config(m, {{"kind", "1f1b"}, {"ranks", 8}, {"microbatches", 16}});
}

double total_params(const config::Prepared& p, int t) {
  double sum = 0;
  for (const auto& s : p.derivation->stages) sum += s.params * t;
  return sum;
}

// The same quantity computed another way must agree to this relative error.
bool near(double a, double b, double rel = 1e-12) {
  return std::abs(a - b) <= rel * std::max(std::abs(a), std::abs(b));
}

}  // namespace

TEST_CASE("model_costs.published_counts_llama_2_70b", "[model-costs]") {
  // model.params: published counts of Llama-2 70B and Llama-3 8B, exactly
  // Hugging Face model cards: Llama-2-70b-hf 68,976,648,192; Meta-Llama-3-8B 8,030,261,248
  // (GQA, SwiGLU, RMSNorm, untied embeddings, no biases).
  CHECK(total_params(prepared(base_config(llama2_70b())), 1) == 68'976'648'192.0);
  CHECK(total_params(prepared(base_config(llama3_8b())), 1) == 8'030'261'248.0);
  // Tensor parallelism divides every stage's share. Tying drops the LM head on one stage; with
  // P > 1 Megatron keeps a copy of the word embedding on the last stage, so nothing is dropped.
  json tp = llama2_70b();
  tp["tensor_parallel"] = 8;
  CHECK(near(total_params(prepared(base_config(tp)), 8), 68'976'648'192.0));
  json tied = llama3_8b();
  tied["tied_embeddings"] = true;
  const json one_stage = {{"kind", "1f1b"}, {"ranks", 1}, {"microbatches", 8}};
  CHECK(total_params(prepared(base_config(tied, one_stage)), 1) ==
        8'030'261'248.0 - 4096.0 * 128256);
  CHECK(total_params(prepared(base_config(tied)), 1) == 8'030'261'248.0);
}

TEST_CASE("model_costs.megatron_s_most_loaded_shard", "[model-costs]") {
  // model.static_bytes: Megatron's most loaded shard, both optimizers
  // theoretical_memory_usage.py: (block / p + embedding) / t parameters on the first stage, at
  // 18 bytes each, or 6 + 12 / d with the distributed optimizer. Its block holds the final norm,
  // which we keep on the last stage: the first stage differs by norm·h / p / t parameters.
  for (const bool distributed : {false, true}) {
    json m = llama2_70b();
    m["tensor_parallel"] = 8;
    m["data_parallel"] = 16;
    m["distributed_optimizer"] = distributed;
    const auto p = prepared(base_config(m, {{"kind", "1f1b"}, {"ranks", 8}, {"microbatches", 8}}));
    const double h = 8192, f = 28672, a = 64, g = 8, L = 80, V = 32000, P = 8, t = 8;
    const double layer = 2 * h * (f * 1.5 + 1) + 2 * h * h * (1 + g / a);
    const double block = layer * L + h;
    const double shard = (block / P + h * V) / t;
    const double bytes = distributed ? 6 + 12.0 / 16 : 18;
    INFO("distributed optimizer " << distributed);
    const double ours = static_cast<double>(p.derivation->stages[0].static_bytes);
    CHECK(std::abs(ours - shard * bytes) / (shard * bytes) < 0.005);
    CHECK(std::abs(ours - (layer * L / P + h * V) / t * bytes) <= 1);  // ours, exactly
  }
}

TEST_CASE("model_costs.korthikanti_et_al_2022_table", "[model-costs]") {
  // model.activation_bytes: Korthikanti et al. 2022 Table 2, every row
  // GPT-style layer (f = 4h, MHA, bf16) on a middle stage of 2 layers: Table 2 per layer, with
  // s, b, h, a, t = 2048, 2, 4096, 32, 4.
  const double s = 2048, b = 2, h = 4096, a = 32, t = 4, sbh = s * b * h;
  struct Row {
    const char* name;
    int tp;
    bool sp;
    const char* recompute;
    double per_layer;
  };
  const Row rows[] = {
      {"no parallelism", 1, false, "none", sbh * (34 + 5 * a * s / h)},
      {"tensor parallel", 4, false, "none", sbh * (10 + 24 / t + 5 * a * s / (h * t))},
      {"tensor + sequence parallel", 4, true, "none", sbh * (34 / t + 5 * a * s / (h * t))},
      {"tensor parallel + selective", 4, false, "selective", sbh * (10 + 24 / t)},
      {"tensor + sequence parallel + selective", 4, true, "selective", sbh * 34 / t},
      {"full recompute", 4, false, "full", sbh * 2},
      {"full recompute, sequence parallel", 4, true, "full", sbh * 2 / t},
  };
  for (const Row& row : rows) {
    json m = {{"layers", 8},
              {"hidden", 4096},
              {"heads", 32},
              {"vocab", 50304},
              {"sequence_length", 2048},
              {"micro_batch_size", 2},
              {"tensor_parallel", row.tp},
              {"sequence_parallel", row.sp},
              {"recompute", row.recompute}};
    INFO(row.name);
    const auto p = prepared(base_config(m));
    CHECK(near(static_cast<double>(p.derivation->stages[1].activation_bytes), 2 * row.per_layer,
               1e-9));
  }
}

TEST_CASE("model_costs.1f1b_s_first_rank_peaks", "[model-costs]") {
  // model.activation_bytes: 1F1B's first rank peaks at Megatron's activation memory
  // compute_activation_memory (sequence parallel + selective, non-interleaved, M >= p):
  // [s·b·h·(18 + 4f/h)·L + 8·s·b·p + s·b·h·p] / t at g = a without SwiGLU; ppsim counts GQA's
  // K and V at g/a of Q (18 -> 14 + 4g/a) and SwiGLU's two fc1 outputs (4f/h -> 6f/h). The
  // simulated rank 0 holds exactly p microbatches' stashes of its stage at its peak.
  const json j = llama2_70b_on_8();
  const auto rec = sim::analyze(config::parse_config(j, kModelSource));
  REQUIRE(rec.metrics);
  const double s = 4096, b = 1, h = 8192, f = 28672, L = 80, p = 8, t = 8, g = 8, a = 64;
  const double megatron =
      (s * b * h * (14 + 4 * g / a + 6 * f / h) * L + 8 * s * b * p + s * b * h * p) / t;
  const double ours = static_cast<double>(rec.metrics->per_rank[0].peak_activation_bytes);
  CHECK(std::abs(ours - megatron) / megatron < 1e-9);
}

TEST_CASE("model_costs.megatron_s_count_per_microbatch", "[model-costs]") {
  // model FLOPs: Megatron's count per microbatch, and the zero-bubble split
  // training.py's num_floating_point_operations(batch_size = b), causal attention: per token
  // 12·L·h²·(1 + g/a + s/(2h)) + 12·L·h·f·(3/2 if swiglu) + 6·h·V, summed over F, I and W.
  for (const json& m : {llama2_70b(), llama3_8b()}) {
    json one = m;
    one["micro_batch_size"] = 2;
    one["tensor_parallel"] = 4;
    const auto p = prepared(base_config(one));
    const double L = m["layers"], h = m["hidden"], a = m["heads"], g = m["kv_heads"],
                 f = m["ffn_hidden"], V = m["vocab"], s = m["sequence_length"], b = 2, t = 4;
    const double megatron =
        b * s * (12 * L * h * h * (1 + g / a + s / h / 2) + 12 * L * h * f * 1.5 + 6 * h * V);
    double ours = 0;
    for (const auto& st : p.derivation->stages)
      ours += (st.flops_forward + st.flops_backward_input + st.flops_backward_weight) * t;
    INFO(m.dump());
    CHECK(near(ours, megatron, 1e-12));
  }
  // Zero-bubble paper, Table 1 (per layer, f = 4h, MHA; the core attention halved for the causal
  // mask as Megatron counts it): F = 24bsh² + 2bs²h, I = 24bsh² + 4bs²h, W = 24bsh².
  const json gpt = {{"layers", 4},   {"hidden", 1024},         {"heads", 16},
                    {"vocab", 1000}, {"sequence_length", 512}, {"micro_batch_size", 3}};
  const auto p = prepared(base_config(gpt));  // 4 stages of 1 layer; stage 1 has no head
  const double b = 3, s = 512, h = 1024;
  const auto& st = p.derivation->stages[1];
  const auto flat = prepared(base_config(gpt, {{"kind", "1f1b"}, {"ranks", 4}, {"microbatches", 8}},
                                         {{"gpu", "h100-sxm"}, {"flops_efficiency", 0.5}}));
  CHECK(near(st.flops_forward, 24 * b * s * h * h + 2 * b * s * s * h));
  CHECK(near(st.flops_backward_input, 24 * b * s * h * h + 4 * b * s * s * h));
  CHECK(near(st.flops_backward_weight, 24 * b * s * h * h));
  // The zero-bubble paper's W memory: 32sbh at t = 1 (bf16).
  CHECK(st.weight_stash_bytes == 32 * 512 * 3 * 1024);
  // Recompute adds its forward to I: all of F under full, the attention core under selective.
  json full = gpt;
  full["recompute"] = "full";
  CHECK(near(prepared(base_config(full)).derivation->stages[1].flops_backward_input,
             st.flops_backward_input + st.flops_forward));
  json sel = gpt;
  sel["recompute"] = "selective";
  CHECK(near(prepared(base_config(sel)).derivation->stages[1].flops_backward_input,
             st.flops_backward_input + 2 * b * s * s * h));
  // Times with a flops_efficiency: FLOPs at peak x efficiency, in the config's unit (ms); B =
  // I + W.
  const auto& c = flat.model.costs.stages[1];
  CHECK(near(c.forward, st.flops_forward / (989e12 * 0.5) * 1e3, 1e-12));
  CHECK(near(c.backward, c.backward_input + c.backward_weight, 1e-12));
}

TEST_CASE("model_costs.moe_params_flops_megatron_counts", "[model-costs]") {
  // model: MoE params and FLOPs as Megatron counts them
  // Every layer's MLP: E experts held, top-k of them run per token.
  json m = {{"layers", 4},   {"hidden", 1024},         {"heads", 16},
            {"vocab", 1000}, {"sequence_length", 256}, {"experts", 8},
            {"top_k", 2},    {"moe_ffn_hidden", 512},  {"swiglu", true}};
  const auto p = prepared(base_config(m));
  const double h = 1024, T = 256;
  const auto& st = p.derivation->stages[1];
  CHECK(near(st.params, 2 * h * (512 * 8 * 1.5 + 2) + 2 * h * h * 2));
  CHECK(near(st.flops_backward_weight, 4 * T * h * h * 2 + 4 * T * h * 512 * 2 * 1.5));
}

TEST_CASE("model_costs.uneven_layers_per_stage_dualpipe", "[model-costs]") {
  // model: uneven layers_per_stage, DualPipe's two copies, chunk sweeps
  json m = {
      {"layers", 22},  {"hidden", 256},         {"heads", 4},
      {"vocab", 1000}, {"sequence_length", 64}, {"layers_per_stage", {2, 3, 3, 3, 3, 3, 3, 2}}};
  const auto p = prepared(base_config(m, {{"kind", "1f1b"}, {"ranks", 8}, {"microbatches", 8}}));
  CHECK(p.derivation->stages[0].layers == 2);
  CHECK(p.derivation->stages[1].layers == 3);
  CHECK(near(p.derivation->stages[1].flops_forward, 1.5 * p.derivation->stages[0].flops_forward));
  // DualPipe: each route runs the whole network, so each of 2P stages holds L / P layers and
  // both ends of the pipeline hold an embedding and a head.
  json d = {{"layers", 8}, {"hidden", 256}, {"heads", 4}, {"vocab", 1000}, {"sequence_length", 64}};
  const auto dp =
      prepared(base_config(d, {{"kind", "dualpipe"}, {"ranks", 4}, {"microbatches", 8}}));
  REQUIRE(dp.derivation->stages.size() == 8);
  int embeddings = 0, heads = 0;
  for (const auto& st : dp.derivation->stages) {
    CHECK(st.layers == 2);
    embeddings += st.embedding;
    heads += st.head;
  }
  CHECK(embeddings == 2);
  CHECK(heads == 2);
  // Interleaving splits each rank's layers over its chunks; the costs follow.
  const auto v2 = prepared(base_config(
      d, {{"kind", "interleaved-1f1b"}, {"ranks", 2}, {"microbatches", 4}, {"chunks", 2}}));
  CHECK(v2.derivation->stages.size() == 4);
  CHECK(v2.derivation->stages[1].layers == 2);
}

TEST_CASE("model_costs.given_costs_memory_comm_keys", "[model-costs]") {
  // model: given costs, memory and comm keys override the derived ones
  json j = base_config(
      {{"layers", 4}, {"hidden", 256}, {"heads", 4}, {"vocab", 1000}, {"sequence_length", 64}});
  const auto derived = prepared(j);
  j["costs"] = {{"forward", 2.5}};
  j["memory"] = {{"activation_bytes", 1000}};
  j["comm"] = {{"latency", 0.25}};
  const auto mixed = prepared(j);
  CHECK(mixed.model.costs.stages[1].forward == 2.5);
  CHECK(mixed.model.costs.stages[1].backward_input == derived.model.costs.stages[1].backward_input);
  CHECK(mixed.model.memory.per_stage[1].activation_bytes == 1000);
  CHECK(mixed.model.memory.per_stage[1].static_bytes ==
        derived.model.memory.per_stage[1].static_bytes);
  CHECK(mixed.model.network.latency == 0.25);
  CHECK(mixed.model.network.bandwidth == derived.model.network.bandwidth);
  // The link: NVLink within one 8-GPU node (t·P <= 8), InfiniBand NDR across nodes.
  CHECK(derived.derivation->link.name == "nvlink4");
  CHECK(near(derived.model.network.bandwidth, 450e9 * 1e-3));  // bytes per ms
  json wide = base_config({{"layers", 4},
                           {"hidden", 256},
                           {"heads", 4},
                           {"vocab", 1000},
                           {"sequence_length", 64},
                           {"tensor_parallel", 4}});
  CHECK(prepared(wide).derivation->link.name == "ib-ndr");
  // Boundary: s·b·h·dtype, ÷ t under sequence parallelism.
  CHECK(derived.model.network.boundary_bytes == 64 * 256 * 2);
}

TEST_CASE("model_costs.out_memory_byte_less_peak", "[model-costs]") {
  // model: out of memory at one byte less than the peak, ok at the peak
  const json j = llama2_70b_on_8();
  const auto free = sim::analyze(config::parse_config(j, kModelSource));
  REQUIRE(free.ok());
  const std::int64_t peak = free.metrics->per_rank[0].peak_memory_bytes;
  for (const std::int64_t limit : {peak - 1, peak}) {
    json one = j;
    one["hardware"]["memory_bytes"] = limit;
    const auto rec = sim::analyze(config::parse_config(one, kModelSource));
    INFO("limit " << limit);
    if (limit < peak) {
      REQUIRE(rec.verdict().kind == record::VerdictKind::out_of_memory);
      const auto& o = rec.out_of_memory.front();
      CHECK(o.rank == 0);
      CHECK(o.peak == peak);
      CHECK(o.limit == limit);
      CHECK(o.static_bytes + o.activation_bytes + o.buffer_bytes == peak);
      CHECK(o.static_bytes == free.metrics->per_rank[0].peak_static_bytes);
      CHECK(rec.verdict().text() == "OUT_OF_MEMORY (1 rank)");
    } else {
      CHECK(rec.ok());
    }
  }
}

TEST_CASE("model_costs.bad_input_names_key", "[model-costs]") {
  // model: bad input names the key
  const json good = {
      {"layers", 8}, {"hidden", 256}, {"heads", 4}, {"vocab", 1000}, {"sequence_length", 64}};
  auto with = [&](const char* key, json value) {
    json m = good;
    m[key] = std::move(value);
    return m;
  };
  const std::vector<std::pair<json, std::string>> bad = {
      {base_config(with("hidden", -4)), "model.hidden"},
      {base_config(with("heads", 3)), "model.heads"},
      {base_config(with("kv_heads", 3)), "model.kv_heads"},
      {base_config(with("tensor_parallel", 8)), "model.tensor_parallel"},
      {base_config(with("layers", 7)), "model.layers"},
      {base_config(with("layers_per_stage", {1, 2, 3})), "model.layers_per_stage"},
      {base_config(with("recompute", "some")), "model.recompute"},
      {base_config(with("sequence_parallel", true)), "model.sequence_parallel"},
      {base_config(with("top_k", 2)), "model.top_k"},
      {base_config(good, {{"kind", "1f1b"}, {"ranks", 4}, {"microbatches", 8}}, {{"gpu", "h900"}}),
       "hardware.gpu"},
      {base_config(good, {{"kind", "1f1b"}, {"ranks", 4}, {"microbatches", 8}},
                   {{"gpu", "h100-sxm"}, {"flops_efficiency", 1.5}}),
       "hardware.flops_efficiency"},
      {base_config(good, {{"kind", "1f1b"}, {"ranks", 4}, {"microbatches", 8}},
                   {{"gpu", "h100-sxm"}, {"p2p", "carrier-pigeon"}}),
       "hardware.p2p"},
      {base_config(json{{"hidden", 256}, {"sequence_length", 64}}), "model.layers"},
      {json{{"schedule", {{"kind", "1f1b"}, {"ranks", 4}, {"microbatches", 8}}},
            {"hardware", {{"gpu", "h100-sxm"}}}},
       "hardware"},
  };
  for (const auto& [j, key] : bad) {
    INFO(j.dump());
    try {
      (void)prepared(j);
      FAIL("no error");
    } catch (const config::ConfigError& e) {
      CHECK(e.key() == key);
      CHECK(e.source() == kModelSource);
    }
  }
}
