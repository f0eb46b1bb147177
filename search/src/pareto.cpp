#include "ppsim/search/pareto.hpp"

#include <algorithm>
#include <numeric>

namespace ppsim::search {

std::vector<std::size_t> pareto_front(const std::vector<Point>& points) {
  std::vector<std::size_t> order(points.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (points[a].memory != points[b].memory) return points[a].memory < points[b].memory;
    return points[a].makespan < points[b].makespan;
  });
  std::vector<std::size_t> front;
  for (std::size_t i : order)
    if (front.empty() || points[i].makespan < points[front.back()].makespan) front.push_back(i);
  return front;
}

}  // namespace ppsim::search
