#pragma once
// Where each virtual stage lives: stage -> (rank, chunk).
#include <cstdint>
#include <string_view>
#include <vector>

namespace ppsim::schedules {

struct StagePlace {
  std::int32_t rank = 0;
  std::int32_t chunk = 0;
  friend bool operator==(const StagePlace&, const StagePlace&) = default;
};

enum class PlacementKind { loop, v };

// loop: stage s on rank s mod P (Megatron interleaved). v: chunk 0 runs down ranks 0..P-1, chunk 1
// back up P-1..0, and so on alternately (ZB-V, DualPipeV).
std::vector<StagePlace> make_placement(PlacementKind kind, int ranks, int chunks);
std::string_view to_string(PlacementKind kind);

}  // namespace ppsim::schedules
