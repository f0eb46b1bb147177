#pragma once
// The `model` and `hardware` sections (docs/MODEL.md): a transformer, its parallel layout and its
// GPUs. Given both, prepare() derives every stage's costs and memory from them.
#include <optional>

#include "ppsim/config/reader.hpp"
#include "ppsim/model/transformer.hpp"

namespace ppsim::config {

struct ModelSection {
  model::Transformer transformer;
  model::Layout layout;
  bool describes_network = false;  // gives `heads`: a whole network, not only the cuda MLP block
};

struct HardwareSection {
  model::Hardware hardware;
  bool link_given = false;  // `p2p` was set; else the default follows the layout (docs/MODEL.md)
};

// Read strictly; errors name the key. `derived`: a hardware section is present, so the model must
// describe the whole network.
ModelSection read_model_section(Reader& r, bool derived);
HardwareSection read_hardware_section(Reader& r);

}  // namespace ppsim::config
