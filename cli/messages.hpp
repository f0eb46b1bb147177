#pragma once
// Echoing user input in messages: a 5 MB token or binary junk must not flood the terminal.
#include <cstddef>
#include <string>
#include <string_view>

namespace ppsim::cli {

// `token` with control bytes and invalid UTF-8 written as \xNN, cut after about `max` characters
// (on a character boundary) with "…" appended.
std::string printable(std::string_view token, std::size_t max = 80);

// `message` with every whitespace-separated word longer than `max` shortened by printable().
std::string shorten_long_words(std::string_view message, std::size_t max = 80);

}  // namespace ppsim::cli
