// The op colours of the pictures (viz/palette.hpp) stay apart for readers with normal vision and
// with the two common red-green deficiencies: every two kinds, at chunk 0 and at the lightest
// chunk shade, are at least 12 CIELAB units apart, after simulating deuteranopia and protanopia
// with Viénot, Brettel & Mollon 1999 (linear RGB -> LMS, the missing cone rebuilt from the other
// two, back to RGB). Lab from sRGB with the D65 white point (IEC 61966-2-1, CIE 1976).
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "ppsim/viz/palette.hpp"

using namespace ppsim;

namespace {

using Vec = std::array<double, 3>;

double to_linear(double c) {
  c /= 255;
  return c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4);
}

Vec linear_rgb(viz::Rgb c) {
  return {to_linear(c.r), to_linear(c.g), to_linear(c.b)};
}

Vec mul(const std::array<Vec, 3>& m, const Vec& v) {
  return {m[0][0] * v[0] + m[0][1] * v[1] + m[0][2] * v[2],
          m[1][0] * v[0] + m[1][1] * v[1] + m[1][2] * v[2],
          m[2][0] * v[0] + m[2][1] * v[1] + m[2][2] * v[2]};
}

enum class Vision { normal, deutan, protan };

// Linear RGB as a dichromat sees it (Viénot et al. 1999).
Vec simulate(Vec rgb, Vision v) {
  if (v == Vision::normal) return rgb;
  const std::array<Vec, 3> to_lms = {Vec{17.8824, 43.5161, 4.11935}, Vec{3.45565, 27.1554, 3.86714},
                                     Vec{0.0299566, 0.184309, 1.46709}};
  const std::array<Vec, 3> to_rgb = {Vec{0.0809444479, -0.130504409, 0.116721066},
                                     Vec{-0.0102485335, 0.0540193266, -0.113614708},
                                     Vec{-0.000365296938, -0.00412161469, 0.693511405}};
  Vec lms = mul(to_lms, rgb);
  if (v == Vision::deutan) lms[1] = 0.494207 * lms[0] + 1.24827 * lms[2];
  if (v == Vision::protan) lms[0] = 2.02344 * lms[1] - 2.52581 * lms[2];
  Vec out = mul(to_rgb, lms);
  for (double& c : out) c = std::clamp(c, 0.0, 1.0);
  return out;
}

Vec lab(const Vec& rgb) {
  const double X = 0.4124 * rgb[0] + 0.3576 * rgb[1] + 0.1805 * rgb[2];
  const double Y = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2];
  const double Z = 0.0193 * rgb[0] + 0.1192 * rgb[1] + 0.9505 * rgb[2];
  auto f = [](double t) { return t > 0.008856 ? std::cbrt(t) : 7.787 * t + 16.0 / 116; };
  const double fx = f(X / 0.95047), fy = f(Y / 1.0), fz = f(Z / 1.08883);
  return {116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)};
}

double distance(viz::Rgb a, viz::Rgb b, Vision v) {
  const Vec la = lab(simulate(linear_rgb(a), v)), lb = lab(simulate(linear_rgb(b), v));
  return std::hypot(la[0] - lb[0], la[1] - lb[1], la[2] - lb[2]);
}

}  // namespace

TEST_CASE("palette.kinds_apart_colour_blind", "[palette]") {
  // Every two op kinds (chunk 0 and the lightest shade of 4 chunks) are told apart under normal,
  // deuteranope and protanope vision.
  using schedules::OpKind;
  struct Swatch {
    std::string name;
    viz::Rgb rgb;
  };
  std::vector<Swatch> swatches;
  for (const OpKind k : {OpKind::F, OpKind::B, OpKind::I, OpKind::W, OpKind::OVERLAP_F_B})
    for (const int chunk : {0, 3})
      swatches.push_back({std::string(schedules::to_string(k)) + " chunk " + std::to_string(chunk),
                          viz::chunk_shade(viz::kind_rgb(k), chunk, 4)});
  for (std::size_t i = 0; i < swatches.size(); ++i)
    for (std::size_t j = i + 1; j < swatches.size(); ++j)
      for (const Vision v : {Vision::normal, Vision::deutan, Vision::protan}) {
        INFO(swatches[i].name << " vs " << swatches[j].name << ", vision " << static_cast<int>(v));
        CHECK(distance(swatches[i].rgb, swatches[j].rgb, v) >= 12.0);
      }
  // The simulation itself: a pure red and a pure green, far apart for normal vision, nearly meet
  // for a deuteranope.
  CHECK(distance({255, 0, 0}, {0, 255, 0}, Vision::normal) > 100);
  CHECK(distance({200, 60, 60}, {110, 110, 50}, Vision::deutan) < 20);
}

TEST_CASE("palette.label_colour_contrast", "[palette]") {
  // A box's label takes dark or white text, whichever contrasts more (WCAG 2 ratio): the olive B
  // gets dark text (5.8:1 against white's 3.0:1), the blue F white; every kind at chunk 0 reaches
  // at least 4.5:1, WCAG's AA level for text.
  using schedules::OpKind;
  CHECK(viz::text_color_on(viz::kind_rgb(OpKind::B)) == "#1a1a1a");
  CHECK(viz::text_color_on(viz::kind_rgb(OpKind::F)) == "#ffffff");
  auto luminance = [](viz::Rgb c) {
    const Vec v = linear_rgb(c);
    return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
  };
  for (const OpKind k : {OpKind::F, OpKind::B, OpKind::I, OpKind::W, OpKind::OVERLAP_F_B}) {
    const viz::Rgb fill = viz::kind_rgb(k);
    const double L = luminance(fill);
    const double text = viz::text_color_on(fill) == "#ffffff" ? 1.0 : luminance({26, 26, 26});
    const double ratio = (std::max(L, text) + 0.05) / (std::min(L, text) + 0.05);
    INFO(schedules::to_string(k) << " " << ratio);
    CHECK(ratio >= 4.5);
  }
}
