#include "ppsim/model/gpt_presets.hpp"

namespace ppsim::model {

namespace {

GptPreset gpt(const char* name, int hidden, int heads, int layers, const char* source) {
  Transformer m;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.ffn_hidden = 4 * hidden;
  m.vocab = 51200;
  m.sequence_length = 2048;
  m.tied_embeddings = true;
  return {name, m, source};
}

constexpr const char* kNarayanan =
    "Narayanan et al. 2021, Efficient Large-Scale Language Model Training on GPU Clusters Using "
    "Megatron-LM, Table 1";
constexpr const char* kKorthikanti =
    "Korthikanti et al. 2022, Reducing Activation Recomputation in Large Transformer Models, "
    "Table 3";

}  // namespace

const std::vector<GptPreset>& gpt_presets() {
  static const std::vector<GptPreset> presets = {
      gpt("gpt-1.7b", 2304, 24, 24, kNarayanan),    gpt("gpt-3.6b", 3072, 32, 30, kNarayanan),
      gpt("gpt-7.5b", 4096, 32, 36, kNarayanan),    gpt("gpt-18b", 6144, 48, 40, kNarayanan),
      gpt("gpt-22b", 6144, 64, 48, kKorthikanti),   gpt("gpt-39b", 8192, 64, 48, kNarayanan),
      gpt("gpt-76b", 10240, 80, 60, kNarayanan),    gpt("gpt-145b", 12288, 96, 80, kNarayanan),
      gpt("gpt-175b", 12288, 96, 96, kKorthikanti), gpt("gpt-310b", 16384, 128, 96, kNarayanan),
      gpt("gpt-530b", 20480, 128, 105, kNarayanan), gpt("gpt-1t", 25600, 160, 128, kNarayanan),
  };
  return presets;
}

const GptPreset* find_gpt_preset(const std::string& name) {
  for (const GptPreset& p : gpt_presets())
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace ppsim::model
