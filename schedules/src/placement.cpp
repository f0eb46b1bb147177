#include "ppsim/schedules/placement.hpp"

namespace ppsim::schedules {

std::vector<StagePlace> make_placement(PlacementKind kind, int ranks, int chunks) {
  std::vector<StagePlace> places;
  places.reserve(static_cast<std::size_t>(ranks) * static_cast<std::size_t>(chunks));
  for (int c = 0; c < chunks; ++c) {
    for (int i = 0; i < ranks; ++i) {
      const bool down = kind == PlacementKind::loop || c % 2 == 0;
      places.push_back({down ? i : ranks - 1 - i, c});
    }
  }
  return places;
}

std::string_view to_string(PlacementKind kind) {
  return kind == PlacementKind::loop ? "loop" : "v";
}

}  // namespace ppsim::schedules
