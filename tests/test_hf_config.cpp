// Hugging Face config.json files read as ppsim's transformer (config/hf_config.hpp): the published
// configs of tests/data/hf/ (README.md there names their sources) map to the right fields, the
// parameter formula of docs/MODEL.md gives their published counts, and bad files are refused with
// the file and the key named.
#include <unistd.h>
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "error_of.hpp"
#include "paths.hpp"
#include "ppsim/config/hf_config.hpp"
#include "ppsim/model/transformer.hpp"

using namespace ppsim;
using nlohmann::json;

namespace {

std::string fixture(const std::string& name) {
  return std::string(PPSIM_SOURCE_DIR) + "/tests/data/hf/" + name;
}

json fixture_json(const std::string& name) {
  std::ifstream in(fixture(name));
  return json::parse(in);
}

config::HfModel read(const std::string& name) {
  return config::read_hf_config(fixture(name));
}

// ppsim's parameter count of the whole network (one stage, no tensor parallelism).
double total_params(const model::Transformer& m) {
  model::Hardware hw;
  hw.gpu = *model::find_gpu("h100-sxm");
  hw.link = *model::find_link("nvlink4");
  const model::Derivation d = model::derive(m, model::Layout{}, hw, {0}, 1);
  double sum = 0;
  for (const auto& s : d.stages) sum += s.params;
  return sum;
}

config::ConfigError error_of_json(const json& j) {
  return test::error_of([&] { config::parse_hf_config(j, "config.json"); });
}

// A file of its own under the temporary directory, removed at the end of the scope.
struct TempFile {
  explicit TempFile(const std::string& text)
      : path((std::filesystem::temp_directory_path() /
              ("ppsim-hf-" + std::to_string(::getpid()) + "-" + std::to_string(++count) + ".json"))
                 .string()) {
    std::ofstream(path) << text;
  }
  ~TempFile() { std::filesystem::remove(path); }
  std::string path;
  static inline int count = 0;
};

}  // namespace

TEST_CASE("hf_config.llama3_8b", "[hf-config]") {
  const config::HfModel hf = read("meta-llama-3-8b.json");
  const model::Transformer& m = hf.transformer;
  CHECK(hf.architecture == "LlamaForCausalLM");
  CHECK(hf.max_position_embeddings == 8192);
  CHECK(m.layers == 32);
  CHECK(m.hidden == 4096);
  CHECK(m.heads == 32);
  CHECK(m.kv_heads == 8);
  CHECK(m.ffn_hidden == 14336);
  CHECK(m.swiglu);
  CHECK(m.rmsnorm);
  CHECK(m.vocab == 128256);
  CHECK(m.sequence_length == 8192);
  CHECK_FALSE(m.tied_embeddings);
  CHECK(m.experts == 0);
  CHECK(m.shared_experts == 0);
  // Meta-Llama-3-8B's model card: 8,030,261,248 parameters (no biases).
  CHECK(total_params(m) == 8'030'261'248.0);
}

TEST_CASE("hf_config.mistral_7b", "[hf-config]") {
  const config::HfModel hf = read("mistral-7b-v0.1.json");
  const model::Transformer& m = hf.transformer;
  CHECK(hf.architecture == "MistralForCausalLM");
  CHECK(m.layers == 32);
  CHECK(m.hidden == 4096);
  CHECK(m.heads == 32);
  CHECK(m.kv_heads == 8);
  CHECK(m.ffn_hidden == 14336);
  CHECK((m.swiglu && m.rmsnorm));
  CHECK(m.vocab == 32000);
  CHECK(m.sequence_length == 32768);
  CHECK_FALSE(m.tied_embeddings);
  CHECK(m.experts == 0);
  // Mistral-7B-v0.1's safetensors: 7,241,732,096 parameters (no biases).
  CHECK(total_params(m) == 7'241'732'096.0);
}

TEST_CASE("hf_config.mixtral_8x7b", "[hf-config]") {
  const config::HfModel hf = read("mixtral-8x7b-v0.1.json");
  const model::Transformer& m = hf.transformer;
  CHECK(hf.architecture == "MixtralForCausalLM");
  CHECK(m.layers == 32);
  CHECK(m.hidden == 4096);
  CHECK(m.heads == 32);
  CHECK(m.kv_heads == 8);
  CHECK(m.ffn_hidden == 14336);
  CHECK((m.swiglu && m.rmsnorm));
  CHECK(m.vocab == 32000);
  CHECK(m.sequence_length == 32768);
  CHECK_FALSE(m.tied_embeddings);
  CHECK(m.experts == 8);
  CHECK(m.top_k == 2);
  CHECK(m.moe_ffn_hidden == 14336);
  CHECK(m.shared_experts == 0);
  // Mixtral-8x7B-v0.1's safetensors: 46,702,792,704 parameters, of which the routers (h x 8 per
  // layer) are not in the formula.
  CHECK(total_params(m) == 46'702'792'704.0 - 32.0 * 4096 * 8);
}

TEST_CASE("hf_config.qwen2_7b", "[hf-config]") {
  const config::HfModel hf = read("qwen2-7b.json");
  const model::Transformer& m = hf.transformer;
  CHECK(hf.architecture == "Qwen2ForCausalLM");
  CHECK(m.layers == 28);
  CHECK(m.hidden == 3584);
  CHECK(m.heads == 28);
  CHECK(m.kv_heads == 4);
  CHECK(m.ffn_hidden == 18944);
  CHECK((m.swiglu && m.rmsnorm));
  CHECK(m.vocab == 152064);
  CHECK(m.sequence_length == 131072);
  CHECK_FALSE(m.tied_embeddings);
  CHECK(m.experts == 0);
  // Qwen2-7B's safetensors: 7,615,616,512 parameters, of which the q/k/v biases (h + 2·h·g/a per
  // layer) are not in the formula.
  CHECK(total_params(m) == 7'615'616'512.0 - 28.0 * (3584 + 2 * 512));
}

TEST_CASE("hf_config.qwen1_5_moe_a2_7b", "[hf-config]") {
  const config::HfModel hf = read("qwen1.5-moe-a2.7b.json");
  const model::Transformer& m = hf.transformer;
  CHECK(hf.architecture == "Qwen2MoeForCausalLM");
  CHECK(hf.max_position_embeddings == 8192);
  CHECK(m.layers == 24);
  CHECK(m.hidden == 2048);
  CHECK(m.heads == 16);
  CHECK(m.kv_heads == 16);
  CHECK(m.ffn_hidden == 5632);
  CHECK((m.swiglu && m.rmsnorm));
  CHECK(m.vocab == 151936);
  CHECK(m.sequence_length == 8192);
  CHECK_FALSE(m.tied_embeddings);
  CHECK(m.experts == 60);
  CHECK(m.top_k == 4);
  CHECK(m.moe_ffn_hidden == 1408);
  CHECK(m.shared_experts == 1);
  CHECK(m.shared_ffn_hidden == 5632);
}

TEST_CASE("hf_config.gpt2", "[hf-config]") {
  const config::HfModel hf = read("gpt2.json");
  const model::Transformer& m = hf.transformer;
  CHECK(hf.architecture == "GPT2LMHeadModel");
  CHECK(hf.max_position_embeddings == 1024);
  CHECK(m.layers == 12);
  CHECK(m.hidden == 768);
  CHECK(m.heads == 12);
  CHECK(m.kv_heads == 12);
  CHECK(m.ffn_hidden == 4 * 768);  // no n_inner: 4h
  CHECK_FALSE(m.swiglu);
  CHECK_FALSE(m.rmsnorm);
  CHECK(m.vocab == 50257);
  CHECK(m.sequence_length == 1024);
  CHECK(m.tied_embeddings);  // GPT2Config's default
  CHECK(m.experts == 0);
  // gpt2's 124,439,808 parameters, less what the formula leaves out: the learned position
  // embeddings (1024 x 768) and the linear layers' biases (3h + h + 4h + h per layer).
  CHECK(total_params(m) == 124'439'808.0 - 1024.0 * 768 - 12.0 * 9 * 768);
  // n_inner given (and null, as save_pretrained writes it) and tie_word_embeddings given.
  json j = fixture_json("gpt2.json");
  j["n_inner"] = nullptr;
  CHECK(config::parse_hf_config(j, "gpt2.json").transformer.ffn_hidden == 3072);
  j["n_inner"] = 1000;
  j["tie_word_embeddings"] = false;
  const model::Transformer other = config::parse_hf_config(j, "gpt2.json").transformer;
  CHECK(other.ffn_hidden == 1000);
  CHECK_FALSE(other.tied_embeddings);
}

TEST_CASE("hf_config.gpt_neox_20b", "[hf-config]") {
  const config::HfModel hf = read("gpt-neox-20b.json");
  const model::Transformer& m = hf.transformer;
  CHECK(hf.architecture == "GPTNeoXForCausalLM");
  CHECK(m.layers == 44);
  CHECK(m.hidden == 6144);
  CHECK(m.heads == 64);
  CHECK(m.kv_heads == 64);
  CHECK(m.ffn_hidden == 24576);
  CHECK_FALSE(m.swiglu);
  CHECK_FALSE(m.rmsnorm);
  CHECK(m.vocab == 50432);
  CHECK(m.sequence_length == 2048);
  CHECK_FALSE(m.tied_embeddings);
  // GPT-NeoX-20B's 20,554,567,680 parameters, less the linear layers' biases (3h + h + f + h per
  // layer), which the formula leaves out.
  CHECK(total_params(m) == 20'554'567'680.0 - 44.0 * (5 * 6144 + 24576));
}

TEST_CASE("hf_config.architectures_and_model_type", "[hf-config]") {
  const auto names = config::hf_architectures();
  CHECK(names.size() == 7);
  CHECK(std::is_sorted(names.begin(), names.end()));
  // model_type when architectures is absent or empty.
  json j = fixture_json("meta-llama-3-8b.json");
  j.erase("architectures");
  CHECK(config::parse_hf_config(j, "c.json").architecture == "LlamaForCausalLM");
  j["architectures"] = json::array();
  j["model_type"] = "mistral";
  CHECK(config::parse_hf_config(j, "c.json").architecture == "MistralForCausalLM");
  // No position field: sequence_length stays 0.
  j.erase("max_position_embeddings");
  const config::HfModel none = config::parse_hf_config(j, "c.json");
  CHECK(none.transformer.sequence_length == 0);
  CHECK(none.max_position_embeddings == 0);
  // num_key_value_heads absent: one per head.
  j.erase("num_key_value_heads");
  CHECK(config::parse_hf_config(j, "c.json").transformer.kv_heads == 32);
}

TEST_CASE("hf_config.unknown_architecture_lists_the_known_ones", "[hf-config]") {
  json j = fixture_json("meta-llama-3-8b.json");
  j["architectures"] = {"FalconForCausalLM"};
  auto e = error_of_json(j);
  CHECK(e.source() == "config.json");
  CHECK(e.key() == "architectures");
  CHECK_THAT(e.message(), Catch::Contains("FalconForCausalLM"));
  for (const auto& name : config::hf_architectures())
    CHECK_THAT(e.message(), Catch::Contains(name));
  // DeepSeek says why it is not read.
  j["architectures"] = {"DeepseekV3ForCausalLM"};
  CHECK_THAT(error_of_json(j).message(), Catch::Contains("first_k_dense_replace"));
  j.erase("architectures");
  j["model_type"] = "falcon";
  e = error_of_json(j);
  CHECK(e.key() == "model_type");
  CHECK_THAT(e.message(), Catch::Contains("qwen2_moe"));
  j.erase("model_type");
  e = error_of_json(j);
  CHECK(e.key() == "architectures");
  CHECK_THAT(e.message(), Catch::Contains("missing"));
  j["architectures"] = "LlamaForCausalLM";
  CHECK(error_of_json(j).key() == "architectures");
}

TEST_CASE("hf_config.not_json_names_the_file", "[hf-config]") {
  const TempFile bad("{\"architectures\": [\"LlamaForCausalLM\"],\n  \"hidden_size\": 40 96}");
  auto e = test::error_of([&] { config::read_hf_config(bad.path); });
  CHECK_THAT(e.source(), Catch::StartsWith(bad.path + ":2:"));
  CHECK_THAT(e.message(), Catch::Contains("malformed JSON"));
  const TempFile list("[1, 2]");
  e = test::error_of([&] { config::read_hf_config(list.path); });
  CHECK(e.source() == list.path);
  CHECK_THAT(e.message(), Catch::Contains("expected a JSON object"));
  const std::string missing = bad.path + ".missing";
  e = test::error_of([&] { config::read_hf_config(missing); });
  CHECK(e.source() == missing);
  CHECK_THAT(e.message(), Catch::Contains("cannot open"));
}

TEST_CASE("hf_config.missing_field_names_the_key", "[hf-config]") {
  for (const char* key : {"hidden_size", "num_hidden_layers", "num_attention_heads",
                          "intermediate_size", "vocab_size"}) {
    json j = fixture_json("meta-llama-3-8b.json");
    j.erase(key);
    const auto e = error_of_json(j);
    CHECK(e.key() == key);
    CHECK_THAT(e.message(), Catch::StartsWith("missing"));
  }
  json gpt2 = fixture_json("gpt2.json");
  gpt2.erase("n_embd");
  const auto e = error_of_json(gpt2);
  CHECK(e.key() == "n_embd");
  CHECK_THAT(e.message(), Catch::Contains("hidden_size"));
  for (const char* key : {"num_experts", "num_experts_per_tok", "moe_intermediate_size",
                          "shared_expert_intermediate_size"}) {
    json j = fixture_json("qwen1.5-moe-a2.7b.json");
    j.erase(key);
    CHECK(error_of_json(j).key() == key);
  }
  json mixtral = fixture_json("mixtral-8x7b-v0.1.json");
  mixtral.erase("num_local_experts");
  CHECK(error_of_json(mixtral).key() == "num_local_experts");
}

TEST_CASE("hf_config.bad_value_names_the_key", "[hf-config]") {
  struct Case {
    const char* fixture;
    const char* key;
    json value;
    const char* says;
  };
  const Case cases[] = {
      {"meta-llama-3-8b.json", "hidden_size", -4096, "1..1048576"},
      {"meta-llama-3-8b.json", "hidden_size", "4096", "1..1048576"},
      {"meta-llama-3-8b.json", "hidden_size", 4096.5, "an integer"},
      {"meta-llama-3-8b.json", "hidden_size", 1 << 21, "1..1048576"},
      {"meta-llama-3-8b.json", "num_hidden_layers", 0, "1..100000"},
      {"meta-llama-3-8b.json", "num_hidden_layers", 100001, "1..100000"},
      {"meta-llama-3-8b.json", "vocab_size", (std::int64_t{1} << 30) + 1, "1..1073741824"},
      {"meta-llama-3-8b.json", "vocab_size", json::parse("18446744073709551615"), "an integer"},
      {"meta-llama-3-8b.json", "num_attention_heads", 30, "must divide hidden_size 4096"},
      {"meta-llama-3-8b.json", "num_key_value_heads", 5, "must divide num_attention_heads 32"},
      {"meta-llama-3-8b.json", "num_key_value_heads", 64, "1..32"},
      {"meta-llama-3-8b.json", "head_dim", 96, "hidden / heads"},
      {"meta-llama-3-8b.json", "intermediate_size", true, "an integer"},
      {"meta-llama-3-8b.json", "max_position_embeddings", -1, "an integer"},
      {"meta-llama-3-8b.json", "tie_word_embeddings", "yes", "true or false"},
      {"gpt2.json", "n_head", 7, "must divide n_embd 768"},
      {"gpt2.json", "n_inner", 0, "the MLP width"},
      {"mixtral-8x7b-v0.1.json", "num_experts_per_tok", 9, "1..8"},
      {"qwen1.5-moe-a2.7b.json", "decoder_sparse_step", 2, "every layer MoE"},
      {"qwen1.5-moe-a2.7b.json", "mlp_only_layers", json::array({0, 1}), "dense layers"},
      {"qwen1.5-moe-a2.7b.json", "mlp_only_layers", 3, "a list"},
  };
  for (const auto& c : cases) {
    INFO(c.fixture << " " << c.key << " = " << c.value.dump());
    json j = fixture_json(c.fixture);
    j[c.key] = c.value;
    const auto e = error_of_json(j);
    CHECK(e.key() == c.key);
    CHECK_THAT(e.message(), Catch::Contains(c.says));
  }
  // An empty mlp_only_layers and a head_dim of h / a are what the fixture already means.
  json j = fixture_json("qwen1.5-moe-a2.7b.json");
  j["mlp_only_layers"] = json::array();
  j["head_dim"] = 128;
  CHECK_NOTHROW(config::parse_hf_config(j, "c.json"));
}
