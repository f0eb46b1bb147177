// DualPipe (DeepSeek-V3): two pipelines in opposite directions over the same P ranks. Rank r runs
// stage r of the "down" pipeline (route 0, stages 0..P-1 on ranks 0..P-1) and stage 2P-1-r of the
// "up" pipeline (route 1, stages P..2P-1 on ranks P-1..0), so it holds the parameters twice.
// Microbatches 0..M/2-1 take route 0, M/2..M-1 route 1. The per-rank order follows the eight steps
// of deepseek-ai/DualPipe's dualpipe.py; forwards and backwards of opposite directions run as
// overlapped pairs (OVERLAP_F_B) in the steady state.
#include <fmt/format.h>

#include <deque>

#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/generator.hpp"

namespace ppsim::schedules::generators {

namespace {

// Emits one rank's ops. The reference names the two directions by "phase" relative to the rank:
// phase 0 is the pipeline that enters at the rank's own end of the chain (the down pipeline for
// the first half of the ranks, the up pipeline for the second half), phase 1 the other one.
class RankBuilder {
 public:
  RankBuilder(Program& program, int rank, int P, int M)
      : program_(program), rank_(rank), second_half_(rank >= P / 2), half_mb_(M / 2) {
    stage_[0] = rank;
    stage_[1] = 2 * P - 1 - rank;
  }

  void forward(int phase) { program_.push(rank_, next_forward(phase)); }
  // A full B, or (split) an I whose W is queued until `weight()` takes it, oldest first.
  void backward(int phase, bool split = false) {
    Op b = next_backward(phase);
    if (split) {
      b.kind = OpKind::I;
      deferred_w_.push_back(Op::compute(OpKind::W, b.stage, b.microbatch));
    }
    program_.push(rank_, b);
  }
  // The forward of `f_phase` and the full backward of `b_phase`, run together.
  void overlapped(int f_phase, int b_phase) {
    const Op parts[] = {next_forward(f_phase), next_backward(b_phase)};
    program_.push_composite(rank_, OpKind::OVERLAP_F_B, parts);
  }
  void weight() {
    program_.push(rank_, deferred_w_.front());
    deferred_w_.pop_front();
  }

 private:
  int route(int phase) const { return phase ^ static_cast<int>(second_half_); }
  int microbatch(int route, int k) const { return route * half_mb_ + k; }
  Op next_forward(int phase) {
    const int r = route(phase);
    return Op::compute(OpKind::F, stage_[r], microbatch(r, next_f_[r]++));
  }
  Op next_backward(int phase) {
    const int r = route(phase);
    return Op::compute(OpKind::B, stage_[r], microbatch(r, next_b_[r]++));
  }

  Program& program_;
  int rank_;
  bool second_half_;
  int half_mb_;
  int stage_[2] = {0, 0};   // by route
  int next_f_[2] = {0, 0};  // by route: the next microbatch index within the route
  int next_b_[2] = {0, 0};
  std::deque<Op> deferred_w_;
};

Program build(const ScheduleParams& p) {
  const int P = p.ranks(), M = p.microbatches();
  if (P % 2 != 0)
    throw ParameterError("ranks", fmt::format("dualpipe needs an even number of ranks (got {}): "
                                              "the two directions meet in the middle",
                                              P));
  if (M % 2 != 0)
    throw ParameterError("microbatches",
                         fmt::format("dualpipe needs an even number of microbatches (got {}): "
                                     "half go down the ranks, half up",
                                     M));
  if (M < 2 * P)
    throw ParameterError(
        "microbatches",
        fmt::format("dualpipe needs microbatches >= 2 * ranks = {} (got {}), so that every rank "
                    "reaches the overlapped steady state",
                    2 * P, M));

  std::vector<std::int32_t> down, up, route_of;
  for (int s = 0; s < P; ++s) {
    down.push_back(s);
    up.push_back(P + s);
  }
  for (int m = 0; m < M; ++m) route_of.push_back(m < M / 2 ? 0 : 1);
  // Placement v: chunk 0 down the ranks (stage s on rank s), chunk 1 back up (P+k on P-1-k).
  Program program(M, make_placement(PlacementKind::v, P, 2),
                  Routes(2 * P, {down, up}, std::move(route_of)));

  const int half_P = P / 2, half_M = M / 2;
  for (int r = 0; r < P; ++r) {
    program.reserve(r, 3 * static_cast<std::size_t>(M));
    RankBuilder b(program, r, P, M);
    const int h = std::min(r, P - 1 - r);  // distance from the nearer end of the chain
    const bool middle = h == half_P - 1;
    // 1: forwards of phase 0 only, filling the pipeline from this rank's end.
    for (int i = 0; i < 2 * (half_P - h - 1); ++i) b.forward(0);
    // 2: forwards of both directions, alternating.
    for (int i = 0; i <= h; ++i) {
      b.forward(0);
      b.forward(1);
    }
    // 3: backward of phase 1 split into I and W at once, then a forward of phase 1.
    for (int i = 0; i < half_P - h - 1; ++i) {
      b.backward(1, true);
      b.weight();
      b.forward(1);
    }
    // 4 (steady state): F0 with B1, then F1 with B0, overlapped. The middle ranks run their first
    // F0 and B1 one after the other, as the reference does to shorten the bubble there.
    for (int i = 0; i < half_M - P + h + 1; ++i) {
      if (i == 0 && middle) {
        b.forward(0);
        b.backward(1);
      } else {
        b.overlapped(0, 1);
      }
      b.overlapped(1, 0);
    }
    // 5: B1, then F1 with B0.
    for (int i = 0; i < half_P - h - 1; ++i) {
      b.backward(1);
      b.overlapped(1, 0);
    }
    // 6: B1, B0; from the middle of the step on, backwards are split and their W deferred.
    bool split = false;
    for (int i = 0; i <= h; ++i) {
      if (i == (h + 1) / 2 && h % 2 == 1) split = true;
      b.backward(1, split);
      if (i == (h + 1) / 2 && h % 2 == 0) split = true;
      b.backward(0, split);
    }
    // 7: a deferred W, then a split backward of phase 0.
    for (int i = 0; i < half_P - h - 1; ++i) {
      b.weight();
      b.backward(0, true);
    }
    // 8: the remaining deferred Ws.
    for (int i = 0; i <= h; ++i) b.weight();
  }
  return program;
}

}  // namespace

void register_dualpipe(Registry& registry) {
  registry.add(
      {"dualpipe",
       {"DualPipe"},
       "DeepSeek-V3 bidirectional: two pipelines in opposite directions, each rank holds one "
       "stage of each (parameters 2x); overlapped F&B in the steady state. Needs P even, M even, "
       "M >= 2P",
       {ranks_param("pipeline ranks P, even (each holds stage r and stage 2P-1-r)", 2),
        microbatches_param("M even, >= 2P; microbatches 0..M/2-1 go down, M/2..M-1 up", 2)},
       build,
       {{{"ranks", 2}, {"microbatches", 4}},
        {{"ranks", 4}, {"microbatches", 8}},
        {{"ranks", 4}, {"microbatches", 10}},
        {{"ranks", 6}, {"microbatches", 12}},
        {{"ranks", 8}, {"microbatches", 20}}}});
}

}  // namespace ppsim::schedules::generators
