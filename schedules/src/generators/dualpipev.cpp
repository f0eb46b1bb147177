// DualPipeV: the V-placed half of DeepSeek's DualPipe (DeepSeek-V3 report; deepseek-ai/DualPipe).
// Two chunks per rank in a V; in the steady state a rank runs the forward of one chunk overlapped
// with the backward of the other (OVERLAP_F_B). The per-rank order is the one PyTorch's
// ScheduleDualPipeV computes, op for op.
#include <fmt/format.h>

#include <deque>

#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/generator.hpp"

namespace ppsim::schedules::generators {

namespace {

// One chunk of a rank: its stage, the next microbatch to run forward and backward.
struct Lane {
  int stage;
  int f = 0, b = 0;
};

class RankOrder {
 public:
  RankOrder(Program& program, int rank) : program_(program), rank_(rank) {}

  void forward(Lane& l) { program_.push(rank_, next_forward(l)); }
  // A full B, or (split) an I whose W is queued for a later weight_if_pending().
  void backward(Lane& l, bool split) {
    if (split) pending_w_.push_back({l.stage, l.b});
    program_.push(rank_, Op::compute(split ? OpKind::I : OpKind::B, l.stage, l.b++));
  }
  // Oldest queued W, if any: W fills the gaps where a rank would wait.
  void weight_if_pending() {
    if (pending_w_.empty()) return;
    program_.push(rank_, Op::compute(OpKind::W, pending_w_.front().stage, pending_w_.front().mb));
    pending_w_.pop_front();
  }
  // F of one chunk together with the full B of the other.
  void overlap(Lane& f, Lane& b) {
    const Op parts[] = {next_forward(f), Op::compute(OpKind::B, b.stage, b.b++)};
    program_.push_composite(rank_, OpKind::OVERLAP_F_B, parts);
  }

 private:
  static Op next_forward(Lane& l) { return Op::compute(OpKind::F, l.stage, l.f++); }

  struct Pending {
    int stage, mb;
  };
  Program& program_;
  int rank_;
  std::deque<Pending> pending_w_;
};

Program build(const ScheduleParams& p) {
  const int P = p.ranks(), M = p.microbatches();
  if (M < 2 * P)
    throw ParameterError("microbatches",
                         fmt::format("dualpipev needs microbatches >= stages = 2 * ranks = {} (got "
                                     "{}), as PyTorch's ScheduleDualPipeV requires: rank 0 runs "
                                     "2P-1 forwards of chunk 0 before its first overlapped pair, "
                                     "which takes one more",
                                     2 * P, M));
  Program program(M, make_placement(PlacementKind::v, P, 2));
  for (int r = 0; r < P; ++r) {
    program.reserve(r, 4 * static_cast<std::size_t>(M));
    RankOrder order(program, r);
    Lane down{r}, up{2 * P - 1 - r};
    const int below = P - r - 1;  // ranks further down the V

    // 1. Chunk 0 forwards until the first microbatch can come back up.
    for (int k = 0; k < 2 * below; ++k) order.forward(down);
    // 2. Forwards of both chunks in turn.
    for (int k = 0; k <= r; ++k) {
      order.forward(down);
      order.forward(up);
    }
    // 3. Chunk 1's first backwards split into I + W (zero-bubble style), each followed by a
    // forward.
    for (int k = 0; k < below; ++k) {
      order.backward(up, true);
      order.weight_if_pending();
      order.forward(up);
    }
    // 4. Steady state: F0 with B1, then F1 with B0. The bottom rank runs its very first pair apart:
    //    it has nothing to overlap yet.
    for (int k = 0; k < M - 2 * P + r + 1; ++k) {
      if (k == 0 && r == P - 1) {
        order.forward(down);
        order.backward(up, false);
      } else {
        order.overlap(down, up);
      }
      order.overlap(up, down);
    }
    // 5. Chunk 0 has no forwards left: B1 alone, then F1 with B0.
    for (int k = 0; k < below; ++k) {
      order.backward(up, false);
      order.overlap(up, down);
    }
    // 6. Backwards of both chunks; from the middle pair on (chunk 1 first on odd ranks, chunk 0
    //    first on even ones) they are split, so W can fill the drain.
    bool split = false;
    for (int k = 0; k <= r; ++k) {
      const bool middle = k == (r + 1) / 2;
      if (middle && r % 2 == 1) split = true;
      order.backward(up, split);
      if (middle && r % 2 == 0) split = true;
      order.backward(down, split);
    }
    // 7. The remaining chunk-0 backwards, each after a queued W.
    for (int k = 0; k < below; ++k) {
      order.weight_if_pending();
      order.backward(down, split);
    }
    // 8. Drain the W queue (at most r + 1 remain).
    for (int k = 0; k <= r; ++k) order.weight_if_pending();
  }
  return program;
}

}  // namespace

void register_dualpipev(Registry& registry) {
  registry.add(
      {"dualpipev",
       {"DualPipeV", "ScheduleDualPipeV"},
       "DeepSeek's DualPipe folded into a V: F of one chunk overlapped with B of the other "
       "(OVERLAP_F_B), I/W split in the ramps; deadlocks unless comm.style is async",
       {ranks_param("pipeline ranks P (stages S = 2P)"), microbatches_param("M >= 2P"),
        ParamSpec("chunks",
                  "chunks per rank: exactly 2, the two arms of the V (as ScheduleDualPipeV)")
            .with_default(2)
            .range(2, 2)},
       build,
       {{{"ranks", 1}, {"microbatches", 2}},
        {{"ranks", 2}, {"microbatches", 4}},
        {{"ranks", 3}, {"microbatches", 7}},
        {{"ranks", 4}, {"microbatches", 10}}},
       {"async", nullptr, "async",
        "PyTorch's schedule; receives posted further ahead gain nothing, and PyTorch's own "
        "lowering under NCCL's rules, comm.style torch, measures 10-40% slower"}});
}

}  // namespace ppsim::schedules::generators
