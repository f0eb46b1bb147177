#include "messages.hpp"

#include <fmt/format.h>

namespace ppsim::cli {

namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t n = 0;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2;
  else if (c >= 0xE0 && c <= 0xEF)
    n = 3;
  else if (c >= 0xF0 && c <= 0xF4)
    n = 4;
  else
    return 0;
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  return n;
}

}  // namespace

std::string printable(std::string_view token, std::size_t max) {
  std::string out;
  std::size_t shown = 0, i = 0;
  while (i < token.size()) {
    if (shown >= max) return out + "…";
    const auto c = static_cast<unsigned char>(token[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += token[i++];
    } else if (const std::size_t n = c >= 0x80 ? utf8_length(token, i) : 0; n > 0) {
      out.append(token.substr(i, n));
      i += n;
    } else {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    }
    ++shown;
  }
  return out;
}

std::string shorten_long_words(std::string_view message, std::size_t max) {
  std::string out;
  std::size_t i = 0;
  while (i < message.size()) {
    const auto end = message.find_first_of(" \n\t", i);
    const auto word = message.substr(i, end == std::string_view::npos ? end : end - i);
    out += printable(word, max);
    if (end == std::string_view::npos) break;
    out += message[end];
    i = end + 1;
  }
  return out;
}

}  // namespace ppsim::cli
