#include "ppsim/config/model_section.hpp"

#include <fmt/format.h>

#include <cmath>

#include <filesystem>
#include <optional>

#include "ppsim/config/hf_config.hpp"
#include "ppsim/model/cluster.hpp"
#include "ppsim/model/gpt_presets.hpp"

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

// The network from `hf_config` (a Hugging Face config.json, relative to the config's folder) or
// `preset` (a GPT of the Megatron papers); nullopt when the section gives its shapes itself.
std::optional<model::Transformer> given_network(Reader& r, std::string& by) {
  if (r.has("hf_config") && r.has("preset"))
    r.fail("preset", "give model.hf_config or model.preset, not both");
  if (r.has("hf_config")) {
    const std::string file = r.string("hf_config", "");
    if (file.empty()) r.fail("hf_config", "expected the path of a Hugging Face config.json");
    std::filesystem::path path(file);
    if (path.is_relative() && !r.source().starts_with("--set"))
      path = std::filesystem::path(r.source()).parent_path() / path;
    by = "model.hf_config";
    return read_hf_config(path.string()).transformer;
  }
  if (r.has("preset")) {
    const std::string name = r.string("preset", "");
    const model::GptPreset* p = model::find_gpt_preset(name);
    if (!p) {
      std::vector<std::string> names;
      for (const auto& g : model::gpt_presets()) names.push_back(g.name);
      r.fail("preset", fmt::format("unknown model \"{}\"; expected one of {}", base::excerpt(name),
                                   fmt::join(names, ", ")));
    }
    by = "model.preset";
    return p->transformer;
  }
  return std::nullopt;
}

ModelSection read_model_section(Reader& r, bool derived) {
  ModelSection out;
  model::Transformer& m = out.transformer;
  model::Layout& l = out.layout;
  std::string by;
  const std::optional<model::Transformer> given = given_network(r, by);
  // The network's own keys come from the file or preset when one is named: giving one as well
  // is a conflict, not an override.
  if (given)
    for (const char* k : {"layers", "hidden", "heads", "kv_heads", "ffn_hidden", "swiglu",
                          "normalization", "vocab", "tied_embeddings", "experts", "top_k",
                          "moe_ffn_hidden", "shared_experts", "shared_ffn_hidden"})
      if (r.has(k))
        r.fail(k, fmt::format("is given by {}; leave it out (or leave out {})", by, by));
  const model::Transformer g = given.value_or(model::Transformer{});
  const bool from = given.has_value();
  out.describes_network = r.has("heads") || derived || from;
  const bool net = out.describes_network;
  m.hidden = from ? g.hidden : bounded(r, "hidden", 0, 1, kMaxHidden, true);
  m.sequence_length = bounded(r, "sequence_length", g.sequence_length, 1, kMaxSequence,
                              !from || g.sequence_length == 0);
  m.micro_batch_size = bounded(r, "micro_batch_size", 1, 1, kMaxParallel);
  m.layers = from ? g.layers : bounded(r, "layers", net ? 0 : 1, 1, kMaxLayers, derived);
  m.ffn_hidden = from ? g.ffn_hidden : bounded(r, "ffn_hidden", 0, 1, 4 * kMaxHidden);
  if (m.ffn_hidden == 0) m.ffn_hidden = 4 * m.hidden;
  const std::string dtype = r.one_of("dtype", "bf16", {"bf16", "fp16", "fp32"});
  m.dtype_bytes = dtype == "fp32" ? 4 : 2;
  m.fp16 = dtype == "fp16";
  m.flash_attention = r.boolean("flash_attention", false);
  m.dropout = r.boolean("dropout", true);
  if (from) {
    m.heads = g.heads;
    m.kv_heads = g.kv_heads > 0 ? g.kv_heads : g.heads;
    m.swiglu = g.swiglu;
    m.rmsnorm = g.rmsnorm;
    m.vocab = g.vocab;
    m.tied_embeddings = g.tied_embeddings;
    m.experts = g.experts;
    m.top_k = g.top_k;
    m.moe_ffn_hidden = g.moe_ffn_hidden > 0 ? g.moe_ffn_hidden : m.ffn_hidden;
    m.shared_experts = g.shared_experts;
    m.shared_ffn_hidden = g.shared_ffn_hidden;
  } else {
    m.heads = bounded(r, "heads", 0, 1, kMaxHidden, derived);
    m.kv_heads = bounded(r, "kv_heads", m.heads, 1, kMaxHidden);
    m.swiglu = r.boolean("swiglu", false);
    m.rmsnorm = r.one_of("normalization", "layernorm", {"layernorm", "rmsnorm"}) == "rmsnorm";
    m.vocab = bounded(r, "vocab", 0, 1, 1 << 30, derived);
    m.tied_embeddings = r.boolean("tied_embeddings", false);
    m.experts = bounded(r, "experts", 0, 1, kMaxParallel);
    m.top_k = bounded(r, "top_k", 0, 1, kMaxParallel, m.experts > 0);
    m.moe_ffn_hidden = bounded(r, "moe_ffn_hidden", m.ffn_hidden, 1, 4 * kMaxHidden);
    m.shared_experts = bounded(r, "shared_experts", 0, 0, kMaxParallel);
    m.shared_ffn_hidden = bounded(r, "shared_ffn_hidden", m.moe_ffn_hidden, 1, 4 * kMaxHidden);
  }
  l.tensor_parallel = bounded(r, "tensor_parallel", 1, 1, kMaxParallel);
  l.sequence_parallel = r.boolean("sequence_parallel", false);
  l.data_parallel = bounded(r, "data_parallel", 1, 1, 1 << 24);
  l.distributed_optimizer = r.boolean("distributed_optimizer", false);
  l.context_parallel = bounded(r, "context_parallel", 1, 1, kMaxParallel);
  l.expert_parallel = bounded(r, "expert_parallel", 1, 1, kMaxParallel);
  l.global_batch_size = bounded(r, "global_batch_size", 0, 1, 1 << 30);
  l.overlap_grad_reduce = r.boolean("overlap_grad_reduce", false);
  l.overlap_param_gather = r.boolean("overlap_param_gather", false);
  l.tp_comm_overlap = r.boolean("tp_comm_overlap", false);
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
  if (l.sequence_parallel && m.sequence_length % l.tensor_parallel != 0)
    r.fail("tensor_parallel",
           fmt::format("must divide model.sequence_length ({}) with sequence parallel, got {}",
                       m.sequence_length, l.tensor_parallel));
  if (l.context_parallel > 1 && m.sequence_length % (2 * l.context_parallel) != 0)
    r.fail("context_parallel",
           fmt::format("2 x context_parallel must divide model.sequence_length ({}) (each rank "
                       "holds two chunks of the sequence, as Megatron balances causal "
                       "attention), got {}",
                       m.sequence_length, l.context_parallel));
  if (l.expert_parallel > 1 && m.experts == 0)
    r.fail("expert_parallel", "needs model.experts (a mixture-of-experts model)");
  if (m.experts > 0 && m.experts % l.expert_parallel != 0)
    r.fail("expert_parallel",
           fmt::format("must divide model.experts ({}), got {}", m.experts, l.expert_parallel));
  if (l.expert_parallel > 1 &&
      (static_cast<long long>(l.data_parallel) * l.context_parallel) % l.expert_parallel != 0)
    r.fail("expert_parallel",
           fmt::format("must divide data_parallel x context_parallel ({}) (expert-parallel groups "
                       "are cut from the data-parallel ranks), got {}",
                       static_cast<long long>(l.data_parallel) * l.context_parallel,
                       l.expert_parallel));
  if (m.experts > 0 && m.top_k > m.experts)
    r.fail("top_k", fmt::format("must be at most model.experts ({}), got {}", m.experts, m.top_k));
  for (const char* k : {"top_k", "moe_ffn_hidden", "shared_experts", "shared_ffn_hidden"})
    if (!from && m.experts == 0 && r.has(k)) r.fail(k, "only used with model.experts");
  if (!l.layers_per_stage.empty() && m.layers > 0) {
    long long sum = 0;
    for (int n : l.layers_per_stage) sum += n;
    if (sum != m.layers)
      r.fail("layers_per_stage",
             fmt::format("adds up to {} layers; model.layers is {}", sum, m.layers));
  }
  return out;
}

// A link preset's name or {"bandwidth": bytes/s, "latency": s} at `key`, into `link`; false
// when absent.
bool read_link(Reader& r, const std::string& key, model::Link& link) {
  const nlohmann::json* v = r.get(key);
  if (!v) return false;
  if (v->is_string()) {
    const model::Link* preset = model::find_link(v->get<std::string>());
    if (!preset)
      r.fail(key, fmt::format("unknown link \"{}\"; expected one of {}, or {{\"bandwidth\": "
                              "BYTES_PER_S, \"latency\": SECONDS}}",
                              base::excerpt(v->get<std::string>()),
                              fmt::join(names_of(model::link_presets()), ", ")));
    link = *preset;
    return true;
  }
  if (!v->is_object())
    r.fail(key, fmt::format("expected a link name or {{\"bandwidth\": ..., \"latency\": ...}}, "
                            "got {}",
                            Reader::describe(*v)));
  Reader l(*v, r.source(), r.key(key + "."));
  link.name = "custom";
  link.bandwidth = l.number("bandwidth", 0);
  link.latency = l.number("latency", 0);
  if (!(link.bandwidth >= 1e6 && link.bandwidth <= 1e15))
    l.fail("bandwidth",
           fmt::format("expected bytes per second in [1e6, 1e15] (12.5e9 is 100 Gb/s), got {}",
                       link.bandwidth));
  if (!(link.latency >= 0 && link.latency <= 1))
    l.fail("latency", fmt::format("expected seconds per transfer in [0, 1], got {}", link.latency));
  l.reject_unknown();
  return true;
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
  hw.flops_efficiency_given = r.has("flops_efficiency");
  hw.flops_efficiency = r.number("flops_efficiency", 0.5);
  if (!(hw.flops_efficiency > 0 && hw.flops_efficiency <= 1))
    r.fail("flops_efficiency",
           fmt::format("expected a fraction of peak with 0 < x <= 1, got {}", hw.flops_efficiency));
  if (read_link(r, "p2p", hw.link)) out.link_given = true;
  hw.gpus_per_node = bounded(r, "gpus_per_node", 8, 1, 1 << 16);
  if (!read_link(r, "intra_node", hw.intra_node)) hw.intra_node = *model::find_link(hw.gpu.link);
  if (!read_link(r, "inter_node", hw.inter_node))
    hw.inter_node = *model::find_link(model::default_inter_node(hw.gpu));
  // The fitted constants of the per-op costs (docs/MODEL.md), for a user who measured theirs.
  auto fraction = [](Reader& k, const char* key, double def) {
    const double v = k.number(key, def);
    if (!(v > 0 && v <= 1))
      k.fail(key, fmt::format("expected a fraction with 0 < x <= 1, got {}", v));
    return v;
  };
  auto seconds = [](Reader& k, const char* key, double def) {
    const double v = k.number(key, def);
    if (!(v >= 0 && v <= 1)) k.fail(key, fmt::format("expected seconds in [0, 1], got {}", v));
    return v;
  };
  if (const nlohmann::json* kj = r.get("kernels")) {
    if (!kj->is_object())
      r.fail("kernels", fmt::format("expected an object such as {{\"launch\": 1e-5}}, got {}",
                                    Reader::describe(*kj)));
    Reader k(*kj, r.source(), r.key("kernels."));
    hw.kernels.gemm_peak_fraction =
        fraction(k, "gemm_peak_fraction", hw.kernels.gemm_peak_fraction);
    hw.kernels.memory_fraction = fraction(k, "memory_fraction", hw.kernels.memory_fraction);
    hw.kernels.launch = seconds(k, "launch", hw.kernels.launch);
    k.reject_unknown();
  }
  if (const nlohmann::json* cj = r.get("collectives")) {
    if (!cj->is_object())
      r.fail("collectives",
             fmt::format("expected an object such as {{\"bus_efficiency\": 0.8}}, got {}",
                         Reader::describe(*cj)));
    Reader k(*cj, r.source(), r.key("collectives."));
    hw.bus_efficiency = fraction(k, "bus_efficiency", hw.bus_efficiency);
    hw.collective_latency = seconds(k, "latency", hw.collective_latency);
    k.reject_unknown();
  }
  r.reject_unknown();
  return out;
}

}  // namespace ppsim::config
