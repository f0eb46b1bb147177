#pragma once
// Echoing input in messages: a 5 MB token or binary junk must not flood the terminal.
#include <cstddef>
#include <string>
#include <string_view>

namespace ppsim::base {

// Text from the input made safe to echo in a message: bytes that are not printable ASCII or valid
// UTF-8 shown as \xNN (\n, \t, \r for those), cut after `max` characters with "…".
std::string excerpt(std::string_view text, std::size_t max = 60);

}  // namespace ppsim::base
