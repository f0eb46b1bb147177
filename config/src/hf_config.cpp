#include "ppsim/config/hf_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "ppsim/config/config.hpp"
#include "ppsim/config/reader.hpp"

namespace ppsim::config {

namespace {

using nlohmann::json;

// The `model` section's bounds (model_section.cpp), so that what is read here also loads there.
constexpr std::int64_t kMaxHidden = 1 << 20;
constexpr std::int64_t kMaxFfn = 4 * kMaxHidden;
constexpr std::int64_t kMaxLayers = 100'000;
constexpr std::int64_t kMaxVocab = 1 << 30;
constexpr std::int64_t kMaxPositions = 1 << 24;
constexpr std::int64_t kMaxExperts = 1 << 16;

// How a config class names and means its fields. Llama, Mistral and Qwen2 share theirs (Mistral's
// sliding window and Qwen2's q/k/v biases change no shape the formulas count).
enum class Family { llama, mixtral, qwen2_moe, gpt2, gpt_neox };

struct Architecture {
  std::string_view name;        // `architectures[0]`
  std::string_view model_type;  // `model_type`, when no architectures are given
  Family family;
};

// Sorted by name (hf_architectures() returns them in this order).
constexpr Architecture kArchitectures[] = {
    {"GPT2LMHeadModel", "gpt2", Family::gpt2},
    {"GPTNeoXForCausalLM", "gpt_neox", Family::gpt_neox},
    {"LlamaForCausalLM", "llama", Family::llama},
    {"MistralForCausalLM", "mistral", Family::llama},
    {"MixtralForCausalLM", "mixtral", Family::mixtral},
    {"Qwen2ForCausalLM", "qwen2", Family::llama},
    {"Qwen2MoeForCausalLM", "qwen2_moe", Family::qwen2_moe},
};

bool same_name(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

std::string known_list() {
  std::string out;
  for (const auto& a : kArchitectures)
    out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", a.name, a.model_type);
  return out;
}

// Why a well-known architecture is not among them, so the user is not left guessing.
std::string why_not(std::string_view name) {
  if (same_name(name.substr(0, std::min<std::size_t>(name.size(), 8)), "deepseek"))
    return "; DeepSeek's multi-head latent attention and its first_k_dense_replace dense layers "
           "before the MoE ones cannot be expressed in ppsim's transformer, whose layers are "
           "all alike";
  return "";
}

// Spellings of one field, the first one given wins. (A vector, not an initializer_list: the
// choice between GPT-2's and the others' must outlive the expression that makes it.)
using Keys = std::vector<const char*>;

// The fields of one config.json; errors name the key as the file spells it.
class Fields {
 public:
  Fields(const json& j, const std::string& path) : j_(j), path_(path) {}

  [[noreturn]] void fail(const std::string& key, const std::string& message) const {
    throw ConfigError(path_, key, message);
  }

  // The first of `keys` present and not null (HF writes unset optional fields as null).
  const json* find(const Keys& keys, std::string* found = nullptr) const {
    for (const char* k : keys)
      if (auto it = j_.find(k); it != j_.end() && !it->is_null()) {
        if (found) *found = k;
        return &*it;
      }
    return nullptr;
  }

  // An integer in min..max under the first of `keys` given; `def` when none is (nullopt: one is
  // required). `what` says what the field is, for the message of a missing one.
  std::int64_t integer(const Keys& keys, std::int64_t min, std::int64_t max,
                       std::optional<std::int64_t> def, std::string_view what) const {
    std::string key;
    const json* v = find(keys, &key);
    if (!v) {
      if (def) return *def;
      std::string also;
      for (auto it = keys.begin() + 1; it != keys.end(); ++it) also += fmt::format(" or {}", *it);
      fail(*keys.begin(),
           fmt::format("missing{}: expected {}, an integer in {}..{}", also, what, min, max));
    }
    // nlohmann keeps a non-negative integer as unsigned, a negative one as signed.
    std::int64_t n = 0;
    bool in_range = false;
    if (v->is_number_unsigned()) {
      const auto u = v->get<std::uint64_t>();
      n = u <= static_cast<std::uint64_t>(max) ? static_cast<std::int64_t>(u) : max;
      in_range = u <= static_cast<std::uint64_t>(max) && n >= min;
    } else if (v->is_number_integer()) {
      n = v->get<std::int64_t>();
      in_range = n >= min && n <= max;
    }
    if (!in_range)
      fail(key, fmt::format("expected {}, an integer in {}..{}, got {}", what, min, max,
                            Reader::describe(*v)));
    return n;
  }

  bool boolean(const char* key, bool def) const {
    const json* v = find({key});
    if (!v) return def;
    if (!v->is_boolean())
      fail(key, fmt::format("expected true or false, got {}", Reader::describe(*v)));
    return v->get<bool>();
  }

  // "hidden_size 4096": a value, named as the file spells it, in a message about another key.
  std::string named(const Keys& keys, std::int64_t value) const {
    std::string key = *keys.begin();
    (void)find(keys, &key);
    return fmt::format("{} {}", key, value);
  }

 private:
  const json& j_;
  const std::string& path_;
};

const Architecture& architecture_of(const Fields& f) {
  if (const json* list = f.find({"architectures"})) {
    if (!list->is_array() || (!list->empty() && !(*list)[0].is_string()))
      f.fail("architectures",
             fmt::format("expected a list of class names such as [\"LlamaForCausalLM\"], got {}",
                         Reader::describe(*list)));
    if (!list->empty()) {
      const auto& name = (*list)[0].get_ref<const std::string&>();
      for (const auto& a : kArchitectures)
        if (same_name(name, a.name)) return a;
      f.fail("architectures", fmt::format("unknown architecture '{}': expected one of {}{}",
                                          excerpt(name), known_list(), why_not(name)));
    }
  }
  const json* type = f.find({"model_type"});
  if (!type)
    f.fail("architectures",
           fmt::format("missing: expected architectures[0] or model_type naming one of {}",
                       known_list()));
  if (!type->is_string())
    f.fail("model_type",
           fmt::format("expected a string such as \"llama\", got {}", Reader::describe(*type)));
  const auto& name = type->get_ref<const std::string&>();
  for (const auto& a : kArchitectures)
    if (same_name(name, a.model_type)) return a;
  f.fail("model_type", fmt::format("unknown model type '{}': expected one of {}{}", excerpt(name),
                                   known_list(), why_not(name)));
}

int as_int(std::int64_t v) {
  return static_cast<int>(v);
}

// The routed experts of Mixtral and Qwen2-MoE: every layer's MLP, as Transformer has them.
void read_experts(const Fields& f, const char* experts_key, model::Transformer& m) {
  m.experts = as_int(f.integer({experts_key}, 1, kMaxExperts, std::nullopt, "the routed experts"));
  m.top_k = as_int(
      f.integer({"num_experts_per_tok"}, 1, m.experts, std::nullopt,
                fmt::format("the experts per token, at most {} {}", experts_key, m.experts)));
}

}  // namespace

std::vector<std::string> hf_architectures() {
  std::vector<std::string> out;
  for (const auto& a : kArchitectures) out.emplace_back(a.name);
  return out;
}

HfModel parse_hf_config(const json& j, const std::string& path) {
  if (!j.is_object())
    throw ConfigError(path, "",
                      fmt::format("expected a JSON object (a Hugging Face config.json), got {}",
                                  Reader::describe(j)));
  const Fields f(j, path);
  const Architecture& arch = architecture_of(f);
  const Family family = arch.family;
  const bool gpt2 = family == Family::gpt2;
  const bool gated = family != Family::gpt2 && family != Family::gpt_neox;
  HfModel out;
  out.architecture = arch.name;
  model::Transformer& m = out.transformer;

  // GPT-2's config.json spells its fields n_*; its config class maps hidden_size etc. to them.
  const auto hidden_keys = gpt2 ? Keys{"n_embd", "hidden_size"} : Keys{"hidden_size"};
  const auto heads_keys =
      gpt2 ? Keys{"n_head", "num_attention_heads"} : Keys{"num_attention_heads"};
  m.hidden = as_int(f.integer(hidden_keys, 1, kMaxHidden, std::nullopt, "the hidden size"));
  m.layers =
      as_int(f.integer(gpt2 ? Keys{"n_layer", "num_hidden_layers"} : Keys{"num_hidden_layers"}, 1,
                       kMaxLayers, std::nullopt, "the transformer layers"));
  m.heads = as_int(f.integer(heads_keys, 1, m.hidden, std::nullopt, "the attention heads"));
  std::string heads_key = *heads_keys.begin();
  (void)f.find(heads_keys, &heads_key);
  if (m.hidden % m.heads != 0)
    f.fail(heads_key,
           fmt::format("{} heads must divide {}", m.heads, f.named(hidden_keys, m.hidden)));
  // GPT-2 and NeoX have no grouped-query attention: every head has its own K and V.
  m.kv_heads =
      gated ? as_int(f.integer({"num_key_value_heads"}, 1, m.heads, m.heads, "the key/value heads"))
            : m.heads;
  if (m.heads % m.kv_heads != 0)
    f.fail("num_key_value_heads",
           fmt::format("{} key/value heads must divide {} {}", m.kv_heads, heads_key, m.heads));
  // The formulas take the head dimension to be h / a; a config that sets another (Mistral-NeMo's
  // 128 at hidden 5120 and 32 heads) has attention matrices of another size.
  if (gated) {
    const std::int64_t head_dim =
        f.integer({"head_dim"}, 1, kMaxHidden, m.hidden / m.heads, "the dimension of a head");
    if (head_dim != m.hidden / m.heads)
      f.fail("head_dim",
             fmt::format("{} differs from {} / {} {} = {}: ppsim's transformer takes a head to be "
                         "hidden / heads wide",
                         head_dim, f.named(hidden_keys, m.hidden), heads_key, m.heads,
                         m.hidden / m.heads));
  }
  m.ffn_hidden =
      as_int(gpt2 ? f.integer({"n_inner"}, 1, kMaxFfn, 4 * std::int64_t{m.hidden}, "the MLP width")
                  : f.integer({"intermediate_size"}, 1, kMaxFfn, std::nullopt, "the MLP width"));
  m.vocab = f.integer({"vocab_size"}, 1, kMaxVocab, std::nullopt, "the vocabulary size");
  out.max_position_embeddings = as_int(f.integer(
      gpt2 ? Keys{"n_positions", "max_position_embeddings"} : Keys{"max_position_embeddings"}, 1,
      kMaxPositions, 0, "the longest sequence"));
  m.sequence_length = out.max_position_embeddings;
  // The config classes' defaults: GPT-2 ties its head to the embedding, the others do not.
  m.tied_embeddings = f.boolean("tie_word_embeddings", gpt2);
  m.swiglu = gated;
  m.rmsnorm = gated;

  if (family == Family::mixtral) {
    read_experts(f, "num_local_experts", m);
    m.moe_ffn_hidden = m.ffn_hidden;
  } else if (family == Family::qwen2_moe) {
    // Qwen2-MoE puts a dense MLP of intermediate_size on the layers that are not sparse; a
    // Transformer's layers are all alike, so only configs where every layer is MoE are read.
    const std::int64_t step =
        f.integer({"decoder_sparse_step"}, 1, kMaxLayers, 1, "the MoE layer interval");
    if (step != 1)
      f.fail("decoder_sparse_step",
             fmt::format("{}: only every layer MoE (1) can be expressed in ppsim's transformer, "
                         "whose layers are all alike",
                         step));
    if (const json* dense = f.find({"mlp_only_layers"})) {
      if (!dense->is_array())
        f.fail("mlp_only_layers",
               fmt::format("expected a list of layer indices, got {}", Reader::describe(*dense)));
      if (!dense->empty())
        f.fail("mlp_only_layers",
               "dense layers between MoE layers cannot be expressed in ppsim's transformer, whose "
               "layers are all alike: expected []");
    }
    read_experts(f, "num_experts", m);
    m.moe_ffn_hidden = as_int(
        f.integer({"moe_intermediate_size"}, 1, kMaxFfn, std::nullopt, "the width of an expert"));
    m.shared_experts = 1;
    m.shared_ffn_hidden = as_int(f.integer({"shared_expert_intermediate_size"}, 1, kMaxFfn,
                                           std::nullopt, "the width of the shared expert"));
  }
  return out;
}

HfModel read_hf_config(const std::string& path) {
  return parse_hf_config(parse_json_text(read_config_file(path), path), path);
}

}  // namespace ppsim::config
