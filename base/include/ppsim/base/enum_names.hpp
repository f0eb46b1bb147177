#pragma once
// Names (or other values) of an enum's values from a table in the enum's order, written next to
// the enum, instead of a switch per enum. A value past the table gives `fallback`.
#include <array>
#include <cstddef>

namespace ppsim::base {

template <typename E, typename T, std::size_t N>
constexpr T enum_value(E e, const std::array<T, N>& table, T fallback) {
  const auto i = static_cast<std::size_t>(e);
  return i < N ? table[i] : fallback;
}

}  // namespace ppsim::base
