#pragma once
// The exact model of a small instance: a mixed-integer program (GLPK) over op start times with one
// binary per pair of ops on a rank whose order is open, the memory limit checked at every forward.
// Microbatches are identical, so each kind of op runs in microbatch order on a stage, as in
// every pipeline schedule; within that, the optimum is over all orders. Deterministic without a
// deadline: the branch and bound stops after a node budget.
#include <cstdint>
#include <optional>
#include <string>

#include "ppsim/search/instance.hpp"

namespace ppsim::search {

struct ExactOptions {
  std::int64_t limit = 0;       // per rank, bytes; 0 = none
  long long node_limit = 4000;  // branch-and-bound nodes before it stops with a gap
  double deadline = 0;          // steady_seconds() to stop at (then cut_short); 0 = none
};

struct ExactResult {
  bool optimal = false;  // proven optimal (else the best found and a bound)
  double makespan = 0;   // of `orders`
  double bound = 0;      // no schedule of the instance (within the limit) finishes before it
  Orders orders;
  std::string status;      // "optimal", "gap 1.2%", ...
  bool cut_short = false;  // the deadline stopped it
};

// Ops in the model: at most this many (3 per stage and microbatch with I/W).
inline constexpr int kExactMaxOps = 48;

// nullopt when the instance is too large, the model finds no schedule within the limit or the
// deadline passed before it found one (at once when it has passed already).
std::optional<ExactResult> exact(const Instance& in, const ExactOptions& options);

}  // namespace ppsim::search
