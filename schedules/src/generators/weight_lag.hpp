#pragma once
// The shape the handcrafted zero-bubble schedules (zb-h1, zb-h2) share: rank r runs warmup(r)
// forwards, then one F, one I and one W per step, the W trailing the I by lag(r) steps; the W
// left over close the run. Rank r then holds warmup(r) + 1 stashes a W still needs in full and
// lag(r) that only W still needs.
#include <algorithm>

#include "ppsim/schedules/program.hpp"

namespace ppsim::schedules::generators {

template <typename Warmup, typename Lag>
Program weight_lag_schedule(int P, int M, Warmup warmup, Lag lag) {
  Program program(M, make_placement(PlacementKind::loop, P, 1));
  for (int r = 0; r < P; ++r) {
    program.reserve(r, 3 * static_cast<std::size_t>(M));
    const int warm = std::min(static_cast<int>(warmup(r)), M), late = lag(r);
    int next_f = 0, next_w = 0;
    for (; next_f < warm; ++next_f) program.push(r, Op::compute(OpKind::F, r, next_f));
    for (int next_i = 0; next_i < M; ++next_i) {
      if (next_f < M) program.push(r, Op::compute(OpKind::F, r, next_f++));
      program.push(r, Op::compute(OpKind::I, r, next_i));
      // W of microbatch k runs once the I of microbatch k + lag has.
      if (next_i - next_w >= late) program.push(r, Op::compute(OpKind::W, r, next_w++));
    }
    for (; next_w < M; ++next_w) program.push(r, Op::compute(OpKind::W, r, next_w));
  }
  return program;
}

}  // namespace ppsim::schedules::generators
