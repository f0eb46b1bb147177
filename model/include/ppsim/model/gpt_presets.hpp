#pragma once
// The GPT models of the Megatron-LM papers, by name (`model.preset`): their shapes as the papers
// give them, GPT-2's vocabulary padded to 51,200 and a 2,048-token sequence.
#include <string>
#include <vector>

#include "ppsim/model/transformer.hpp"

namespace ppsim::model {

struct GptPreset {
  std::string name;
  Transformer transformer;
  std::string source;
};

const std::vector<GptPreset>& gpt_presets();
const GptPreset* find_gpt_preset(const std::string& name);

}  // namespace ppsim::model
