#pragma once
// Colours of op kinds, shared by the SVG timeline, the HTML report and the terminal timeline so a
// kind looks the same everywhere. Chunks of one kind are shades of its colour: chunk 0 the base,
// later chunks lighter.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "ppsim/schedules/op.hpp"

namespace ppsim::viz {

struct Rgb {
  std::uint8_t r = 0, g = 0, b = 0;
  friend bool operator==(const Rgb&, const Rgb&) = default;
};

// Tableau-10 hues: distinguishable in print and by most colour-blind readers.
inline Rgb kind_rgb(schedules::OpKind kind) {
  using schedules::OpKind;
  switch (kind) {
    case OpKind::F:
      return {0x4e, 0x79, 0xa7};  // blue
    case OpKind::B:
      return {0x59, 0xa1, 0x4f};  // green
    case OpKind::I:
      return {0xf2, 0x8e, 0x2b};  // orange
    case OpKind::W:
      return {0xb0, 0x7a, 0xa1};  // purple
    case OpKind::OVERLAP_F_B:
      return {0xe1, 0x57, 0x59};  // red
    default:
      return {0x9c, 0x9c, 0x9c};  // grey: not a compute op
  }
}

// Chunk `chunk` of `chunks`: mixed with white, up to 55% for the last chunk, so shades stay
// readable against the white background.
inline Rgb chunk_shade(Rgb base, int chunk, int chunks) {
  if (chunks <= 1 || chunk <= 0) return base;
  const double t = 0.55 * std::min(chunk, chunks - 1) / (chunks - 1);
  auto mix = [t](std::uint8_t c) { return static_cast<std::uint8_t>(c + (255 - c) * t + 0.5); };
  return {mix(base.r), mix(base.g), mix(base.b)};
}

inline std::string hex(Rgb c) {
  return fmt::format("#{:02x}{:02x}{:02x}", c.r, c.g, c.b);
}

// "#4e79a7" for an F of chunk 0.
inline std::string kind_color(schedules::OpKind kind, int chunk = 0, int chunks = 1) {
  return hex(chunk_shade(kind_rgb(kind), chunk, chunks));
}

// Dark text on light fills, white on dark ones.
inline std::string_view text_color_on(Rgb c) {
  const double luma = 0.299 * c.r + 0.587 * c.g + 0.114 * c.b;
  return luma > 150 ? "#1a1a1a" : "#ffffff";
}

inline std::string_view kind_label(schedules::OpKind kind) {
  using schedules::OpKind;
  switch (kind) {
    case OpKind::F:
      return "F forward";
    case OpKind::B:
      return "B backward";
    case OpKind::I:
      return "I backward (inputs)";
    case OpKind::W:
      return "W backward (weights)";
    case OpKind::OVERLAP_F_B:
      return "F&B overlapped";
    default:
      return schedules::to_string(kind);
  }
}

// Other marks of a timeline.
inline constexpr std::string_view kTransferColor = "#555555";
inline constexpr std::string_view kBlockedColor = "#bdbdbd";  // a rank held in a comm op or WAIT
inline constexpr std::string_view kStuckColor = "#d62728";    // blocked for good / deadlock cycle

}  // namespace ppsim::viz
