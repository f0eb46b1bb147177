#pragma once
// A byte count as people read it: "512 B", "3.02 GiB" (binary units, `decimals` after the point).
#include <fmt/format.h>

#include <string>

namespace ppsim::base {

inline std::string human_bytes(double bytes, int decimals = 2) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", bytes)
                : fmt::format("{:.{}f} {}", bytes, decimals, kUnits[u]);
}

}  // namespace ppsim::base
