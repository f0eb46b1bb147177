// The whole-step model (docs/MODEL.md, "The whole step"): where each parallel group's ranks land,
// the collectives' closed forms, GEMM wave quantization, the data-parallel channel after the
// pipeline, the step's breakdown and throughput figures, and the layout keys that refuse what the
// formulas cannot honour.
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/model/cluster.hpp"
#include "ppsim/model/collectives.hpp"
#include "ppsim/model/kernels.hpp"
#include "ppsim/model/transformer.hpp"
#include "ppsim/sim/analysis.hpp"

using namespace ppsim;
using nlohmann::json;

namespace {

// The fitted defaults the closed forms below use (docs/MODEL.md, "Fitted constants").
const double kMemory = model::KernelModel{}.memory_fraction;
const double kBus = model::Hardware{}.bus_efficiency;

const std::string kStepSource = "step.json";

// A GPT-style network (LayerNorm, f = 4h, no GQA, untied) whose layers are large enough that
// every layer's gradients fill a Megatron bucket (12h² = 50M > 40M parameters).
json gpt_model() {
  return {{"layers", 8},    {"hidden", 2048},          {"heads", 16},
          {"vocab", 32000}, {"sequence_length", 1024}, {"micro_batch_size", 1}};
}

json step_config(json model, json schedule = {{"kind", "1f1b"}, {"ranks", 4}, {"microbatches", 8}},
                 json hardware = {{"gpu", "a100-80gb"}}) {
  return {{"schedule", schedule}, {"model", model}, {"hardware", hardware}};
}

config::Prepared prepared(const json& j) {
  return config::prepare(config::parse_config(j, kStepSource));
}

bool near(double a, double b, double rel = 1e-12) {
  return std::abs(a - b) <= rel * std::max(std::abs(a), std::abs(b));
}

// The key of the ConfigError that preparing `j` throws.
std::string error_key(const json& j) {
  return test::error_of([&] { prepared(j); }).key();
}

// A100 nodes as the presets give them: NVLink 3 inside, InfiniBand HDR between.
model::CollectiveModel a100_collectives() {
  model::CollectiveModel m;
  m.cluster.gpus_per_node = 8;
  m.cluster.intra = {"nvlink3", 300e9, 5e-6};
  m.cluster.inter = {"ib-hdr", 25e9, 10e-6};
  m.bus_efficiency = 0.85;
  m.base_latency = 8.4e-6;
  return m;
}

}  // namespace

TEST_CASE("step_model.megatron_placement_tp_cp_ep_dp_pp", "[step-model]") {
  using model::Axis;
  // t=8 d=8 p=16 on 8-GPU nodes: a tensor group fills one node; a data group's ranks are 8
  // apart, one per node; a pipeline group's 64 apart, one per node.
  const model::Parallel big{8, 1, 1, 8, 16};
  CHECK(big.world() == 1024);
  CHECK(model::stride(big, Axis::tensor) == 1);
  CHECK(model::stride(big, Axis::data) == 8);
  CHECK(model::stride(big, Axis::pipeline) == 64);
  const model::GroupSpan tp = model::span(big, Axis::tensor, 8);
  CHECK(tp.size == 8);
  CHECK(tp.nodes == 1);
  CHECK(tp.per_node == 8);
  CHECK_FALSE(tp.crosses_nodes());
  const model::GroupSpan dp = model::span(big, Axis::data, 8);
  CHECK(dp.size == 8);
  CHECK(dp.nodes == 8);
  CHECK(dp.per_node == 1);
  CHECK(dp.crosses_nodes());
  const model::GroupSpan pp = model::span(big, Axis::pipeline, 8);
  CHECK(pp.size == 16);
  CHECK(pp.nodes == 16);
  CHECK(pp.per_node == 1);

  // t=2 d=4: the data group's ranks 0, 2, 4, 6 share the first node.
  const model::Parallel small{2, 1, 1, 4, 2};
  CHECK(model::stride(small, Axis::data) == 2);
  const model::GroupSpan dp4 = model::span(small, Axis::data, 8);
  CHECK(dp4.size == 4);
  CHECK(dp4.nodes == 1);
  CHECK(dp4.per_node == 4);
  // ... and the pipeline's ranks 0 and 8 are in two nodes.
  CHECK(model::span(small, Axis::pipeline, 8).nodes == 2);

  // t=16: two full nodes.
  const model::GroupSpan tp16 = model::span({16, 1, 1, 1, 1}, Axis::tensor, 8);
  CHECK(tp16.nodes == 2);
  CHECK(tp16.per_node == 8);
  CHECK(tp16.crosses_nodes());

  // Context parallel sits between tensor and data: t=2 cp=2 d=2 gives strides 1, 2, 4.
  const model::Parallel cp{2, 2, 1, 2, 1};
  CHECK(model::stride(cp, Axis::context) == 2);
  CHECK(model::stride(cp, Axis::data) == 4);
  CHECK(model::span(cp, Axis::context, 8).nodes == 1);
  CHECK(model::span(cp, Axis::data, 8).nodes == 1);

  // A stride that does not divide the node (t=3): data ranks 0, 3, 6 | 9 span two nodes; eight
  // of them (0..21) three, the last holding two (18, 21). A stride of a node or more (12) puts
  // each rank in a node of its own.
  CHECK(model::span_of(4, 3, 8).nodes == 2);
  CHECK(model::span_of(8, 3, 8).nodes == 3);
  CHECK(model::span_of(8, 3, 8).per_node == 2);
  CHECK(model::span_of(3, 3, 8).nodes == 1);  // 0, 3, 6
  CHECK(model::span_of(3, 3, 8).per_node == 3);
  CHECK(model::span_of(4, 12, 8).nodes == 4);
  CHECK(model::span_of(4, 12, 8).per_node == 1);
  // One rank never crosses.
  CHECK(model::span_of(1, 64, 8).nodes == 1);
  // Fewer GPUs per node move the boundaries: t=4 on 4-GPU nodes is one node, d=2 then two.
  CHECK(model::span({4, 1, 1, 2, 1}, Axis::tensor, 4).nodes == 1);
  CHECK(model::span({4, 1, 1, 2, 1}, Axis::data, 4).nodes == 2);

  // Expert-parallel groups come from Megatron's expert grid (tp-ep-dp-pp): their ranks are t
  // apart, inside the stage's data·context ranks. t=4 cp=2 d=1 ep=2 is one 8-GPU node: the
  // expert group is ranks 0 and 4, one node, so its all-to-all runs over NVLink.
  const model::Parallel moe_cp{4, 2, 2, 1, 1};
  CHECK(model::stride(moe_cp, Axis::expert) == 4);
  CHECK(model::span(moe_cp, Axis::expert, 8).nodes == 1);
}

TEST_CASE("step_model.collective_closed_forms", "[step-model]") {
  using model::Collective;
  const model::CollectiveModel m = a100_collectives();
  const double B = 256e6, base = 8.4e-6, eff = 0.85;
  const double nv = 300e9 * eff, ib = 25e9 * eff, nv_lat = 5e-6, ib_lat = 10e-6;

  // Inside a node, n=8: ring all-reduce 2(n-1) steps and 2(n-1)/n of the buffer; all-gather and
  // reduce-scatter half of that; broadcast the whole buffer.
  const model::GroupSpan node = model::span_of(8, 1, 8);
  CHECK(near(model::collective_time(m, Collective::all_reduce, B, node),
             base + 14 * nv_lat + 2.0 * 7 / 8 * B / nv));
  CHECK(near(model::collective_time(m, Collective::all_gather, B, node),
             base + 7 * nv_lat + 7.0 / 8 * B / nv));
  CHECK(near(model::collective_time(m, Collective::reduce_scatter, B, node),
             base + 7 * nv_lat + 7.0 / 8 * B / nv));
  CHECK(
      near(model::collective_time(m, Collective::broadcast, B, node), base + 7 * nv_lat + B / nv));
  // n=2 and n=4 in a node.
  CHECK(near(model::collective_time(m, Collective::all_reduce, B, model::span_of(2, 1, 8)),
             base + 2 * nv_lat + B / nv));
  CHECK(near(model::collective_time(m, Collective::all_reduce, B, model::span_of(4, 2, 8)),
             base + 6 * nv_lat + 1.5 * B / nv));
  // The bus-efficiency and base-latency knobs enter as written.
  model::CollectiveModel slow = m;
  slow.bus_efficiency = 0.5;
  slow.base_latency = 0;
  CHECK(near(model::collective_time(slow, Collective::all_gather, B, node),
             7 * nv_lat + 7.0 / 8 * B / (300e9 * 0.5)));

  // One rank, or nothing to move: no time.
  for (Collective c : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter,
                       Collective::all_to_all, Collective::broadcast}) {
    INFO(model::to_string(c));
    CHECK(model::collective_time(m, c, B, model::span_of(1, 1, 8)) == 0);
    CHECK(model::collective_time(m, c, 0, node) == 0);
  }

  // Across nodes: a ring crosses each node boundary once, so it runs at the node's share of the
  // network for its per_node ranks, never faster than NVLink. 16 ranks 4 apart: 8 nodes, 2 each.
  const model::GroupSpan two_per_node = model::span_of(16, 4, 8);
  REQUIRE(two_per_node.nodes == 8);
  REQUIRE(two_per_node.per_node == 2);
  CHECK(near(model::bus_bandwidth(m, two_per_node), 2 * ib));
  CHECK(near(model::step_latency(m, two_per_node), ib_lat));
  CHECK(near(model::collective_time(m, Collective::all_gather, B, two_per_node),
             base + 15 * ib_lat + 15.0 / 16 * B / (2 * ib)));
  // One per node: one NIC.
  CHECK(near(model::bus_bandwidth(m, model::span_of(8, 8, 8)), ib));
  // Eight per node over a fast network: NVLink binds (8 x 50 GB/s > 300 GB/s).
  model::CollectiveModel fast_net = m;
  fast_net.cluster.inter = {"custom", 50e9, 10e-6};
  CHECK(near(model::bus_bandwidth(fast_net, model::span_of(16, 1, 8)), nv));
  CHECK(near(model::bus_bandwidth(m, model::span_of(16, 1, 8)), 8 * ib));  // HDR: 200 < 300

  // A ring across nodes runs at its least populated node's NICs: d = 12 (t = 1) puts 8 ranks
  // in one node and 4 in the next, so 4 x 25 GB/s x 0.85 = 85 GB/s; t = 3, d = 4 (ranks 0, 3, 6
  // | 9) has one NIC in its second node: 21.25 GB/s.
  CHECK(model::span_of(12, 1, 8).nodes == 2);
  CHECK(near(model::bus_bandwidth(m, model::span_of(12, 1, 8)), 4 * ib));
  CHECK(near(model::bus_bandwidth(m, model::span_of(4, 3, 8)), ib));

  // All-reduce across nodes: NCCL's tree when cheaper, 2·ceil(log2 n) steps. 64 nodes, a small
  // buffer: the ring's 126 latency steps against the tree's 12.
  const model::GroupSpan wide = model::span_of(64, 8, 8);
  const double small = 1e6;
  const double data = 2.0 * 63 / 64 * small / ib;
  const double ring = base + 126 * ib_lat + data, tree = base + 12 * ib_lat + data;
  CHECK(tree < ring);
  CHECK(near(model::collective_time(m, Collective::all_reduce, small, wide), tree));
  // n = 12 (not a power of two): ceil(log2 12) = 4.
  CHECK(near(model::collective_time(m, Collective::all_reduce, small, model::span_of(12, 8, 8)),
             base + 8 * ib_lat + 2.0 * 11 / 12 * small / ib));
  // Inside a node the ring is kept even where a tree's step count would be lower.
  CHECK(near(model::collective_time(m, Collective::all_reduce, small, node),
             base + 14 * nv_lat + 2.0 * 7 / 8 * small / nv));

  // All-to-all on 16 ranks in 2 nodes: 7/16 of the buffer to the node's peers over NVLink and
  // 8/16 over the NIC at once; the slower side sets the time.
  const model::GroupSpan a2a = model::span_of(16, 1, 8);
  const double t_in = 7.0 / 16 * B / nv, t_off = 8.0 / 16 * B / ib;
  REQUIRE(t_off > t_in);
  CHECK(near(model::collective_time(m, Collective::all_to_all, B, a2a), base + ib_lat + t_off));
  // With a network faster than NVLink the NVLink part binds.
  model::CollectiveModel huge_net = m;
  huge_net.cluster.inter = {"custom", 1e13, 10e-6};
  CHECK(near(model::collective_time(huge_net, Collective::all_to_all, B, a2a),
             base + ib_lat + 7.0 / 16 * B / nv));
  // Inside a node: 7/8 over NVLink, nothing over the NIC.
  CHECK(near(model::collective_time(m, Collective::all_to_all, B, node),
             base + nv_lat + 7.0 / 8 * B / nv));
  // One per node: everything but the own share over the NIC.
  CHECK(near(model::collective_time(m, Collective::all_to_all, B, model::span_of(4, 8, 8)),
             base + ib_lat + 3.0 / 4 * B / ib));
}

TEST_CASE("step_model.gemm_wave_quantization", "[step-model]") {
  const model::Gpu& a100 = *model::find_gpu("a100-80gb");
  REQUIRE(a100.sms == 108);
  model::KernelModel km;  // the fitted defaults (docs/MODEL.md)
  const double per_sm = a100.peak_flops * km.gemm_peak_fraction / 108;
  // One wave of the largest tile (256 x 128, operand reuse 1) at k.
  auto wave = [&](double k) { return 2 * 256 * 128 * k / per_sm; };

  // 216 = 2·108 tiles of 256 x 128 (m = 8·256, n = 27·128): two waves. 217 = 2·108 + 1 (m =
  // 7·256, n = 31·128, 0.5% more FLOPs): no tile shape fits the SMs better, a whole third wave.
  const double k = 4096;
  const double t216 = model::gemm_time(km, a100, 8 * 256, 27 * 128, k);
  const double t217 = model::gemm_time(km, a100, 7 * 256, 31 * 128, k);
  CHECK(near(t216, 2 * wave(k)));
  CHECK(near(t217, 3 * wave(k)));

  // 108 vs 109 tiles (m = 108·256 vs 109·256, n = 128), compute-bound at a lower GEMM efficiency
  // (hardware.kernels.gemm_peak_fraction): one wave, then two.
  model::KernelModel slow = km;
  slow.gemm_peak_fraction = 0.3;
  const double slow_wave = 2 * 256 * 128 * 8192 / (a100.peak_flops * 0.3 / 108);
  const double t108 = model::gemm_time(slow, a100, 108 * 256, 128, 8192);
  const double t109 = model::gemm_time(slow, a100, 109 * 256, 128, 8192);
  CHECK(near(t108, slow_wave));
  CHECK(near(t109, 2 * slow_wave));
  CHECK(t109 / t108 > 1.9);  // the work grew by 1/108

  // Large shapes: linear in k; k is consumed in slices of 64 (4097 costs 4160).
  const double big = model::gemm_time(km, a100, 8192, 8192, 4096);
  CHECK(near(model::gemm_time(km, a100, 8192, 8192, 8192), 2 * big));
  CHECK(near(model::gemm_time(km, a100, 8192, 8192, 16384), 4 * big));
  CHECK(near(model::gemm_time(km, a100, 8192, 8192, 4097),
             model::gemm_time(km, a100, 8192, 8192, 4160)));
  // 8192² in 256 x 128 tiles: 2048 tiles, 19 waves.
  CHECK(near(big, 19 * wave(4096)));
  CHECK(model::gemm_time(km, a100, 0, 128, 128) == 0);

  // Low operand reuse streams from HBM: 432 batched 128 x 128 x 4096 products (the unfused
  // attention's shape) are 4 waves of 128 x 128 tiles, 344 us, but move 920 MB: 531 us.
  const double batch = 4 * 108, kk = 4096;
  const double bytes = batch * (128 * kk + kk * 128 + 128 * 128) * 2;
  const double t_batched = model::gemm_time(km, a100, 128, 128, kk, batch);
  CHECK(near(t_batched, bytes / (a100.memory_bandwidth * kMemory)));
  CHECK(near(t_batched, model::memory_time(km, a100, bytes)));
  CHECK(t_batched > 4 * 2 * 128 * 128 * kk / (per_sm * 0.75));
  // fp32 operands double the floor.
  CHECK(near(model::gemm_time(km, a100, 128, 128, kk, batch, 4), 2 * t_batched));
  // The floor follows hardware.kernels.memory_fraction.
  model::KernelModel half_hbm = km;
  half_hbm.memory_fraction = kMemory / 2;
  CHECK(near(model::gemm_time(half_hbm, a100, 128, 128, kk, batch), 2 * t_batched));

  // A matrix-vector product (m = 1, n = k = 4096: 33.6 MB, 21.5 us at 76.5% of HBM) splits K
  // over the SMs and is bound by its operands streaming from HBM, as cuBLAS's is.
  const double gemv_bytes = (1 * 4096 + 4096 * 4096 + 1 * 4096) * 2.0;
  CHECK(model::gemm_time(km, a100, 1, 4096, 4096) <=
        1.1 * model::memory_time(km, a100, gemv_bytes));
}

TEST_CASE("step_model.step_time_without_overlap", "[step-model]") {
  // overlap_grad_reduce off: every rank reduces all its gradients after its last pipeline op;
  // the optimizer starts on every rank once the last has reduced; the step ends with the slowest
  // optimizer. Checked against the prepared phases and the ranks' ends.
  for (const char* kind : {"1f1b", "zb-h1"}) {
    INFO(kind);
    json m = gpt_model();
    m["data_parallel"] = 4;
    const auto p = prepared(step_config(m, {{"kind", kind}, {"ranks", 4}, {"microbatches", 8}}));
    const auto rec = sim::analyze(p);
    REQUIRE(rec.metrics);
    REQUIRE(rec.step);
    const model::StepPhases& ph = p.model.step;
    REQUIRE(ph.enabled);
    CHECK_FALSE(ph.overlap_grad_reduce);
    const model::Derivation& d = *p.derivation;
    const int R = p.program->ranks();
    REQUIRE(R == 4);

    // One bucket per stage: its all-reduce over the 4 data-parallel ranks of a node, of fp32
    // gradients (bf16 training), ready at the stage's end.
    for (const auto& f : d.stages) {
      REQUIRE(f.buckets.size() == 1);
      const double bytes = f.params * 4;
      CHECK(near(f.buckets[0].duration, 8.4e-6 + 6 * 5e-6 + 1.5 * bytes / (300e9 * kBus)));
      // Mixed-precision Adam: 38 bytes of HBM per local parameter.
      CHECK(near(f.optimizer, f.params * 38 / (2.039e12 * kMemory)));
      CHECK(f.param_gather == 0);
    }

    double sync = 0, slowest_optimizer = 0;
    for (int r = 0; r < R; ++r) {
      const auto& rs = rec.step->ranks[static_cast<std::size_t>(r)];
      double reduced = rec.metrics->per_rank[static_cast<std::size_t>(r)].end;
      CHECK(rs.pipeline_end == reduced);
      for (int s = 0; s < p.program->stages(); ++s)
        if (p.program->rank_of(s) == r)
          for (const auto& b : ph.buckets[static_cast<std::size_t>(s)]) reduced += b.duration;
      // With untied embeddings no ranks are joined: rank 3's `reduced` is its own end + its
      // buckets.
      INFO("rank " << r << " reduced " << rs.reduced << " expected " << reduced);
      CHECK(near(rs.reduced, reduced));
      CHECK(rs.reduced >= reduced * (1 - 1e-12));
      sync = std::max(sync, reduced);
      slowest_optimizer =
          std::max(slowest_optimizer, ph.optimizer[static_cast<std::size_t>(r)] +
                                          ph.param_gather[static_cast<std::size_t>(r)]);
    }
    for (int r = 0; r < R; ++r) {
      const auto& rs = rec.step->ranks[static_cast<std::size_t>(r)];
      CHECK(near(rs.optimizer_start, sync));
      CHECK(near(rs.end, sync + ph.optimizer[static_cast<std::size_t>(r)]));
    }
    CHECK(near(rec.step->time, sync + slowest_optimizer));
    // The summary in seconds (the config's unit is ms).
    const record::StepSummary& s = rec.step->summary;
    CHECK(near(s.time, rec.step->time * 1e-3));
    CHECK(s.time > rec.metrics->makespan * 1e-3);

    // The critical rank's breakdown adds up to the step.
    const auto& b = s.breakdown;
    const double sum =
        b.compute + b.tp_comm + b.cp_comm + b.ep_comm + b.pp_bubble + b.dp_exposed + b.optimizer;
    CHECK(near(sum, s.time, 1e-9));
    CHECK(b.dp_exposed > 0);
    CHECK(b.pp_bubble > 0);
    CHECK(b.tp_comm == 0);  // t = 1
    CHECK(b.cp_comm == 0);
    CHECK(b.ep_comm == 0);
    const int crit = rec.step->critical_rank;
    const auto& cr = rec.step->ranks[static_cast<std::size_t>(crit)];
    CHECK(near(b.dp_exposed, (cr.optimizer_start - cr.pipeline_end) * 1e-3, 1e-9));
    CHECK(near(b.optimizer, (rec.step->time - cr.optimizer_start) * 1e-3, 1e-9));
    CHECK(near(b.compute, rec.metrics->per_rank[static_cast<std::size_t>(crit)].busy * 1e-3, 1e-9));
  }
}

TEST_CASE("step_model.data_parallel_one_and_the_tied_embedding", "[step-model]") {
  // d = 1: nothing to reduce but the tied embedding between the first and the last stage.
  const double h = 2048, V = 32000;
  json untied = gpt_model();
  const auto pu = prepared(step_config(untied));
  const auto ru = sim::analyze(pu);
  REQUIRE(ru.step);
  CHECK(pu.derivation->embedding_sync == 0);
  CHECK(ru.step->summary.breakdown.dp_exposed == 0);
  for (const auto& f : pu.derivation->stages)
    for (const auto& b : f.buckets) CHECK(b.duration == 0);

  json tied = gpt_model();
  tied["tied_embeddings"] = true;
  const auto pt = prepared(step_config(tied));
  const auto rt = sim::analyze(pt);
  REQUIRE(rt.step);
  // Ranks 0 and 3 of one node: a two-rank all-reduce of h·V fp32 gradients over NVLink.
  const double bytes = h * V * 4;
  const double sync = 8.4e-6 + 2 * 5e-6 + bytes / (300e9 * kBus);
  CHECK(near(pt.derivation->embedding_sync, sync));
  CHECK(pt.model.step.embedding_first == 0);
  CHECK(pt.model.step.embedding_last == 3);
  // In 1F1B rank 0 ends last; both wait for each other, then sum: rank 0's wait is the sync.
  CHECK(rt.step->critical_rank == 0);
  CHECK(near(rt.step->summary.breakdown.dp_exposed, sync, 1e-9));
  CHECK(near(rt.step->time - ru.step->time, sync * 1e3, 1e-6));

  // With d = 4 (t = 1) the first and last stage's ranks are 12 apart: two nodes, over the NIC.
  json tied_dp = tied;
  tied_dp["data_parallel"] = 4;
  const auto pd = prepared(step_config(tied_dp));
  CHECK(near(pd.derivation->embedding_sync, 8.4e-6 + 2 * 10e-6 + bytes / (25e9 * kBus)));
  // Tensor parallel splits the embedding's gradient.
  json tied_tp = tied;
  tied_tp["tensor_parallel"] = 2;
  const auto ptp = prepared(step_config(tied_tp));
  CHECK(near(ptp.derivation->embedding_sync, 8.4e-6 + 2 * 5e-6 + bytes / 2 / (300e9 * kBus)));

  // One stage: the embedding is the head, nothing to sum.
  const auto p1 =
      prepared(step_config(tied, {{"kind", "1f1b"}, {"ranks", 1}, {"microbatches", 8}}));
  CHECK(p1.derivation->embedding_sync == 0);
  const auto r1 = sim::analyze(p1);
  REQUIRE(r1.step);
  CHECK(r1.step->summary.breakdown.dp_exposed == 0);
}

TEST_CASE("step_model.overlap_grad_reduce_hides_reduction", "[step-model]") {
  for (const char* kind : {"1f1b", "zb-h1"}) {
    for (int d : {1, 2, 4}) {
      INFO(kind << " d=" << d);
      json m = gpt_model();
      m["data_parallel"] = d;
      const json sched = {{"kind", kind}, {"ranks", 4}, {"microbatches", 8}};
      const auto off_p = prepared(step_config(m, sched));
      m["overlap_grad_reduce"] = true;
      const auto on_p = prepared(step_config(m, sched));
      CHECK(on_p.model.step.overlap_grad_reduce);
      const auto off = sim::analyze(off_p), on = sim::analyze(on_p);
      REQUIRE(off.step);
      REQUIRE(on.step);
      // The pipeline itself is untouched.
      CHECK(on.metrics->makespan == off.metrics->makespan);
      CHECK(on.step->time <= off.step->time);
      // Megatron's buckets (40M parameters): each 50M-parameter layer flushes one, so a stage of
      // 2 layers has more than one, ready in reverse layer order within its last backward op.
      for (const auto& f : on_p.derivation->stages) {
        CHECK(f.buckets.size() >= 2);
        double last = 0;
        for (const auto& b : f.buckets) {
          CHECK(b.ready >= last);
          CHECK(b.ready <= 1.0);
          last = b.ready;
        }
        CHECK(near(f.buckets.back().ready, 1.0));
        // The same bytes are reduced in total (one all-reduce each adds its own latency).
        double on_sum = 0;
        for (const auto& b : f.buckets) on_sum += b.duration;
        const double off_sum =
            off_p.derivation->stages[static_cast<std::size_t>(f.stage)].buckets.at(0).duration;
        if (d > 1) CHECK(on_sum >= off_sum);
      }
      const auto& b = on.step->summary.breakdown;
      CHECK(near(
          b.compute + b.tp_comm + b.cp_comm + b.ep_comm + b.pp_bubble + b.dp_exposed + b.optimizer,
          on.step->summary.time, 1e-9));
      if (d > 1) {
        CHECK(b.dp_exposed < off.step->summary.breakdown.dp_exposed);
        CHECK(on.step->time < off.step->time);
      } else {
        CHECK(on.step->time == off.step->time);
      }
    }
  }
}

TEST_CASE("step_model.global_batch_size_sets_microbatches", "[step-model]") {
  json m = gpt_model();
  m["data_parallel"] = 4;
  m["micro_batch_size"] = 2;
  m["global_batch_size"] = 64;  // M = 64 / (2 x 4) = 8
  const json no_m = {{"kind", "1f1b"}, {"ranks", 4}};
  const auto p = prepared(step_config(m, no_m));
  CHECK(p.program->microbatches() == 8);
  // An agreeing schedule.microbatches is accepted.
  CHECK(prepared(step_config(m, {{"kind", "1f1b"}, {"ranks", 4}, {"microbatches", 8}}))
            .program->microbatches() == 8);
  // A conflicting one names it.
  const auto conflict = test::error_of([&] {
    prepared(step_config(m, {{"kind", "1f1b"}, {"ranks", 4}, {"microbatches", 6}}));
  });
  CHECK(conflict.key() == "schedule.microbatches");
  CHECK_THAT(conflict.message(), Catch::Contains("8"));
  // Not a multiple of micro_batch_size x data_parallel.
  json bad = m;
  bad["global_batch_size"] = 60;
  const auto e = test::error_of([&] { prepared(step_config(bad, no_m)); });
  CHECK(e.key() == "model.global_batch_size");
  CHECK(e.source() == kStepSource);

  // The step's figures: 64 sequences of 1024 tokens per step on t·cp·d·P = 16 GPUs.
  const auto rec = sim::analyze(p);
  REQUIRE(rec.step);
  const record::StepSummary& s = rec.step->summary;
  CHECK(s.global_batch == 64);
  CHECK(s.gpus == 16);
  CHECK(near(s.tokens_per_second, 64.0 * 1024 / s.time));
}

TEST_CASE("step_model.megatron_flops_and_tflops_per_gpu", "[step-model]") {
  // Megatron's count (training.py num_floating_point_operations) for a GPT without GQA, f = 4h,
  // causal attention counted at half: per sequence 72·L·s·h² + 6·L·s²·h + 6·s·h·V.
  const double L = 8, h = 2048, s = 1024, V = 32000;
  const double per_sequence = 72 * L * s * h * h + 6 * L * s * s * h + 6 * s * h * V;
  for (int t : {1, 2}) {
    for (int b : {1, 2}) {
      INFO("t=" << t << " b=" << b);
      json m = gpt_model();
      m["tensor_parallel"] = t;
      m["micro_batch_size"] = b;
      m["data_parallel"] = 2;
      const auto p = prepared(step_config(m));
      CHECK(near(p.derivation->model_flops, per_sequence, 1e-12));
      const auto rec = sim::analyze(p);
      REQUIRE(rec.step);
      const record::StepSummary& sum = rec.step->summary;
      const long long gb = 8LL * b * 2;
      const long long gpus = 1LL * t * 2 * 4;
      CHECK(sum.global_batch == gb);
      CHECK(sum.gpus == gpus);
      CHECK(near(sum.tokens_per_second, gb * s / sum.time));
      CHECK(near(sum.tflops_per_gpu, per_sequence * gb / sum.time / gpus / 1e12));
      CHECK(near(sum.mfu, sum.tflops_per_gpu * 1e12 / 312e12));
      CHECK(sum.mfu > 0);
      CHECK(sum.mfu < 1);
    }
  }
  // SwiGLU and GQA (Megatron's gated_linear_multiplier and query groups): per layer
  // 4·s·h²(1 + g/a) + 4·s·h·f·1.5 + 2·s²·h, the logits 2·s·h·V; times 3.
  json llama = {{"layers", 4},    {"hidden", 2048},          {"heads", 16},
                {"kv_heads", 4},  {"ffn_hidden", 5504},      {"swiglu", true},
                {"vocab", 32000}, {"sequence_length", 1024}, {"normalization", "rmsnorm"}};
  const auto pl = prepared(step_config(llama));
  const double Lq = 4, g = 4, a = 16, f = 5504;
  const double llama_flops =
      3 *
      (Lq * (4 * s * h * h * (1 + g / a) + 4 * s * h * f * 1.5 + 2 * s * s * h) + 2 * s * h * V);
  CHECK(near(pl.derivation->model_flops, llama_flops, 1e-12));
}

TEST_CASE("step_model.layout_errors_name_the_key", "[step-model]") {
  auto with = [](json patch) {
    json m = gpt_model();
    for (auto it = patch.begin(); it != patch.end(); ++it) m[it.key()] = it.value();
    return step_config(m);
  };
  // 2·cp must divide the sequence: 8 divides 1000, 16 does not.
  CHECK(error_key(with({{"sequence_length", 1000}, {"context_parallel", 8}})) ==
        "model.context_parallel");
  CHECK_NOTHROW(prepared(with({{"sequence_length", 1000}, {"context_parallel", 4}})));
  CHECK(error_key(with({{"expert_parallel", 2}, {"data_parallel", 2}})) == "model.expert_parallel");
  CHECK(error_key(
            with({{"experts", 6}, {"top_k", 2}, {"expert_parallel", 4}, {"data_parallel", 4}})) ==
        "model.expert_parallel");
  // ep must divide d·cp (groups are cut from the data-parallel ranks).
  CHECK(error_key(
            with({{"experts", 8}, {"top_k", 2}, {"expert_parallel", 4}, {"data_parallel", 2}})) ==
        "model.expert_parallel");
  CHECK_NOTHROW(prepared(with({{"experts", 8},
                               {"top_k", 2},
                               {"moe_ffn_hidden", 4096},
                               {"expert_parallel", 4},
                               {"data_parallel", 2},
                               {"context_parallel", 2}})));
  // Sequence parallel splits the sequence over the tensor-parallel ranks.
  CHECK(error_key(with(
            {{"sequence_length", 1022}, {"tensor_parallel", 4}, {"sequence_parallel", true}})) ==
        "model.tensor_parallel");
  CHECK_NOTHROW(prepared(with({{"sequence_length", 1022}, {"tensor_parallel", 4}})));

  // The network between nodes needs a bandwidth.
  for (double bw : {0.0, -1.0}) {
    INFO("bandwidth " << bw);
    const json hw = {{"gpu", "a100-80gb"}, {"inter_node", {{"bandwidth", bw}, {"latency", 1e-5}}}};
    CHECK(error_key(step_config(gpt_model(), {{"kind", "1f1b"}, {"ranks", 4}, {"microbatches", 8}},
                                hw)) == "hardware.inter_node.bandwidth");
  }
  // Unknown keys in hardware.kernels and hardware.collectives are refused, named.
  const json sched = {{"kind", "1f1b"}, {"ranks", 4}, {"microbatches", 8}};
  CHECK(error_key(step_config(gpt_model(), sched,
                              {{"gpu", "a100-80gb"}, {"kernels", {{"lanch", 1e-5}}}})) ==
        "hardware.kernels.lanch");
  CHECK(error_key(step_config(gpt_model(), sched,
                              {{"gpu", "a100-80gb"}, {"kernels", {{"memory_fraction", 1.5}}}})) ==
        "hardware.kernels.memory_fraction");
  CHECK(error_key(step_config(gpt_model(), sched,
                              {{"gpu", "a100-80gb"}, {"collectives", {{"bus_eficiency", 0.8}}}})) ==
        "hardware.collectives.bus_eficiency");
}

TEST_CASE("step_model.hardware_knobs_reach_the_costs", "[step-model]") {
  // hardware.kernels and hardware.collectives change the per-op times in the direction they say.
  json m = gpt_model();
  m["data_parallel"] = 4;
  const json sched = {{"kind", "1f1b"}, {"ranks", 4}, {"microbatches", 8}};
  // A short launch keeps the ops device-bound (at 66 us a kernel these small layers are
  // host-bound).
  const json fast_host = {{"launch", 1e-6}};
  const auto base = prepared(step_config(m, sched, {{"gpu", "a100-80gb"}, {"kernels", fast_host}}));
  const auto slow_gemm = prepared(step_config(
      m, sched,
      {{"gpu", "a100-80gb"}, {"kernels", {{"launch", 1e-6}, {"gemm_peak_fraction", 0.18}}}}));
  const auto slow_bus = prepared(step_config(m, sched,
                                             {{"gpu", "a100-80gb"},
                                              {"kernels", fast_host},
                                              {"collectives", {{"bus_efficiency", kBus / 2}}}}));
  const auto base_default = prepared(step_config(m, sched));
  for (std::size_t s = 0; s < base.derivation->stages.size(); ++s) {
    INFO("stage " << s);
    const auto& b = base.derivation->stages[s];
    CHECK(slow_gemm.derivation->stages[s].forward > 2 * b.forward);
    // The host's launches bound an op from below: the default 66 us per kernel is slower here.
    CHECK(b.forward < base_default.derivation->stages[s].forward);
    // Halving the bus efficiency doubles each bucket's bandwidth term.
    const double lat = 8.4e-6 + 6 * 5e-6;
    CHECK(near(slow_bus.derivation->stages[s].buckets[0].duration - lat,
               2 * (b.buckets[0].duration - lat), 1e-9));
  }
  // Eight GPUs per node put the d = 4 group in one node; two GPUs per node split it over two.
  const auto two = prepared(step_config(m, sched, {{"gpu", "a100-80gb"}, {"gpus_per_node", 2}}));
  const double bytes = base.derivation->stages[1].params * 4;
  CHECK(near(two.derivation->stages[1].buckets[0].duration,
             8.4e-6 + 2 * 2 * 10e-6 + 1.5 * bytes / (2 * 25e9 * kBus)));
}

TEST_CASE("step_model.flat_efficiency_keeps_the_flops_model", "[step-model]") {
  json m = gpt_model();
  m["data_parallel"] = 4;
  const auto flat = prepared(step_config(m, {{"kind", "1f1b"}, {"ranks", 4}, {"microbatches", 8}},
                                         {{"gpu", "a100-80gb"}, {"flops_efficiency", 0.4}}));
  const model::Derivation& d = *flat.derivation;
  CHECK_FALSE(d.per_op);
  CHECK_FALSE(flat.model.step.enabled);
  for (const auto& f : d.stages) {
    INFO("stage " << f.stage);
    CHECK(f.forward == f.flops_forward / (312e12 * 0.4));
    CHECK(f.backward_input == f.flops_backward_input / (312e12 * 0.4));
    CHECK(f.backward_weight == f.flops_backward_weight / (312e12 * 0.4));
    CHECK(f.buckets.empty());
  }
  const auto rec = sim::analyze(flat);
  REQUIRE(rec.metrics);
  CHECK_FALSE(rec.step.has_value());

  const auto per_op = prepared(step_config(m));
  CHECK(per_op.derivation->per_op);
  CHECK(per_op.model.step.enabled);
  const auto rec2 = sim::analyze(per_op);
  REQUIRE(rec2.step.has_value());
  CHECK(rec2.step->summary.time > 0);
}

TEST_CASE("step_model.tp_comm_overlap_and_context_parallel", "[step-model]") {
  for (const double launch : {66e-6, 1e-6}) {
    for (int t : {1, 2, 8}) {
      INFO("t=" << t << " launch " << launch);
      json m = gpt_model();
      m["tensor_parallel"] = t;
      const json hw = {{"gpu", "a100-80gb"}, {"kernels", {{"launch", launch}}}};
      const json sched = {{"kind", "1f1b"}, {"ranks", 4}, {"microbatches", 8}};
      const auto plain = prepared(step_config(m, sched, hw));
      m["tp_comm_overlap"] = true;
      const auto overlapped = prepared(step_config(m, sched, hw));
      for (std::size_t s = 0; s < plain.derivation->stages.size(); ++s) {
        INFO("stage " << s);
        const auto& a = plain.derivation->stages[s];
        const auto& b = overlapped.derivation->stages[s];
        // (A host-bound op's total is the host's either way, summed from its parts: to rounding.)
        CHECK(b.forward <= a.forward * (1 + 1e-12));
        CHECK(b.backward_input <= a.backward_input * (1 + 1e-12));
        CHECK(b.backward_weight == a.backward_weight);
        CHECK(b.times.forward.tp <= a.times.forward.tp);
        if (t == 1) {
          CHECK(b.forward == a.forward);
          CHECK(a.times.forward.tp == 0);
        } else {
          CHECK(a.times.forward.tp > 0);
          // Device-bound, the middle stages' layers hide their TP collectives under their GEMMs.
          if (launch < 1e-5 && (s == 1 || s == 2)) {
            CHECK(b.forward < a.forward);
            CHECK(b.times.forward.tp < a.times.forward.tp);
          }
        }
      }
    }
  }

  // Context parallel splits every token-proportional activation over its ranks.
  json m = gpt_model();
  const auto one = prepared(step_config(m));
  m["context_parallel"] = 2;
  const auto two = prepared(step_config(m));
  for (std::size_t s = 0; s < one.derivation->stages.size(); ++s) {
    INFO("stage " << s);
    const double a1 = static_cast<double>(one.derivation->stages[s].activation_bytes);
    const double a2 = static_cast<double>(two.derivation->stages[s].activation_bytes);
    CHECK(std::abs(2 * a2 - a1) <= 2);
    CHECK(std::abs(2 * static_cast<double>(two.derivation->stages[s].weight_stash_bytes) -
                   static_cast<double>(one.derivation->stages[s].weight_stash_bytes)) <= 2);
    // The parameters are not split.
    CHECK(two.derivation->stages[s].params == one.derivation->stages[s].params);
    CHECK(two.derivation->stages[s].times.forward.cp >= 0);
  }
  // The step's GPUs count the context-parallel ranks.
  const auto rec = sim::analyze(two);
  REQUIRE(rec.step);
  CHECK(rec.step->summary.gpus == 2 * 4);
}

TEST_CASE("step_model.tied_embedding_copy_on_the_last_stage", "[step-model]") {
  const double h = 2048, V = 32000, norm = 2;  // LayerNorm: weight and bias
  for (int t : {1, 2}) {
    INFO("t=" << t);
    json m = gpt_model();
    m["tensor_parallel"] = t;
    m["tied_embeddings"] = true;
    const auto tied = prepared(step_config(m));
    const auto& st = tied.derivation->stages;
    REQUIRE(st.size() == 4);
    // Stage 1 holds the same 2 layers as stage 3 and nothing else: the last stage's extra is the
    // final norm and Megatron's copy of the word embedding, h·V / t.
    CHECK(near(st[3].params - st[1].params, (norm * h + h * V) / t));
    CHECK(near(st[0].params - st[1].params, h * V / t));
    CHECK(st[3].static_bytes == std::llround(st[3].params * 18));
    m["tied_embeddings"] = false;
    const auto untied = prepared(step_config(m));
    CHECK(untied.derivation->stages[3].params == st[3].params);

    // One stage: the head is the embedding itself.
    const json one = {{"kind", "1f1b"}, {"ranks", 1}, {"microbatches", 8}};
    m["tied_embeddings"] = true;
    const auto tied1 = prepared(step_config(m, one));
    m["tied_embeddings"] = false;
    const auto untied1 = prepared(step_config(m, one));
    CHECK(
        near(untied1.derivation->stages[0].params - tied1.derivation->stages[0].params, h * V / t));
    CHECK(near(tied1.derivation->stages[0].params - 4 * st[1].params, (h * V + norm * h) / t));
  }
}

TEST_CASE("step_model.untied_embeddings_join_no_ranks", "[step-model]") {
  // Untied embeddings need no all-reduce between the first and the last stage, so each rank's
  // gradients are reduced at its own pace and the optimizer waits for the slowest. Seven of the
  // ten layers on the last stage: its buckets (418M parameters) outlast rank 0's (116M) by more
  // than the three backward ops rank 0 still runs after it, so rank 3 is the rank the optimizer
  // waits for.
  json m = gpt_model();
  m["data_parallel"] = 4;
  m["layers"] = 10;
  m["layers_per_stage"] = {1, 1, 1, 7};
  const auto p = prepared(step_config(m));
  const auto rec = sim::analyze(p);
  REQUIRE(rec.step);
  const model::StepPhases& ph = p.model.step;
  std::vector<double> own(4);
  int slowest = 0;
  for (int r = 0; r < 4; ++r) {
    own[static_cast<std::size_t>(r)] = rec.metrics->per_rank[static_cast<std::size_t>(r)].end;
    for (const auto& b : ph.buckets[static_cast<std::size_t>(r)])
      own[static_cast<std::size_t>(r)] += b.duration;
    if (own[static_cast<std::size_t>(r)] > own[static_cast<std::size_t>(slowest)]) slowest = r;
  }
  INFO("own " << own[0] << " " << own[1] << " " << own[2] << " " << own[3]);
  REQUIRE(slowest == 3);
  // The step's time does not depend on who is named.
  CHECK(near(rec.step->ranks[0].optimizer_start, own[3]));
  // Untied embeddings join no ranks: rank 3 reduces last and is the critical rank; rank 0
  // reduces at its own end + its buckets.
  CHECK(rec.step->critical_rank == 3);
  CHECK(near(rec.step->ranks[0].reduced, own[0]));
  CHECK(p.model.step.embedding_first < 0);
}

TEST_CASE("step_model.bytes_per_param_follow_the_gradient_dtype", "[step-model]") {
  // Weights + the gradient buffer in the dtype Megatron reduces it in + Adam's fp32 state
  // (master copy and two moments), the state sharded over d·cp by the distributed optimizer:
  // bf16 2 + 4 + 12 (theoretical_memory_usage.py's 18, 6 + 12/d), fp16 2 + 2 + 12, fp32 4 + 4 + 8.
  auto bpp = [](const char* dtype, bool dist, int d, int cp) {
    json m = gpt_model();
    m["dtype"] = dtype;
    m["data_parallel"] = d;
    m["context_parallel"] = cp;
    m["distributed_optimizer"] = dist;
    return prepared(step_config(m)).derivation->bytes_per_param;
  };
  CHECK(bpp("bf16", false, 1, 1) == 18);
  CHECK(bpp("bf16", true, 4, 1) == 6 + 12.0 / 4);
  CHECK(bpp("bf16", true, 4, 2) == 6 + 12.0 / 8);
  CHECK(bpp("fp16", false, 1, 1) == 16);
  CHECK(bpp("fp16", true, 8, 1) == 4 + 12.0 / 8);
  CHECK(bpp("fp32", false, 1, 1) == 16);
}
