#pragma once
// Colours of op kinds, shared by the SVG timeline, the HTML report and the terminal timeline so a
// kind looks the same everywhere. Chunks of one kind are shades of its colour: chunk 0 the base,
// later chunks lighter.
#include <algorithm>
#include <cmath>
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

// Hues from Okabe & Ito's and Paul Tol's colour-blind-safe sets, chosen so that every two kinds,
// at chunk 0 and at the lightest chunk shade, stay apart (CIELAB distance >= 12) for normal
// vision and simulated deuteranopia and protanopia (tests/test_palette.cpp checks it).
inline Rgb kind_rgb(schedules::OpKind kind) {
  using schedules::OpKind;
  switch (kind) {
    case OpKind::F:
      return {0x00, 0x72, 0xb2};  // blue
    case OpKind::B:
      return {0x99, 0x99, 0x33};  // olive
    case OpKind::I:
      return {0xe6, 0x9f, 0x00};  // orange
    case OpKind::W:
      return {0x88, 0x22, 0x55};  // wine
    case OpKind::OVERLAP_F_B:
      return {0xee, 0x66, 0x77};  // rose
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

// "#0072b2" for an F of chunk 0.
inline std::string kind_color(schedules::OpKind kind, int chunk = 0, int chunks = 1) {
  return hex(chunk_shade(kind_rgb(kind), chunk, chunks));
}

// Dark text on light fills, white on dark ones: whichever has the higher WCAG 2 contrast ratio
// (relative luminances of sRGB, (L1 + 0.05) / (L2 + 0.05)).
inline std::string_view text_color_on(Rgb c) {
  auto lin = [](std::uint8_t v) {
    const double x = v / 255.0;
    return x <= 0.04045 ? x / 12.92 : std::pow((x + 0.055) / 1.055, 2.4);
  };
  const double L = 0.2126 * lin(c.r) + 0.7152 * lin(c.g) + 0.0722 * lin(c.b);
  const double dark = 0.0103;  // #1a1a1a
  return (L + 0.05) / (dark + 0.05) > 1.05 / (L + 0.05) ? "#1a1a1a" : "#ffffff";
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
