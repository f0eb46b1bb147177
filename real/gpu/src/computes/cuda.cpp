// `cuda` compute: each F / I / W runs the cuBLAS GEMMs of a transformer MLP block (the `model`
// section; mlp_model.hpp) on the rank's stream, B runs I's then W's, and the op returns when the
// GPU has finished them, so its span is the real duration. Activation stashes are real device
// allocations of the modelled size from the rank's memory pool, whose high-water mark is the
// measured peak. The rank's thread sees an op complete in host memory that the stream writes
// (host_signals.hpp), not by polling an event. Where the cuda transport raises flags after its
// copies (stream_gates.hpp), each call also enqueues the rank's next compute op, behind the flags
// of the transfers the rank blocks on before it: that op starts when they have completed on the
// GPU, not when the host has seen them and called it, and its span is the GPU's own. Between two
// consecutive compute ops of a rank it measures the GPU's idle gap less the time the rank waited
// on communication in between (on the GPU for an op launched ahead: its wait on the flags; else
// the host's wait): what issuing one op after the other costs.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cuda.h>  // driver types only: its functions come through driver_fn

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include "driver_entry.hpp"
#include "gpu_runtime.hpp"
#include "host_signals.hpp"
#include "ppsim/base/human_bytes.hpp"
#include "ppsim/config/error.hpp"
#include "ppsim/real/compute.hpp"
#include "ppsim/real/gpu/checks.hpp"
#include "ppsim/real/mlp_model.hpp"
#include "ppsim/schedules/semantics.hpp"

namespace ppsim::real::gpu {

namespace {

using schedules::OpKind;

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

struct RankState {
  // Operands, row-major: X, Y (= dY), dX [t, h]; A, dA [t, f]; W1, dW1 [h, f]; W2, dW2 [f, h].
  void *x = nullptr, *y = nullptr, *dx = nullptr, *a = nullptr, *da = nullptr;
  void *w1 = nullptr, *dw1 = nullptr, *w2 = nullptr, *dw2 = nullptr;
  std::map<std::pair<int, int>, std::pair<void*, std::int64_t>> stashes;  // (stage, mb)
  std::int64_t live = 0, peak = 0;
  std::size_t count_at_peak = 0;
  std::uint32_t seq = 0;  // ops run: its host signal reaches it when the last one has completed
  // This iteration's ops: their events are read once it is over (collect), not between ops,
  // where each read is a driver call on the way to the next op.
  struct Timed {
    OpKind kind;
    cudaEvent_t begin, end;
    cudaEvent_t gate_from = nullptr, gate_to = nullptr;  // around its wait on flags (ahead)
    double enter = 0, seen = 0, blocked = 0;  // run clock; blocked: seconds, since the previous op
    double enqueued = 0;                      // run clock, when its begin event was enqueued
    double flops = 0;                         // of its GEMMs
    bool follows = false;    // an op of this rank was enqueued before it in this iteration
    bool ahead = false;      // enqueued by the previous op's call, behind its transfers' flags
    bool ran = false;        // its call returned with it done
    bool signalled = false;  // it writes the rank's host signal (else: its end event is polled)
  };
  std::vector<Timed> timed;           // in enqueue order, which is program order
  std::vector<std::uint32_t> seq_of;  // per entry of `timed`: its host signal value
  // The rank's compute ops in program order, and for each the comm ops (positions) it blocks on
  // after the previous one: blocking sends and receives, and the requests of its WAITs (an eager
  // send completes when posted: none).
  std::vector<int> compute_pos;
  std::vector<std::vector<int>> gates_before;
  std::size_t next = 0;  // the compute op the next call runs (an index into compute_pos)
  // Where GPU times are placed on the run clock: an event and when its completion was seen.
  cudaEvent_t ref = nullptr;
  RunClock::Clock::time_point ref_seen{};
  std::optional<std::pair<double, double>> span;  // the last op's, on the run clock (ahead)
  std::vector<cudaEvent_t> events;                // made as needed, reused every iteration
  std::size_t next_event = 0;
  double prev_return = 0;       // run clock, when the last op returned
  std::vector<double> gaps_us;  // GPU idle between consecutive compute ops
  // Where the gap goes, on the host: between an op's return and the next call (less waits),
  // and from the call to the begin event enqueued; the host span less the GPU's.
  std::vector<double> between_us, enqueue_us, span_excess_us;
  std::vector<double> flag_wait_us;  // launched ahead: the GPU's wait on the flags
  std::size_t ahead_ops = 0, ops = 0;
  std::map<OpKind, std::vector<double>> busy;  // GPU ms per op, by kind
  std::map<OpKind, double> flops;              // per op, by kind
};

class CudaCompute final : public Compute {
 public:
  ~CudaCompute() override { free_all(); }

  void begin(const ComputeContext& c) override {
    ctx_.emplace(c);
    const auto model = mlp_model_of(c.config);
    if (!model)
      throw config::ConfigError(c.config.source, "model",
                                "the cuda compute runs the GEMMs of a `model` section: add one, "
                                "e.g. \"model\": {\"hidden\": 2048, \"sequence_length\": 4096}");
    const auto plain = [](OpKind k) {
      return k == OpKind::F || k == OpKind::B || k == OpKind::I || k == OpKind::W;
    };
    for (int r = 0; r < c.program.ranks(); ++r)
      for (const auto& op : c.program.ops(r)) {
        if (!schedules::is_compute(op.kind)) continue;
        bool ok = plain(op.kind);
        if (schedules::is_composite(op.kind)) {
          const auto parts = c.program.parts(r, op);
          ok = !parts.empty() && std::all_of(parts.begin(), parts.end(),
                                             [&](const auto& p) { return plain(p.kind); });
        }
        if (!ok)
          throw config::ConfigError(
              c.config.source, "schedule",
              fmt::format("the cuda compute runs F, B, I and W ops and pairs of them; rank {} "
                          "has {}",
                          r, c.program.op_text(r, op)));
      }
    GpuRuntime& rt = GpuRuntime::instance();
    if (rt.stalled())
      throw std::runtime_error(
          "the GPU still runs the work of an earlier run that was stopped (its op never "
          "completed): start a new process");
    rt.ensure_layout(c.program.ranks());
    const bool fresh = !model_ || model_->hidden != model->hidden ||
                       model_->ffn_hidden != model->ffn_hidden ||
                       model_->tokens() != model->tokens() || model_->dtype != model->dtype ||
                       static_cast<int>(ranks_.size()) != c.program.ranks();
    model_ = model;  // (allocate runs its GEMMs)
    if (fresh) allocate(*model, c.program.ranks());
    predicted_ = stash_peaks(c.program, c.model.memory);
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      RankState& s = ranks_[r];
      rt.bind(static_cast<int>(r));
      RankGpu& g = rt.rank(static_cast<int>(r));
      CUDA_CHECK(cudaStreamSynchronize(g.stream));
      for (auto& [cell, p] : s.stashes) CUDA_CHECK(cudaFreeAsync(p.first, g.stream));
      CUDA_CHECK(cudaStreamSynchronize(g.stream));
      s.stashes.clear();
      // The pool grows to the predicted peak now, not during the run (memory it keeps).
      if (r < predicted_.size() && predicted_[r] > 0) {
        void* p = nullptr;
        CUDA_CHECK(
            cudaMallocFromPoolAsync(&p, static_cast<std::size_t>(predicted_[r]), g.pool, g.stream));
        CUDA_CHECK(cudaFreeAsync(p, g.stream));
        CUDA_CHECK(cudaStreamSynchronize(g.stream));
      }
      s.live = s.peak = 0;
      s.count_at_peak = 0;
      s.timed.clear();
      s.seq_of.clear();
      s.next = 0;
      s.span.reset();
      s.flag_wait_us.clear();
      s.ahead_ops = s.ops = 0;
      s.next_event = 0;
      plan(s, c, static_cast<int>(r));
      s.between_us.clear();
      s.enqueue_us.clear();
      s.span_excess_us.clear();
      s.gaps_us.clear();
      s.busy.clear();
      s.flops.clear();
      std::uint64_t zero = 0;
      CUDA_CHECK(cudaMemPoolSetAttribute(g.pool, cudaMemPoolAttrUsedMemHigh, &zero));
      // Can this rank's context write host memory from its stream? (Else events are polled.)
      signals_->probe(g.stream, r, ++s.seq);
    }
    // Launched ahead where the transport raises flags after its copies, the ranks' streams can
    // write and wait on host memory, and each rank has a green context of its own: a stream
    // waiting on a flag holds the hardware queue it is on, and in one context the copies' streams
    // could share it (the copy that raises the flag would then wait behind the wait).
    bool own_contexts = true;
    for (std::size_t r = 0; r < ranks_.size(); ++r)
      own_contexts = own_contexts && rt.rank(static_cast<int>(r)).green_ctx != nullptr;
    ahead_ = rt.gates().armed() && signals_->available() && own_contexts;
    ahead_note_ = ahead_                   ? ""
                  : !signals_->available() ? "no host signals (" + signals_->note() + ")"
                  : !rt.gates().armed()    ? "no transport flags (" + rt.gates().note() + ")"
                                           : "the ranks share a context (no SM partitioning)";
    if (ahead_)
      for (std::size_t r = 0; r < ranks_.size(); ++r) {
        // The reference that GPU times are placed by: seen at once (the stream is idle).
        RankState& s = ranks_[r];
        RankGpu& g = rt.rank(static_cast<int>(r));
        rt.bind(static_cast<int>(r));
        if (!s.ref) CUDA_CHECK(cudaEventCreate(&s.ref));
        record(s.ref, g.stream);
        (void)signals_->write(g.stream, r, ++s.seq);
        while (!signals_->reached(r, s.seq)) std::this_thread::yield();
        s.ref_seen = RunClock::Clock::now();
      }
  }

  void end() override {
    // A stopped run may have left ops launched ahead waiting on flags nobody will raise.
    if (ahead_) GpuRuntime::instance().gates().raise_all();
  }

  std::optional<std::pair<double, double>> span(int rank) const override {
    return ranks_[static_cast<std::size_t>(rank)].span;
  }

  void run(int rank, const schedules::Op& op, double, double, double blocked,
           std::span<Buffer* const>, std::span<Buffer* const>) override {
    const double enter = ctx_->clock.now();
    GpuRuntime& rt = GpuRuntime::instance();
    rt.bind(rank);
    RankGpu& g = rt.rank(rank);
    RankState& s = ranks_[static_cast<std::size_t>(rank)];
    s.span.reset();
    const std::size_t idx = s.next++;
    const auto& ops = ctx_->program.ops(rank);
    if (idx >= s.compute_pos.size() || !(ops[static_cast<std::size_t>(s.compute_pos[idx])] == op))
      throw std::logic_error(fmt::format(
          "the cuda compute was called for {} out of program order (its compute op #{} is {})",
          ctx_->program.op_text(rank, op), idx,
          idx < s.compute_pos.size()
              ? ctx_->program.op_text(rank, ops[static_cast<std::size_t>(s.compute_pos[idx])])
              : "none"));
    const bool was_ahead = idx < s.timed.size();  // enqueued by the previous call
    if (!was_ahead) enqueue(rank, s, g, idx, false);
    // The next one now, behind its transfers' flags: it starts when they complete on the GPU.
    if (ahead_ && idx + 1 < s.compute_pos.size()) enqueue(rank, s, g, idx + 1, true);
    // Polled, not synchronized: a stopped run is not held up, and the wake-up is prompt. The
    // host signal is a memory read; an event query (where there is no signal) a driver call.
    RankState::Timed& t = s.timed[idx];
    for (unsigned spins = 1;; ++spins) {
      if (t.signalled) {
        if (signals_->reached(static_cast<std::size_t>(rank), s.seq_of[idx])) break;
      } else {
        const cudaError_t e = cudaEventQuery(t.end);
        if (e == cudaSuccess) break;
        if (e != cudaErrorNotReady) CUDA_CHECK(e);
      }
      if (ctx_->cancel.load(std::memory_order_relaxed)) {
        // Its work may never finish: nothing may wait for it (free_all).
        GpuRuntime::instance().mark_stalled();
        return;
      }
      if (!t.signalled || spins % 64 == 0) std::this_thread::yield();
    }
    const double seen = ctx_->clock.now();
    t.enter = enter;
    t.seen = seen;
    t.blocked = blocked;
    t.ran = true;
    ++s.ops;
    if (was_ahead) {
      ++s.ahead_ops;
    } else {
      s.enqueue_us.push_back((t.enqueued - enter) * 1e6);
      if (t.follows) s.between_us.push_back(std::max(0.0, (enter - s.prev_return - blocked) * 1e6));
    }
    // Launched ahead, an op may start before its call: its span is the GPU's.
    if (ahead_) {
      float from = 0, to = 0;
      if (cudaEventElapsedTime(&from, s.ref, t.begin) == cudaSuccess &&
          cudaEventElapsedTime(&to, s.ref, t.end) == cudaSuccess) {
        const double ref = std::chrono::duration<double>(s.ref_seen - ctx_->clock.start()).count();
        s.span = {ref + from * 1e-3, ref + to * 1e-3};
      }
    }
    s.prev_return = ctx_->clock.now();
  }

  bool holds_memory() const override { return true; }
  bool may_hang() const override { return true; }

  std::vector<std::string> report() const override {
    std::vector<std::string> out;
    if (ranks_.empty()) return out;
    collect();
    GpuRuntime& rt = GpuRuntime::instance();
    out.push_back(fmt::format("gpu              {}; {}", describe_device(rt.rank(0).device),
                              rt.partition_note()));
    out.push_back(
        fmt::format("model            {} layer(s) of h={} f={} tokens={} {}: {:.3g} "
                    "GFLOP per F, I or W",
                    model_->layers, model_->hidden, model_->ffn_hidden, model_->tokens(),
                    model_->dtype, flops_of(OpKind::F, *model_) / 1e9));
    std::map<OpKind, std::vector<double>> busy;
    std::map<OpKind, double> flops;
    std::vector<double> gaps, between, enqueue, excess, flag_waits;
    std::size_t ahead_ops = 0, all_ops = 0;
    bool equal = true;
    std::string peaks;
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      const RankState& s = ranks_[r];
      for (const auto& [k, v] : s.busy) busy[k].insert(busy[k].end(), v.begin(), v.end());
      for (const auto& [k, f] : s.flops) flops[k] = f;
      gaps.insert(gaps.end(), s.gaps_us.begin(), s.gaps_us.end());
      between.insert(between.end(), s.between_us.begin(), s.between_us.end());
      enqueue.insert(enqueue.end(), s.enqueue_us.begin(), s.enqueue_us.end());
      excess.insert(excess.end(), s.span_excess_us.begin(), s.span_excess_us.end());
      flag_waits.insert(flag_waits.end(), s.flag_wait_us.begin(), s.flag_wait_us.end());
      ahead_ops += s.ahead_ops;
      all_ops += s.ops;
      std::uint64_t high = 0;
      (void)cudaMemPoolGetAttribute(rt.rank(static_cast<int>(r)).pool, cudaMemPoolAttrUsedMemHigh,
                                    &high);
      const std::int64_t want = r < predicted_.size() ? predicted_[r] : 0;
      // The pool rounds each allocation up to its granularity (2 MiB).
      const auto slack = static_cast<std::int64_t>(s.count_at_peak) * (2 << 20);
      const auto got = static_cast<std::int64_t>(high);
      equal = equal && got >= want && got <= want + slack;
      peaks += fmt::format("{}{}: {} / {}", peaks.empty() ? "" : ", ", r, base::human_bytes(got),
                           base::human_bytes(want));
    }
    out.push_back(fmt::format("device stashes   measured / predicted peak per rank: {}", peaks));
    out.push_back(fmt::format("stash peaks equal {} (within the pool's 2 MiB granularity)",
                              equal ? "yes" : "NO"));
    std::string ops;
    for (const auto& [k, v] : busy) {
      const double med = percentile(v, 0.5);
      ops +=
          fmt::format("{}{} {:.3f} ms ({:.0f} TFLOP/s)", ops.empty() ? "" : ", ",
                      schedules::to_string(k), med, med > 0 ? flops[k] / (med * 1e-3) / 1e12 : 0.0);
    }
    out.push_back("gpu op median    " + ops);
    out.push_back(fmt::format(
        "issue gap        median {:.1f} us, p95 {:.1f} us over {} pairs of consecutive compute "
        "ops (GPU idle between them less the rank's wait on communication; target < 20 us)",
        percentile(gaps, 0.5), percentile(gaps, 0.95), gaps.size()));
    if (ahead_) {
      out.push_back(fmt::format(
          "launched ahead   {} of {} ops, each enqueued while the previous one ran, behind the "
          "flags its transfers' copies raise: no host turn-around between them; the GPU's wait "
          "on those flags (communication) median {:.1f} us, p95 {:.1f} us; spans are GPU times",
          ahead_ops, all_ops, percentile(flag_waits, 0.5), percentile(flag_waits, 0.95)));
      return out;
    }
    out.push_back(fmt::format("launched ahead   no: {}", ahead_note_));
    out.push_back(fmt::format(
        "issue gap parts  medians: {:.1f} us on the host between an op's return and the next "
        "call (waits excluded), {:.1f} us from the call to the first GPU work enqueued; an op's "
        "host span exceeds its GPU time by {:.1f} us (launch and completion-poll latency); "
        "completion seen {}",
        percentile(between, 0.5), percentile(enqueue, 0.5), percentile(excess, 0.5),
        signals_ && signals_->available()
            ? "in host memory (cuStreamWriteValue32)"
            : "by polling events (" + (signals_ ? signals_->note() : std::string("-")) + ")"));
    return out;
  }

 private:
  void allocate(const MlpModel& m, int ranks) {
    free_all();
    GpuRuntime& rt = GpuRuntime::instance();
    ranks_.resize(static_cast<std::size_t>(ranks));
    const auto e = static_cast<std::size_t>(m.dtype_bytes());
    const auto t = static_cast<std::size_t>(m.tokens()), h = static_cast<std::size_t>(m.hidden),
               f = static_cast<std::size_t>(m.ffn_hidden);
    for (int r = 0; r < ranks; ++r) {
      rt.bind(r);
      RankGpu& g = rt.rank(r);
      RankState& s = ranks_[static_cast<std::size_t>(r)];
      for (void** p : {&s.x, &s.y, &s.dx}) CUDA_CHECK(cudaMalloc(p, t * h * e));
      for (void** p : {&s.a, &s.da}) CUDA_CHECK(cudaMalloc(p, t * f * e));
      for (void** p : {&s.w1, &s.dw1, &s.w2, &s.dw2}) CUDA_CHECK(cudaMalloc(p, h * f * e));
      // Zeros: finite values, so no op is slowed by NaN or denormal handling.
      for (void* p : {s.x, s.y, s.dx}) CUDA_CHECK(cudaMemset(p, 0, t * h * e));
      for (void* p : {s.a, s.da}) CUDA_CHECK(cudaMemset(p, 0, t * f * e));
      for (void* p : {s.w1, s.dw1, s.w2, s.dw2}) CUDA_CHECK(cudaMemset(p, 0, h * f * e));
      if (!g.cublas) CUBLAS_CHECK(cublasCreate(&g.cublas));
      CUBLAS_CHECK(cublasSetStream(g.cublas, g.stream));
    }
    // Each rank runs its GEMMs once now, in its own context: the kernels are loaded lazily at
    // their first launch, and a load waits for the whole context, so a first launch during a run
    // would wait behind another rank's hung op and the watchdog could not stop that rank.
    for (int r = 0; r < ranks; ++r) {
      rt.bind(r);
      for (OpKind k : {OpKind::F, OpKind::I, OpKind::W})
        gemms(ranks_[static_cast<std::size_t>(r)], rt.rank(r), k);
    }
    CUDA_CHECK(cudaSetDevice(0));
    signals_ = std::make_unique<HostSignals>(static_cast<std::size_t>(ranks));
    CUDA_CHECK(cudaDeviceSynchronize());
  }

  // Compute op `idx` of the rank (in program order) onto its stream; `ahead`: behind the flags of
  // the transfers the rank blocks on after the previous one.
  void enqueue(int rank, RankState& s, RankGpu& g, std::size_t idx, bool ahead) {
    const auto& mem = ctx_->model.memory;
    const schedules::Op& op = ctx_->program.ops(rank)[static_cast<std::size_t>(s.compute_pos[idx])];
    // An overlapped pair runs its parts one after the other on the rank's stream: GEMMs alone
    // have nothing to overlap (DualPipe overlaps a part's compute with the other's communication).
    const std::span<const schedules::Op> parts = schedules::is_composite(op.kind)
                                                     ? ctx_->program.parts(rank, op)
                                                     : std::span<const schedules::Op>(&op, 1);
    RankState::Timed t{};
    t.kind = op.kind;
    t.ahead = ahead;
    t.follows = idx > 0;
    GpuRuntime& rt = GpuRuntime::instance();
    if (ahead && !s.gates_before[idx].empty()) {
      t.gate_from = event(s);
      record(t.gate_from, g.stream);
      for (const int pos : s.gates_before[idx])
        if (!rt.gates().wait(g.stream, rank, pos))
          throw std::runtime_error("cuStreamWaitValue32 failed: " + rt.gates().note());
      t.gate_to = event(s);
      record(t.gate_to, g.stream);
    }
    t.begin = event(s);
    t.end = event(s);
    record(t.begin, g.stream);
    t.enqueued = ctx_->clock.now();
    for (const schedules::Op& part : parts)
      for (int layer = 0; layer < model_->layers; ++layer) gemms(s, g, part.kind);
    record(t.end, g.stream);
    t.signalled = signals_->write(g.stream, static_cast<std::size_t>(rank), ++s.seq);
    for (const schedules::Op& part : parts) t.flops += flops_of(part.kind, *model_);
    s.timed.push_back(t);
    s.seq_of.push_back(s.seq);
    // The stash's allocation and releases after the launches, off the GPU's way to the op (the
    // pool sees them in the same order as the ops, so its high-water mark is the same).
    for (const schedules::Op& part : parts) {
      const std::pair<int, int> cell{part.stage, part.microbatch};
      switch (schedules::Semantics::stash_effect(part.kind)) {
        case schedules::Semantics::Stash::take:
          stash_take(s, g, cell, mem.stage(part.stage).activation_bytes);
          break;
        case schedules::Semantics::Stash::keep_weights:
          if (s.stashes.count(cell)) {
            stash_drop(s, g, cell);
            stash_take(s, g, cell, mem.stage(part.stage).weight_stash_bytes);
          }
          break;
        case schedules::Semantics::Stash::release:
        case schedules::Semantics::Stash::release_weights:
          stash_drop(s, g, cell);
          break;
        default:
          break;
      }
    }
  }

  // The rank's compute ops and the comm ops each blocks on after the previous one.
  static void plan(RankState& s, const ComputeContext& c, int rank) {
    s.compute_pos.clear();
    s.gates_before.clear();
    const auto& net = c.model.network;
    const bool eager = net.eager_limit > 0 && net.boundary_bytes <= net.eager_limit;
    const auto& ops = c.program.ops(rank);
    std::map<std::int32_t, int> posted;  // request id -> the async op that posted it
    std::vector<int> pending;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const schedules::Op& op = ops[i];
      const int pos = static_cast<int>(i);
      const bool counts = !(eager && schedules::is_send(op.kind));  // an eager send: at post
      if (schedules::is_compute(op.kind)) {
        s.compute_pos.push_back(pos);
        s.gates_before.push_back(std::move(pending));
        pending.clear();
      } else if (schedules::is_comm(op.kind)) {
        if (op.async)
          posted[op.request] = counts ? pos : -1;
        else if (counts)
          pending.push_back(pos);
      } else if (op.kind == OpKind::WAIT) {
        for (const std::int32_t id : c.program.wait_ids(rank, op))
          if (const auto it = posted.find(id); it != posted.end() && it->second >= 0)
            pending.push_back(it->second);
      }
    }
  }

  cudaEvent_t event(RankState& s) {
    if (s.next_event == s.events.size()) {
      cudaEvent_t e = nullptr;
      CUDA_CHECK(cudaEventCreate(&e));
      s.events.push_back(e);
    }
    return s.events[s.next_event++];
  }
  // The GPU times of the ops run since the last collect (their events have all completed).
  void collect() const {
    for (RankState& s : ranks_) {
      for (std::size_t i = 0; i < s.timed.size(); ++i) {
        const RankState::Timed& t = s.timed[i];
        float ms = 0;
        if (cudaEventElapsedTime(&ms, t.begin, t.end) != cudaSuccess) continue;
        if (!t.ran) continue;  // launched ahead in a run that stopped before its call
        s.busy[t.kind].push_back(ms);
        s.flops[t.kind] = t.flops;
        if (!t.ahead)
          s.span_excess_us.push_back((t.seen - t.enter) * 1e6 - static_cast<double>(ms) * 1e3);
        float gap = 0;
        if (!t.follows || cudaEventElapsedTime(&gap, s.timed[i - 1].end, t.begin) != cudaSuccess)
          continue;
        double waited = t.blocked;  // the host's, for an op called before it was enqueued
        if (t.ahead) {
          float flags = 0;
          waited = 0;
          if (t.gate_from && cudaEventElapsedTime(&flags, t.gate_from, t.gate_to) == cudaSuccess)
            waited = static_cast<double>(flags) * 1e-3;
          s.flag_wait_us.push_back(waited * 1e6);
        }
        s.gaps_us.push_back(std::max(0.0, static_cast<double>(gap) * 1e3 - waited * 1e6));
      }
      s.timed.clear();
      s.seq_of.clear();
    }
  }

  void free_all() {
    // A stopped run's GPU work may never finish (a hung kernel), and cudaFree waits for the whole
    // device: what it used is left to the process's exit.
    if (!ranks_.empty() && GpuRuntime::instance().stalled()) {
      (void)signals_.release();  // (a stream may still write it)
      return;
    }
    for (auto& s : ranks_) {
      for (cudaEvent_t ev : s.events) (void)cudaEventDestroy(ev);
      for (void* p : {s.x, s.y, s.dx, s.a, s.da, s.w1, s.dw1, s.w2, s.dw2})
        if (p) (void)cudaFree(p);
    }
    ranks_.clear();
  }

  void stash_take(RankState& s, RankGpu& g, std::pair<int, int> cell, std::int64_t bytes) {
    if (bytes <= 0) return;
    void* p = nullptr;
    CUDA_CHECK(cudaMallocFromPoolAsync(&p, static_cast<std::size_t>(bytes), g.pool, g.stream));
    s.stashes[cell] = {p, bytes};
    s.live += bytes;
    if (s.live > s.peak) {
      s.peak = s.live;
      s.count_at_peak = s.stashes.size();
    }
  }
  void stash_drop(RankState& s, RankGpu& g, std::pair<int, int> cell) {
    const auto it = s.stashes.find(cell);
    if (it == s.stashes.end()) return;
    CUDA_CHECK(cudaFreeAsync(it->second.first, g.stream));
    s.live -= it->second.second;
    s.stashes.erase(it);
  }

  // cuEventRecord from the driver: through the runtime, a record took microseconds more on the
  // way from one op to the next (H200, green contexts, medians of 8 runs: 4.8 to 13.4 us from
  // the call to the begin event enqueued, 3.5 to 8.4 us this way).
  static void record(cudaEvent_t e, cudaStream_t stream) {
    static const auto fn = driver_fn<decltype(&cuEventRecord)>("cuEventRecord");
    if (!fn) {
      CUDA_CHECK(cudaEventRecord(e, stream));
      return;
    }
    const CUresult r = fn(reinterpret_cast<CUevent>(e), reinterpret_cast<CUstream>(stream));
    if (r != CUDA_SUCCESS)
      throw LibraryError("CUDA driver", __FILE__, __LINE__, "cuEventRecord(event, stream)",
                         static_cast<long long>(r), "", "see the driver's error code");
  }

  void gemms(RankState& s, RankGpu& g, OpKind kind) {
    struct Operands {
      void *a, *b, *c;
    };
    std::vector<Operands> ops;
    const std::vector<Operands> fwd = {{s.x, s.w1, s.a}, {s.a, s.w2, s.y}};
    const std::vector<Operands> inp = {{s.y, s.w2, s.da}, {s.da, s.w1, s.dx}};
    const std::vector<Operands> wgt = {{s.a, s.y, s.dw2}, {s.x, s.da, s.dw1}};
    if (kind == OpKind::F) ops = fwd;
    if (kind == OpKind::I || kind == OpKind::B) ops = inp;
    if (kind == OpKind::W || kind == OpKind::B) ops.insert(ops.end(), wgt.begin(), wgt.end());
    const auto shapes = gemms_of(kind, *model_);
    const cudaDataType_t type = model_->dtype == "fp32"   ? CUDA_R_32F
                                : model_->dtype == "fp16" ? CUDA_R_16F
                                                          : CUDA_R_16BF;
    const float alpha = 1, beta = 0;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const Gemm& m = shapes[i];
      const Operands& o = ops[i];
      // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
      const int M = static_cast<int>(m.m), N = static_cast<int>(m.n), K = static_cast<int>(m.k);
      CUBLAS_CHECK(cublasGemmEx(g.cublas, m.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                m.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, o.b, type,
                                m.trans_b ? K : N, o.a, type, m.trans_a ? M : K, &beta, o.c, type,
                                N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
  }

  std::optional<ComputeContext> ctx_;
  std::optional<MlpModel> model_;
  mutable std::vector<RankState> ranks_;  // (report() reads the last iteration's events)
  std::vector<std::int64_t> predicted_;
  std::unique_ptr<HostSignals> signals_;  // each rank's ops completed, in host memory
  bool ahead_ = false;      // each call enqueues the rank's next op behind its transfers' flags
  std::string ahead_note_;  // why not
};

}  // namespace

}  // namespace ppsim::real::gpu

namespace ppsim::real::gpu::computes {

void register_cuda(ComputeRegistry& registry) {
  registry.add({"cuda",
                "each op runs the cuBLAS GEMMs of the `model` section's MLP block on the GPU",
                [] { return std::make_unique<CudaCompute>(); }});
}

}  // namespace ppsim::real::gpu::computes
