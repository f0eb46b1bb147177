#pragma once
// The tick step of a time axis (internal to viz/): the SVG and the terminal timelines share it.
#include <algorithm>
#include <cmath>

namespace ppsim::viz::detail {

// 1, 2 or 5 times a power of ten, so that about `target` ticks cover `span`.
inline double nice_step(double span, int target) {
  const double raw = span / std::max(1, target);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}

}  // namespace ppsim::viz::detail
