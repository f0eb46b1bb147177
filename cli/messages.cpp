#include "messages.hpp"

#include "ppsim/base/excerpt.hpp"

namespace ppsim::cli {

std::string shorten_long_words(std::string_view message, std::size_t max) {
  std::string out;
  std::size_t i = 0;
  while (i < message.size()) {
    const auto end = message.find_first_of(" \n\t", i);
    const auto word = message.substr(i, end == std::string_view::npos ? end : end - i);
    out += base::excerpt(word, max);
    if (end == std::string_view::npos) break;
    out += message[end];
    i = end + 1;
  }
  return out;
}

}  // namespace ppsim::cli
