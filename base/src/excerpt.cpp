#include "ppsim/base/excerpt.hpp"

#include <fmt/format.h>

namespace ppsim::base {

std::string excerpt(std::string_view text, std::size_t max) {
  std::string out;
  std::size_t shown = 0;  // characters, not bytes
  for (std::size_t i = 0; i < text.size();) {
    if (shown == max) {
      out += "…";
      break;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    // The length of a valid UTF-8 sequence starting here, 0 if there is none.
    std::size_t len = 0;
    if (c >= 0x20 && c < 0x7f) {
      len = 1;
    } else if (c >= 0xc2 && c <= 0xf4) {
      const std::size_t want = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
      len = want;
      for (std::size_t k = 1; k < want; ++k)
        if (i + k >= text.size() || (static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80)
          len = 0;
    }
    if (len > 0) {
      out.append(text.substr(i, len));
      i += len;
    } else {
      out += c == '\n'   ? std::string("\\n")
             : c == '\t' ? std::string("\\t")
             : c == '\r' ? std::string("\\r")
                         : fmt::format("\\x{:02x}", c);
      ++i;
    }
    ++shown;
  }
  return out;
}

}  // namespace ppsim::base
