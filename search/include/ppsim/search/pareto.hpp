#pragma once
// The Pareto front of makespan against peak memory: the points no other point beats on both.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ppsim::search {

struct Point {
  std::int64_t memory = 0;
  double makespan = 0;
};

// Indices of the non-dominated points, by increasing memory (so decreasing makespan). Of equal
// points the first is kept.
std::vector<std::size_t> pareto_front(const std::vector<Point>& points);

}  // namespace ppsim::search
