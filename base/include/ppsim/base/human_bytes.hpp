#pragma once
// A byte count as people read it: "512 B", "3.02 GiB" (binary units, two decimals).
#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace ppsim::base {

inline std::string human_bytes(std::int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", b) : fmt::format("{:.2f} {}", v, units[u]);
}

}  // namespace ppsim::base
