#pragma once
// Echoing user input in messages: a 5 MB token or binary junk must not flood the terminal.
#include <cstddef>
#include <string>
#include <string_view>

namespace ppsim::cli {

// `message` with every whitespace-separated word longer than `max` shortened by base::excerpt().
std::string shorten_long_words(std::string_view message, std::size_t max = 80);

}  // namespace ppsim::cli
