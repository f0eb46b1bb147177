#pragma once
// Local search on per-rank orders: move one op (most often a W, the op free to move) to another
// place on its rank, keep the move when the orders still run, fit the limit and finish no later.
// Deterministic for a seed.
#include <cstdint>

#include "ppsim/search/timing.hpp"

namespace ppsim::search {

struct ImproveOptions {
  std::int64_t limit = 0;  // per rank, bytes; 0 = none
  std::uint64_t seed = 1;
  long long budget = 0;  // ops evaluated in all (each try costs the program's op count)
  double deadline = 0;   // steady_seconds() to stop at; 0 = none
};

// Seconds on the steady clock (since its epoch): what a deadline is written in.
double steady_seconds();

// Improves `orders` in place; returns its timing.
Timing improve(const Instance& in, Orders& orders, const ImproveOptions& options);

}  // namespace ppsim::search
