// megatron: the point-to-point calls of Megatron-LM's pipeline loops, rank by rank
// (megatron/core/pipeline_parallel/schedules.py: forward_backward_pipelining_without_interleaving
// and forward_backward_pipelining_with_interleaving; p2p_communication.py).
//
// Every p2p call of those loops (recv_forward, send_forward_recv_backward,
// send_forward_backward_recv_forward_backward, ...) is one batch: its sends and receives posted
// asynchronously in the order Megatron posts them, then one WAIT of all of them. With
// overlap_p2p_comm (interleaved only) the steady state leaves its batches open: each receive is
// waited right before the compute op that reads it, a forward send right after it is posted
// (Megatron's training sets deallocate_pipeline_outputs, which waits it before freeing the
// output), a backward send when the next backward send has been posted.
//
// The style models those two loops only: lower() refuses any other compute order (see refusal()).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ppsim/schedules/lowering.hpp"

namespace ppsim::schedules::lowerings {

namespace {

// The shape Megatron's loop runs with; group is microbatch_group_size_per_vp_stage.
struct Shape {
  int P = 0, V = 0, M = 0, group = 0;
};

// get_schedule_table: the chunk of the k-th forward (virtual microbatch) and its microbatch.
struct Slot {
  int microbatch;
  int chunk;
};
std::vector<Slot> schedule_table(const Shape& s) {
  std::vector<Slot> table;
  for (int first = 0; first < s.M; first += s.group) {
    const int last = first + s.group >= s.M ? s.M : first + s.group;
    for (int c = 0; c < s.V; ++c)
      for (int m = first; m < last; ++m) table.push_back({m, c});
  }
  return table;
}

// get_pp_rank_microbatches (training, not forward-only): warm-up forwards of rank r, and whether
// every forward is in the warm-up.
struct Warmup {
  int count;
  bool all;
};
Warmup warmup_of(const Shape& s, int r) {
  const int total = s.M * s.V;
  const int w = s.V == 1 ? s.P - r - 1 : 2 * (s.P - r - 1) + (s.V - 1) * s.group;
  return w >= total ? Warmup{total, true} : Warmup{w, false};
}

// The compute order Megatron runs on rank r: warm-up forwards, one forward + one backward, then
// cool-down backwards; backwards visit the chunks of the table in reverse.
std::vector<Op> megatron_order(const Shape& s, int r) {
  const auto table = schedule_table(s);
  const int total = s.M * s.V;
  const int w = warmup_of(s, r).count;
  auto f = [&](int k) {
    const Slot x = table[static_cast<std::size_t>(k)];
    return Op::compute(OpKind::F, x.chunk * s.P + r, x.microbatch);
  };
  auto b = [&](int k) {
    const Slot x = table[static_cast<std::size_t>(k)];
    return Op::compute(OpKind::B, (s.V - 1 - x.chunk) * s.P + r, x.microbatch);
  };
  std::vector<Op> out;
  for (int k = 0; k < w; ++k) out.push_back(f(k));
  for (int k = 0; k < total - w; ++k) {
    out.push_back(f(w + k));
    out.push_back(b(k));
  }
  for (int k = total - w; k < total; ++k) out.push_back(b(k));
  return out;
}

// Why the style cannot lower `p` (empty: it can) and the key it is about, the shape Megatron runs
// it with in `shape`.
std::string refusal(const Program& p, const Params& params, Shape& shape, std::string& key) {
  key = "style";
  const std::string head =
      "comm style 'megatron' models Megatron-LM's 1F1B and interleaved 1F1B loops only";
  const int P = p.ranks(), V = p.chunks(), M = p.microbatches();
  if (P < 1 || M < 1) return fmt::format("{}: the program has no ranks or microbatches", head);
  if (!p.routes().is_linear() || p.routes().count() != 1)
    return fmt::format("{}: every microbatch must take the one route through stages 0..S-1", head);
  for (int s = 0; s < p.stages(); ++s)
    if (p.place(s).rank != s % P || p.place(s).chunk != s / P)
      return fmt::format(
          "{}: stage {} must sit on rank {} as chunk {} (Megatron's placement: "
          "stage s on rank s mod P)",
          head, s, s % P, s / P);
  for (int r = 0; r < P; ++r)
    for (const Op& op : p.ops(r))
      if (op.kind != OpKind::F && op.kind != OpKind::B)
        return fmt::format(
            "{}: rank {} runs {}, Megatron runs full forwards and backwards (F, B) "
            "only",
            head, r, p.op_text(r, op));
  int group = 1;
  if (V >= 2 && P < 2)  // one rank: the chunks' boundaries would cross to the rank itself
    return fmt::format("{}: virtual stages (chunks {}) need ranks >= 2, as Megatron-LM requires",
                       head, V);
  if (V >= 2) {
    // Megatron's forward order starts with `group` forwards of chunk 0 on every rank.
    group = 0;
    for (const Op& op : p.ops(0)) {
      if (op.kind != OpKind::F || op.stage != 0) break;
      ++group;
    }
    if (group < P || group > M)
      return fmt::format(
          "{}: rank 0 starts with {} forwards of chunk 0; Megatron's "
          "microbatch_group_size_per_vp_stage must lie in [ranks, microbatches] "
          "= [{}, {}]",
          head, group, P, M);
    if (const int tail = M % group; tail > 0 && tail < P)
      return fmt::format(
          "{}: microbatches % microbatch_group_size = {} % {} = {}; Megatron-LM "
          "requires 0 or >= ranks ({})",
          head, M, group, tail, P);
  } else if (params.get("overlap_p2p_comm") != 0) {
    key = "overlap_p2p_comm";
    return "needs the interleaved loop (chunks >= 2): Megatron-LM's non-interleaved 1F1B does not "
           "support overlapping p2p communication";
  }
  // Megatron runs an F and a B of every microbatch on every chunk: M * V of each per rank, the
  // size of the order built below. A written list may name microbatch 999999999 alone, so a rank
  // far shorter than that is refused by its count first (a near miss gets the op it differs at).
  const std::int64_t per_rank = 2 * static_cast<std::int64_t>(M) * V;
  for (int r = 0; r < P; ++r)
    if (const auto n = static_cast<std::int64_t>(p.ops(r).size()); per_rank > 2 * n + 2)
      return fmt::format(
          "{}: rank {} runs {} ops, where Megatron runs an F and a B of each of the {} "
          "microbatches on each of its {} chunk(s): {}",
          head, r, n, M, V, per_rank);
  shape = {P, V, M, group};
  for (int r = 0; r < P; ++r) {
    const auto want = megatron_order(shape, r);
    const auto& have = p.ops(r);
    for (std::size_t i = 0; i < std::max(want.size(), have.size()); ++i) {
      if (i < want.size() && i < have.size() && want[i] == have[i]) continue;
      const std::string got = i < have.size() ? p.op_text(r, have[i]) : "the end of its ops";
      const std::string expected = i < want.size() ? p.op_text(r, want[i]) : "no more ops";
      return fmt::format("{}: rank {} op {} is {}, where Megatron's {} runs {}", head, r, i, got,
                         V == 1 ? std::string("1F1B")
                                : fmt::format("interleaved 1F1B (microbatch_group_size {})", group),
                         expected);
    }
  }
  return {};
}

// The shape of a program refusal() accepted (lower() asks it first): group is the number of
// chunk-0 forwards rank 0 starts with.
Shape shape_of(const Program& p) {
  Shape s{p.ranks(), p.chunks(), p.microbatches(), 1};
  if (s.V >= 2) {
    s.group = 0;
    for (const Op& op : p.ops(0)) {
      if (op.kind != OpKind::F || op.stage != 0) break;
      ++s.group;
    }
  }
  return s;
}

// One rank's walk through Megatron's loop.
class Walk {
 public:
  Walk(RankLowering& l, const Shape& s)
      : l_(l),
        s_(s),
        r_(l.rank()),
        overlap_(l.params().get("overlap_p2p_comm") != 0),
        parity_(l.params().get("parity_batches") != 0),
        total_(s.M * s.V) {
    for (const Op& c : l.compute()) {
      auto& list = c.kind == OpKind::F ? fwd_ : bwd_;
      list.push_back(c);
      for (const Op& recv : l.recvs_needed(c))
        (c.kind == OpKind::F ? recv_f_ : recv_b_).push_back(recv);
    }
    for (const Op& c : fwd_) chunk_.push_back(c.stage / s.P);
  }

  void run() {
    if (s_.V == 1)
      one_chunk();
    else
      interleaved();
    if (!recv_f_.empty() || !recv_b_.empty() || !recv_prev_handles_.empty() ||
        !recv_next_handles_.empty())
      throw std::logic_error(fmt::format("megatron lowering: rank {} left receives behind", r_));
  }

 private:
  // The four tensors of one p2p call (None where Megatron passes None or recv_* is False).
  struct Call {
    std::optional<Op> send_prev = std::nullopt, recv_prev = std::nullopt, send_next = std::nullopt,
                      recv_next = std::nullopt;
  };
  struct Ids {
    std::int32_t send_prev = -1, recv_prev = -1, send_next = -1, recv_next = -1;
  };

  // Posts a call's ops in Megatron's order and, when `wait_now`, waits all of them.
  // batch_p2p_comm (no overlap): _batched_p2p_ops, send_prev, recv_prev, send_next, recv_next
  // (with parity_batches, the _p2p_ops order below, still as one batch).
  // Otherwise _p2p_ops: even ranks send_next, recv_prev, send_prev, recv_next; odd ranks
  // recv_prev, send_next, recv_next, send_prev.
  Ids call(const Call& c, bool wait_now) {
    Ids ids;
    struct Item {
      const std::optional<Op>* op;
      std::int32_t* id;
    };
    std::array<Item, 4> order{};
    if (!overlap_ && !parity_)
      order = {Item{&c.send_prev, &ids.send_prev}, Item{&c.recv_prev, &ids.recv_prev},
               Item{&c.send_next, &ids.send_next}, Item{&c.recv_next, &ids.recv_next}};
    else if (r_ % 2 == 0)
      order = {Item{&c.send_next, &ids.send_next}, Item{&c.recv_prev, &ids.recv_prev},
               Item{&c.send_prev, &ids.send_prev}, Item{&c.recv_next, &ids.recv_next}};
    else
      order = {Item{&c.recv_prev, &ids.recv_prev}, Item{&c.send_next, &ids.send_next},
               Item{&c.recv_next, &ids.recv_next}, Item{&c.send_prev, &ids.send_prev}};
    std::vector<std::int32_t> posted;
    // batch_isend_irecv is one NCCL group; _p2p_ops issues its ops one by one.
    if (!overlap_) l_.begin_batch();
    for (const Item& it : order)
      if (*it.op) posted.push_back(*it.id = l_.post(**it.op));
    if (!overlap_) l_.end_batch();
    if (wait_now) l_.wait(posted);
    return ids;
  }
  void wait_one(std::int32_t id) {
    std::vector<std::int32_t> ids{id};
    l_.wait(ids);
  }

  // The next activation / gradient this rank receives: Megatron's FIFO from the neighbour, which
  // sends them in the order this rank consumes them.
  std::optional<Op> recv_f(bool recv) {
    if (!recv) return std::nullopt;
    if (recv_f_.empty())
      throw std::logic_error(
          fmt::format("megatron lowering: rank {} receives an activation it never reads", r_));
    Op op = recv_f_.front();
    recv_f_.pop_front();
    return op;
  }
  std::optional<Op> recv_b(bool recv) {
    if (!recv) return std::nullopt;
    if (recv_b_.empty())
      throw std::logic_error(
          fmt::format("megatron lowering: rank {} receives a gradient it never reads", r_));
    Op op = recv_b_.front();
    recv_b_.pop_front();
    return op;
  }
  // The output of a compute op, None on the first / last virtual stage (semantics knows).
  std::optional<Op> send_of(const Op& c) {
    const auto sends = l_.sends_after(c);
    return sends.empty() ? std::nullopt : std::optional<Op>(sends.front());
  }
  Op forward(int k) { return fwd_[static_cast<std::size_t>(k)]; }
  Op backward(int k) { return bwd_[static_cast<std::size_t>(k)]; }

  // ---- forward_backward_pipelining_without_interleaving ----
  void one_chunk() {
    const bool first = r_ == 0, last = r_ == s_.P - 1;
    const int w = warmup_of(s_, r_).count, remaining = s_.M - w;
    for (int i = 0; i < w; ++i) {
      call({.recv_prev = recv_f(!first)}, true);  // recv_forward
      l_.emit(forward(i));
      call({.send_next = send_of(forward(i))}, true);  // send_forward
    }
    if (remaining > 0) call({.recv_prev = recv_f(!first)}, true);  // recv_forward
    for (int i = 0; i < remaining; ++i) {
      l_.emit(forward(w + i));
      // send_forward_recv_backward
      call({.send_next = send_of(forward(w + i)), .recv_next = recv_b(!last)}, true);
      l_.emit(backward(i));
      if (i == remaining - 1)
        call({.send_prev = send_of(backward(i))}, true);  // send_backward
      else                                                // send_backward_recv_forward
        call({.send_prev = send_of(backward(i)), .recv_prev = recv_f(!first)}, true);
    }
    for (int i = remaining; i < s_.M; ++i) {
      call({.recv_next = recv_b(!last)}, true);  // recv_backward
      l_.emit(backward(i));
      call({.send_prev = send_of(backward(i))}, true);  // send_backward
    }
  }

  // ---- forward_backward_pipelining_with_interleaving ----
  int chunk_id(int k, bool forward) const {  // get_model_chunk_id
    const int c = chunk_[static_cast<std::size_t>(k % total_)];
    return forward ? c : s_.V - 1 - c;
  }
  // recv_tensor_from_previous_stage: whether iteration k receives for the next one. The leading
  // stage (rank 0 forward, rank P-1 backward) is P-1 iterations ahead of the other end, which
  // sends nothing for its last chunk.
  bool receives(int k, bool forward) const {
    const bool leading = forward ? r_ == 0 : r_ == s_.P - 1;
    if (!leading) return true;
    const int last_chunk = forward ? s_.V - 1 : 0;
    bool recv = true;
    int next;
    if (k < s_.P - 1) {
      recv = false;
      next = chunk_id(k + 1, forward);
    } else {
      next = chunk_id(k - (s_.P - 1), forward);
    }
    return recv && next != last_chunk;
  }
  bool first_stage(int chunk) const { return r_ == 0 && chunk == 0; }
  bool last_stage(int chunk) const { return r_ == s_.P - 1 && chunk == s_.V - 1; }

  void interleaved() {
    const Warmup warm = warmup_of(s_, r_);
    const int w = warm.count, remaining = total_ - w;
    call({.recv_prev = recv_f(r_ != 0)}, true);  // recv_forward before the warm-up
    for (int k = 0; k < w; ++k) {
      bool recv_prev = receives(k, true);
      if (k == total_ - 1) recv_prev = false;
      l_.emit(forward(k));
      const auto out = send_of(forward(k));
      if (k == w - 1 && !overlap_ && !warm.all) {
        // send_forward_backward_recv_forward_backward: also the first backward's gradient.
        const bool recv_next = r_ != s_.P - 1;
        call({.recv_prev = recv_f(recv_prev), .send_next = out, .recv_next = recv_b(recv_next)},
             true);
      } else {
        call({.recv_prev = recv_f(recv_prev), .send_next = out},
             true);  // send_forward_recv_forward
      }
      if (overlap_ && k == w - 1 && !warm.all) {
        // send_backward_recv_backward(None, recv_next), left open.
        const Ids ids = call({.recv_next = recv_b(r_ != s_.P - 1)}, false);
        if (ids.recv_next >= 0) recv_next_handles_.push_back(ids.recv_next);
      }
    }
    for (int k = 0; k < remaining; ++k) {
      const int fk = k + w;
      if (overlap_)
        steady_overlapped(k, fk, remaining);
      else
        steady_batched(k, fk, remaining);
    }
    cooldown(warm, remaining);
  }

  void steady_batched(int k, int fk, int remaining) {
    l_.emit(forward(fk));
    l_.emit(backward(k));
    const bool recv_prev = receives(fk, true) && k != remaining - 1;
    const bool recv_next = receives(k, false);
    auto rp = recv_f(recv_prev);
    auto rn = recv_b(recv_next);
    // send_forward_backward_recv_forward_backward
    call({.send_prev = send_of(backward(k)),
          .recv_prev = rp,
          .send_next = send_of(forward(fk)),
          .recv_next = rn},
         true);
  }

  void steady_overlapped(int k, int fk, int remaining) {
    // pp_pre_forward: wait the oldest forward receive.
    if (!first_stage(chunk_id(fk, true)) && !recv_prev_handles_.empty()) {
      wait_one(recv_prev_handles_.front());
      recv_prev_handles_.pop_front();
    }
    l_.emit(forward(fk));
    // pp_post_forward: send_forward_recv_forward, open; the previous forward send is waited,
    // then (deallocate_pipeline_outputs) this one.
    const bool recv_prev = receives(fk, true) && k != remaining - 1;
    const Ids f = call({.recv_prev = recv_f(recv_prev), .send_next = send_of(forward(fk))}, false);
    if (f.recv_prev >= 0) recv_prev_handles_.push_back(f.recv_prev);
    if (f.send_next >= 0) wait_one(f.send_next);
    // pp_pre_backward: wait the oldest backward receive.
    if (!last_stage(chunk_id(k, false)) && !recv_next_handles_.empty()) {
      wait_one(recv_next_handles_.front());
      recv_next_handles_.pop_front();
    }
    l_.emit(backward(k));
    // pp_post_backward: send_backward_recv_backward, open; the previous backward send waited.
    const Ids b =
        call({.send_prev = send_of(backward(k)), .recv_next = recv_b(receives(k, false))}, false);
    if (send_prev_handle_) wait_one(*send_prev_handle_);
    send_prev_handle_.reset();
    if (b.send_prev >= 0) send_prev_handle_ = b.send_prev;
    if (b.recv_next >= 0) recv_next_handles_.push_back(b.recv_next);
  }

  void cooldown(const Warmup& warm, int remaining) {
    if (warm.all) call({.recv_next = recv_b(r_ != s_.P - 1)}, true);  // recv_backward
    for (int k = remaining; k < total_; ++k) {
      const int c = chunk_id(k, false);
      if (!last_stage(c) && k != 0 && !recv_next_handles_.empty()) {
        wait_one(recv_next_handles_.front());
        recv_next_handles_.pop_front();
      }
      const bool recv_next = receives(k, false) && k != total_ - 1;
      l_.emit(backward(k));
      // send_backward_recv_backward
      call({.send_prev = send_of(backward(k)), .recv_next = recv_b(recv_next)}, true);
    }
    if (send_prev_handle_) wait_one(*send_prev_handle_);
    send_prev_handle_.reset();
  }

  RankLowering& l_;
  Shape s_;
  int r_;
  bool overlap_;
  bool parity_;
  int total_;
  std::vector<Op> fwd_, bwd_;
  std::vector<int> chunk_;  // chunk of the k-th forward
  std::deque<Op> recv_f_, recv_b_;
  std::deque<std::int32_t> recv_prev_handles_, recv_next_handles_;
  std::optional<std::int32_t> send_prev_handle_;
};

void lower_rank(RankLowering& l) {
  const Shape shape = shape_of(l.semantics().program());
  Walk(l, shape).run();
}

std::optional<ParameterError> refuses(const Program& p, const Params& params) {
  Shape shape;
  std::string key;
  std::string why = refusal(p, params, shape, key);
  if (why.empty()) return std::nullopt;
  return ParameterError(key, why);
}
}  // namespace

void register_megatron(LoweringRegistry& registry) {
  registry.add({"megatron",
                {},
                "Megatron-LM's p2p calls for 1f1b and interleaved-1f1b: each batch posted "
                "together and waited together; overlap_p2p_comm waits receives at their consumer",
                {ParamSpec("overlap_p2p_comm",
                           "interleaved only: leave the steady state's batches open, waiting each "
                           "receive right before its consumer (0 or 1)")
                     .with_default(0)
                     .range(0, 1),
                 ParamSpec("parity_batches",
                           "batched calls post their ops in _p2p_ops' rank-parity order instead "
                           "of _batched_p2p_ops' fixed one; with 2 ranks the fixed order crosses "
                           "activations and gradients under fifo matching (Megatron-LM #5100, "
                           "PR #5271) (0 or 1)")
                     .with_default(0)
                     .range(0, 1)},
                lower_rank,
                refuses});
}

}  // namespace ppsim::schedules::lowerings
