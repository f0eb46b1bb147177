#include "ppsim/config/model_section.hpp"

#include <fmt/format.h>

#include <cmath>

namespace ppsim::config {

namespace {

// Sizes past these make no model a GPU trains, and keep every product exact in a double.
constexpr int kMaxHidden = 1 << 20;
constexpr int kMaxSequence = 1 << 24;
constexpr int kMaxLayers = 100'000;
constexpr int kMaxParallel = 1 << 16;

int bounded(Reader& r, const std::string& key, int def, int min, int max, bool required = false) {
  const int v = r.integer(key, def, min, required);
  if (v > max) r.fail(key, fmt::format("expected an integer in {}..{}, got {}", min, max, v));
  return v;
}

std::vector<std::string> names_of(const auto& presets) {
  std::vector<std::string> names;
  for (const auto& p : presets) names.push_back(p.name);
  return names;
}

}  // namespace

ModelSection read_model_section(Reader& r, bool derived) {
  ModelSection out;
  model::Transformer& m = out.transformer;
  model::Layout& l = out.layout;
  out.describes_network = r.has("heads") || derived;
  const bool net = out.describes_network;
  m.hidden = bounded(r, "hidden", 0, 1, kMaxHidden, true);
  m.sequence_length = bounded(r, "sequence_length", 0, 1, kMaxSequence, true);
  m.micro_batch_size = bounded(r, "micro_batch_size", 1, 1, kMaxParallel);
  m.layers = bounded(r, "layers", net ? 0 : 1, 1, kMaxLayers, derived);
  m.ffn_hidden = bounded(r, "ffn_hidden", 0, 1, 4 * kMaxHidden);
  if (m.ffn_hidden == 0) m.ffn_hidden = 4 * m.hidden;
  const std::string dtype = r.one_of("dtype", "bf16", {"bf16", "fp16", "fp32"});
  m.dtype_bytes = dtype == "fp32" ? 4 : 2;
  m.heads = bounded(r, "heads", 0, 1, kMaxHidden, derived);
  m.kv_heads = bounded(r, "kv_heads", m.heads, 1, kMaxHidden);
  m.swiglu = r.boolean("swiglu", false);
  m.rmsnorm = r.one_of("normalization", "layernorm", {"layernorm", "rmsnorm"}) == "rmsnorm";
  m.vocab = bounded(r, "vocab", 0, 1, 1 << 30, derived);
  m.tied_embeddings = r.boolean("tied_embeddings", false);
  m.experts = bounded(r, "experts", 0, 1, kMaxParallel);
  m.top_k = bounded(r, "top_k", 0, 1, kMaxParallel, m.experts > 0);
  m.moe_ffn_hidden = bounded(r, "moe_ffn_hidden", m.ffn_hidden, 1, 4 * kMaxHidden);
  l.tensor_parallel = bounded(r, "tensor_parallel", 1, 1, kMaxParallel);
  l.sequence_parallel = r.boolean("sequence_parallel", false);
  l.data_parallel = bounded(r, "data_parallel", 1, 1, 1 << 24);
  l.distributed_optimizer = r.boolean("distributed_optimizer", false);
  const std::string recompute = r.one_of("recompute", "none", {"none", "selective", "full"});
  l.recompute = recompute == "full"        ? model::Recompute::full
                : recompute == "selective" ? model::Recompute::selective
                                           : model::Recompute::none;
  if (const nlohmann::json* list = r.get("layers_per_stage")) {
    if (!list->is_array() || list->empty())
      r.fail("layers_per_stage",
             fmt::format("expected a list of layer counts, one per virtual stage, e.g. [3, 4, 4, "
                         "3]; got {}",
                         Reader::describe(*list)));
    for (std::size_t i = 0; i < list->size(); ++i) {
      const auto& v = (*list)[i];
      if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > kMaxLayers)
        r.fail(
            fmt::format("layers_per_stage[{}]", i),
            fmt::format("expected an integer in 0..{}, got {}", kMaxLayers, Reader::describe(v)));
      l.layers_per_stage.push_back(static_cast<int>(v.get<long long>()));
    }
  }
  r.reject_unknown();

  // What the formulas need of the shapes, named by the key to change.
  if (m.heads > 0 && m.hidden % m.heads != 0)
    r.fail("heads", fmt::format("must divide model.hidden ({}), got {}", m.hidden, m.heads));
  if (m.heads > 0 && m.heads % m.kv_heads != 0)
    r.fail("kv_heads", fmt::format("must divide model.heads ({}), got {}", m.heads, m.kv_heads));
  if (m.heads > 0 && m.heads % l.tensor_parallel != 0)
    r.fail("tensor_parallel",
           fmt::format("must divide model.heads ({}), got {}", m.heads, l.tensor_parallel));
  if (m.heads > 0 && m.kv_heads % l.tensor_parallel != 0 && m.kv_heads != m.heads)
    r.fail("tensor_parallel", fmt::format("must divide model.kv_heads ({}) (each tensor-parallel "
                                          "rank holds whole key/value groups), got {}",
                                          m.kv_heads, l.tensor_parallel));
  if (l.sequence_parallel && l.tensor_parallel == 1)
    r.fail("sequence_parallel",
           "needs tensor_parallel > 1 (it splits the sequence over the "
           "tensor-parallel ranks)");
  if (m.experts > 0 && m.top_k > m.experts)
    r.fail("top_k", fmt::format("must be at most model.experts ({}), got {}", m.experts, m.top_k));
  if (m.experts == 0 && (r.has("top_k") || r.has("moe_ffn_hidden")))
    r.fail(r.has("top_k") ? "top_k" : "moe_ffn_hidden", "only used with model.experts");
  if (!l.layers_per_stage.empty() && m.layers > 0) {
    long long sum = 0;
    for (int n : l.layers_per_stage) sum += n;
    if (sum != m.layers)
      r.fail("layers_per_stage",
             fmt::format("adds up to {} layers; model.layers is {}", sum, m.layers));
  }
  return out;
}

HardwareSection read_hardware_section(Reader& r) {
  HardwareSection out;
  model::Hardware& hw = out.hardware;
  const std::string gpu = r.string("gpu", "");
  const bool peak_given = r.has("peak_flops");
  if (!gpu.empty()) {
    const model::Gpu* preset = model::find_gpu(gpu);
    if (!preset)
      r.fail("gpu",
             fmt::format("unknown GPU \"{}\"; expected one of {} (or give peak_flops and "
                         "memory_bytes)",
                         base::excerpt(gpu), fmt::join(names_of(model::gpu_presets()), ", ")));
    hw.gpu = *preset;
  } else if (!peak_given) {
    r.fail("gpu", fmt::format("is required (one of {}), unless peak_flops is given",
                              fmt::join(names_of(model::gpu_presets()), ", ")));
  } else {
    hw.gpu.name = "custom";
    hw.gpu.link = "nvlink4";
  }
  if (peak_given) {
    hw.gpu.peak_flops = r.number("peak_flops", 0);
    if (!(hw.gpu.peak_flops >= 1e6 && hw.gpu.peak_flops <= 1e20))
      r.fail("peak_flops",
             fmt::format("expected FLOP/s in [1e6, 1e20], got {}", hw.gpu.peak_flops));
  } else {
    r.get("peak_flops");
  }
  hw.memory_bytes = r.bytes("memory_bytes", hw.gpu.memory_bytes);
  if (r.has("memory_bytes") && hw.memory_bytes == 0)
    r.fail("memory_bytes", "expected a whole number of bytes >= 1 (leave it out for the GPU's)");
  hw.flops_efficiency = r.number("flops_efficiency", 0.5);
  if (!(hw.flops_efficiency > 0 && hw.flops_efficiency <= 1))
    r.fail("flops_efficiency",
           fmt::format("expected a fraction of peak with 0 < x <= 1, got {}", hw.flops_efficiency));
  if (const nlohmann::json* p2p = r.get("p2p")) {
    out.link_given = true;
    if (p2p->is_string()) {
      const model::Link* link = model::find_link(p2p->get<std::string>());
      if (!link)
        r.fail("p2p", fmt::format("unknown link \"{}\"; expected one of {}, or {{\"bandwidth\": "
                                  "BYTES_PER_S, \"latency\": SECONDS}}",
                                  base::excerpt(p2p->get<std::string>()),
                                  fmt::join(names_of(model::link_presets()), ", ")));
      hw.link = *link;
    } else if (p2p->is_object()) {
      Reader l(*p2p, r.source(), r.key("p2p."));
      hw.link.name = "custom";
      hw.link.bandwidth = l.number("bandwidth", 0);
      hw.link.latency = l.number("latency", 0);
      if (!(hw.link.bandwidth > 0)) l.fail("bandwidth", "expected bytes per second > 0");
      if (hw.link.latency > 1)
        l.fail("latency",
               fmt::format("expected seconds per transfer, at most 1, got {}", hw.link.latency));
      l.reject_unknown();
    } else {
      r.fail("p2p", fmt::format("expected a link name or {{\"bandwidth\": ..., \"latency\": ...}}, "
                                "got {}",
                                Reader::describe(*p2p)));
    }
  }
  r.reject_unknown();
  return out;
}

}  // namespace ppsim::config
