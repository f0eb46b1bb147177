#include "ppsim/model/layer_costs.hpp"

#include <algorithm>

namespace ppsim::model {

namespace {

// The shapes of one microbatch on one GPU.
struct Shape {
  double T;    // tokens on this rank: s·b / cp
  double sq;   // queries per sequence on this rank: s / cp
  double skv;  // keys each query attends to: s
  double b, h, t, a, g, dh, d;
  double f;                                  // the dense MLP width
  bool sp;                                   // sequence parallel: replicated parts split over t
  double rep() const { return sp ? t : 1; }  // the divisor of a replicated activation
};

Shape shape_of(const CostContext& c) {
  const Transformer& m = c.m;
  Shape s;
  const double cp = c.parallel.context;
  s.b = m.micro_batch_size;
  s.sq = m.sequence_length / cp;
  s.skv = m.sequence_length;
  s.T = s.sq * s.b;
  s.h = m.hidden;
  s.t = c.parallel.tensor;
  s.a = m.heads;
  s.g = m.query_groups();
  s.dh = s.h / s.a;
  s.d = m.dtype_bytes;
  s.f = static_cast<double>(m.ffn());
  s.sp = c.layout.sequence_parallel;
  return s;
}

// Kernels in issue order: their device time and how many the host issues. An op takes the
// longer of the two (the host runs ahead while the GPU is busy, the GPU waits while it is not).
struct Work {
  double gpu = 0, kernels = 0;
  Work& operator+=(const Work& o) {
    gpu += o.gpu, kernels += o.kernels;
    return *this;
  }
  Work operator+(const Work& o) const { return Work(*this) += o; }
  Work operator*(double k) const { return {gpu * k, kernels * k}; }
};

struct Kernels {
  const CostContext& c;
  Work gemm(double m, double n, double k, double batch = 1) const {
    return {gemm_time(c.kernels, c.gpu, m, n, k, batch, c.m.dtype_bytes), 1};
  }
  Work mem(double bytes) const { return {memory_time(c.kernels, c.gpu, bytes), 1}; }
  double coll(Collective k, double bytes, Axis axis) const {
    return collective_time(c.collectives, k, bytes,
                           span(c.parallel, axis, c.collectives.cluster.gpus_per_node));
  }
};

// The two TP collectives around a block of GEMMs (Megatron's column- then row-parallel pair): an
// all-reduce of the block's output, or with sequence parallel an all-gather before and a
// reduce-scatter after; in the backward the same on the input gradient. (seconds, kernels)
std::pair<double, double> tp_pair(const Kernels& k, const Shape& s) {
  if (s.t <= 1) return {0, 0};
  const double bytes = s.T * s.h * s.d;
  if (s.sp)
    return {k.coll(Collective::all_gather, bytes, Axis::tensor) +
                k.coll(Collective::reduce_scatter, bytes, Axis::tensor),
            2};
  return {k.coll(Collective::all_reduce, bytes, Axis::tensor), 1};
}

// The attention core (QK^T, softmax, dropout, ·V) of one layer, forward and backward.
struct CoreWork {
  Work forward, backward;
};
CoreWork core_work(const Kernels& k, const Shape& s, const Transformer& m) {
  const double heads = s.a / s.t, batch = s.b * heads;
  CoreWork out;
  if (m.flash_attention) {
    // One fused kernel: causal, so half the score blocks; its backward recomputes the scores
    // and runs four products (dQ, dK, dV, dP), 2.5x the forward's.
    const double kv = s.skv / 2;
    const double fwd = (k.gemm(s.sq, kv, s.dh, batch) + k.gemm(s.sq, s.dh, kv, batch)).gpu;
    const double io = s.T * (s.h + 2 * s.g * s.dh) / s.t * s.d + s.T * s.h / s.t * s.d;
    out.forward = {std::max(fwd, k.mem(io).gpu), 1};
    out.backward = {std::max(2.5 * fwd, k.mem(2 * io).gpu), 2};
    return out;
  }
  // Unfused (Megatron's CoreAttention): the whole s x s scores, a fused scale-mask-softmax,
  // dropout on the probabilities, a copy of the context into [s, b, h].
  const double scores = batch * s.sq * s.skv;
  const Work qk = k.gemm(s.sq, s.skv, s.dh, batch), av = k.gemm(s.sq, s.dh, s.skv, batch);
  const Work drop = m.dropout ? k.mem(scores * (2 * s.d + 1)) : Work{};
  const Work copy = k.mem(2 * s.T * s.h / s.t * s.d);
  out.forward = qk + k.mem(2 * scores * s.d) + drop + av + copy;
  // Two products for each forward one; softmax's backward reads its output and the gradient.
  out.backward = qk * 2 + av * 2 + k.mem(3 * scores * s.d) + drop + copy;
  return out;
}

// An MLP on `tokens` tokens of width `width`, `batch` of them (experts) side by side.
struct MlpWork {
  Work forward, input, weight;
};
MlpWork mlp_work(const Kernels& k, const Shape& s, double tokens, double width, bool gated,
                 double batch = 1) {
  const double up = width * (gated ? 2 : 1) / s.t, down = width / s.t;
  const double act = tokens * batch * (gated ? 3 : 2) * down * s.d;  // bias + activation
  MlpWork out;
  out.forward = k.gemm(tokens, up, s.h, batch) + k.mem(act) + k.gemm(tokens, s.h, down, batch);
  out.input = k.gemm(tokens, s.h, up, batch) + k.mem(1.5 * act) + k.gemm(tokens, down, s.h, batch);
  out.weight = k.gemm(s.h, up, tokens, batch) + k.gemm(down, s.h, tokens, batch);
  return out;
}

// An op's seconds: its kernels, and the communication it holds; `hidden_under` of the TP
// collectives' time can hide under the GEMMs with tp_comm_overlap.
OpTime op_time(const CostContext& c, const Work& w, double tp, double cp, double ep,
               double comm_kernels, bool overlap) {
  const double host = (w.kernels + comm_kernels) * c.kernels.launch;
  OpTime out;
  out.tp = overlap ? std::max(0.0, tp - w.gpu) : tp;
  out.cp = cp;
  out.ep = ep;
  // A host-bound op's extra time is the host's, counted as compute.
  out.compute = std::max(w.gpu, host - out.tp - out.cp - out.ep);
  return out;
}

}  // namespace

PassTimes layer_times(const CostContext& c) {
  const Kernels k{c};
  const Shape s = shape_of(c);
  const Transformer& m = c.m;
  const bool overlap = c.layout.tp_comm_overlap;
  const double qkv = s.h * (1 + 2 * s.g / s.a) / s.t;  // the QKV projection's output width
  // Memory-bound operators on the replicated [T, h] stream: the two norms and the two
  // bias-dropout-add-residual kernels (read two tensors, write one, a 1-byte mask).
  const double E = s.T * s.h / s.rep();
  const double mask = m.dropout ? 1 : 0;
  const Work around_f = k.mem(2 * E * s.d) * 2 + k.mem(E * (3 * s.d + mask)) * 2;
  const Work around_b = k.mem(3 * E * s.d) * 2 + k.mem(E * (2 * s.d + mask)) * 2;

  const Work attn_f = k.gemm(s.T, qkv, s.h) + k.gemm(s.T, s.h, s.h / s.t);
  const Work attn_i = k.gemm(s.T, s.h, qkv) + k.gemm(s.T, s.h / s.t, s.h);
  const Work attn_w = k.gemm(s.h, qkv, s.T) + k.gemm(s.h / s.t, s.h, s.T);
  const CoreWork core = core_work(k, s, m);

  MlpWork mlp;
  double ep = 0, ep_kernels = 0;
  if (m.experts > 0) {
    // Router, then tokens to their experts and back (an all-to-all each way, and again in the
    // backward); this rank's E/ep experts see top_k·T tokens between them, one GEMM each.
    const double local = static_cast<double>(m.experts) / c.parallel.expert;
    const double routed = s.T * m.top_k;
    mlp = mlp_work(k, s, routed / local, m.moe_ffn_hidden, m.swiglu, local);
    const Work route = k.gemm(s.T, m.experts, s.h) + k.mem(routed * s.h * s.d * 2) * 2;
    mlp.forward += route;
    mlp.input += route;
    if (m.shared_experts > 0) {
      const MlpWork sh =
          mlp_work(k, s, s.T, 1.0 * m.shared_experts * m.shared_ffn_hidden, m.swiglu);
      mlp.forward += sh.forward, mlp.input += sh.input, mlp.weight += sh.weight;
    }
    ep = 2 * k.coll(Collective::all_to_all, routed * s.h * s.d, Axis::expert);
    ep_kernels = 2;
  } else {
    mlp = mlp_work(k, s, s.T, s.f, m.swiglu);
  }

  // Context parallel: each rank passes its K and V round the ring, cp - 1 steps, under the
  // attention that uses them; the backward passes them and their gradients.
  double cp_f = 0, cp_b = 0;
  if (c.parallel.context > 1) {
    const double kv_bytes = 2 * s.T * s.g * s.dh / s.t * s.d;
    const GroupSpan ring = span(c.parallel, Axis::context, c.collectives.cluster.gpus_per_node);
    const Link& link =
        ring.crosses_nodes() ? c.collectives.cluster.inter : c.collectives.cluster.intra;
    const double hop = step_latency(c.collectives, ring) + kv_bytes / link.bandwidth;
    cp_f = std::max(0.0, (c.parallel.context - 1) * hop - core.forward.gpu);
    cp_b = std::max(0.0, 2 * (c.parallel.context - 1) * hop - core.backward.gpu);
  }

  const auto [tp_half, tp_kernels_half] = tp_pair(k, s);
  const double tp = 2 * tp_half, tp_kernels = 2 * tp_kernels_half;  // attention and MLP blocks
  const Work fwd = around_f + attn_f + core.forward + mlp.forward;
  const Work inp = around_b + attn_i + core.backward + mlp.input;
  PassTimes out;
  out.forward = op_time(c, fwd, tp, cp_f, ep, tp_kernels + ep_kernels, overlap);
  switch (c.layout.recompute) {
    case Recompute::full:  // the whole layer's forward again, collectives too
      out.backward_input = op_time(c, inp + fwd, 2 * tp, cp_b + cp_f, 2 * ep,
                                   2 * (tp_kernels + ep_kernels), overlap);
      break;
    case Recompute::selective:  // the attention core alone (no weights, no collectives)
      out.backward_input = op_time(c, m.flash_attention ? inp : inp + core.forward, tp, cp_b, ep,
                                   tp_kernels + ep_kernels, overlap);
      break;
    case Recompute::none:
      out.backward_input = op_time(c, inp, tp, cp_b, ep, tp_kernels + ep_kernels, overlap);
      break;
  }
  out.backward_weight = op_time(c, attn_w + mlp.weight, 0, 0, 0, 0, false);
  return out;
}

PassTimes embedding_times(const CostContext& c) {
  const Kernels k{c};
  const Shape s = shape_of(c);
  const double E = s.T * s.h;
  // A vocabulary-parallel lookup (then an all-reduce of the partial rows), position embedding
  // added, dropout; its weight gradient is a scatter-add of the output gradient into a dense
  // V/t x h gradient zeroed first (PyTorch's embedding backward).
  const double tp = s.t > 1 ? k.coll(Collective::all_reduce, E * s.d, Axis::tensor) : 0.0;
  PassTimes out;
  out.forward = op_time(c, k.mem(E * s.d) + k.mem(E * (3 * s.d + 1)), tp, 0, 0, tp > 0, false);
  out.backward_input = op_time(c, k.mem(E * (2 * s.d + 1)), 0, 0, 0, 0, false);
  const double table = static_cast<double>(c.m.vocab) / s.t * s.h * s.d;
  out.backward_weight =
      op_time(c, k.mem(table) + k.mem(2 * E * s.d) + k.mem(E * 4), 0, 0, 0, 0, false);
  return out;
}

PassTimes head_times(const CostContext& c) {
  const Kernels k{c};
  const Shape s = shape_of(c);
  const double V = static_cast<double>(c.m.vocab) / s.t;
  const double E = s.T * s.h / s.rep(), logits = s.T * V;
  // Final norm, the vocabulary-parallel logits, then Megatron's vocab-parallel cross-entropy on
  // them cast to fp32: the cast, the max, the max subtracted, exp, the sum and the softmax
  // division (bytes per logit 2+4, 4, 8, 8, 4, 8), with three tiny all-reduces over the t ranks;
  // its backward scales the saved softmax by the loss gradient and casts it back (8, 4+2). The
  // head's input gradient is summed over the t ranks (reduce-scattered with sequence parallel,
  // whose forward gathers the input first).
  double tp_f = 0, tp_b = 0, kernels_f = 0, kernels_b = 0;
  if (s.t > 1) {
    const double x = s.T * s.h * s.d;
    tp_f = 3 * k.coll(Collective::all_reduce, s.T * 4, Axis::tensor) +
           (s.sp ? k.coll(Collective::all_gather, x, Axis::tensor) : 0.0);
    tp_b = s.sp ? k.coll(Collective::reduce_scatter, x, Axis::tensor)
                : k.coll(Collective::all_reduce, x, Axis::tensor);
    kernels_f = s.sp ? 4 : 3;
    kernels_b = 1;
  }
  PassTimes out;
  const Work loss_f = k.mem(logits * (s.d + 4)) + k.mem(logits * 4) * 2 + k.mem(logits * 8) * 3;
  const Work loss_b = k.mem(logits * 8) + k.mem(logits * (4 + s.d));
  out.forward =
      op_time(c, k.mem(2 * E * s.d) + k.gemm(s.T, V, s.h) + loss_f, tp_f, 0, 0, kernels_f, false);
  out.backward_input =
      op_time(c, loss_b + k.mem(3 * E * s.d) + k.gemm(s.T, s.h, V), tp_b, 0, 0, kernels_b, false);
  out.backward_weight = op_time(c, k.gemm(s.h, V, s.T), 0, 0, 0, 0, false);
  return out;
}

}  // namespace ppsim::model
