#pragma once
// A Hugging Face `config.json` read as ppsim's transformer: the shapes of the network (layers,
// widths, heads, vocabulary, experts) from the names each architecture's config class uses. The
// layout, micro-batch and dtype are not in such a file and stay at their defaults. Only what
// model::Transformer can express is accepted; anything else (an unknown architecture, dense layers
// between MoE ones, another head dimension) is a ConfigError naming the key.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ppsim/config/error.hpp"
#include "ppsim/model/transformer.hpp"

namespace ppsim::config {

struct HfModel {
  model::Transformer transformer;   // sequence_length = max_position_embeddings (0 if not given)
  std::string architecture;         // the class name, e.g. "LlamaForCausalLM"
  int max_position_embeddings = 0;  // (n_positions for GPT-2); 0 = not given
};

// `path` as the user gave it (for messages). Reads at most kMaxConfigBytes; throws ConfigError
// naming the file (and line:column for malformed JSON), or the JSON key of config.json and what
// was expected.
HfModel read_hf_config(const std::string& path);
// The same from parsed JSON (tests, fuzzing); `path` names the source in errors.
HfModel parse_hf_config(const nlohmann::json& j, const std::string& path);
// The architecture class names it reads, sorted.
std::vector<std::string> hf_architectures();

}  // namespace ppsim::config
