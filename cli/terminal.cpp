#include "terminal.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace ppsim::cli {

bool is_terminal(int fd) {
  return ::isatty(fd) == 1;
}

int terminal_width(int fd, int fallback) {
  if (const char* env = std::getenv("COLUMNS")) {
    const std::string_view s(env);
    int v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc() && end == s.data() + s.size() && v > 0 && v <= 10000) return v;
  }
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return fallback;
}

bool color_wanted(int fd, bool no_color_option) {
  if (no_color_option || !is_terminal(fd)) return false;
  if (const char* nc = std::getenv("NO_COLOR"); nc && *nc) return false;
  const char* term = std::getenv("TERM");
  return !(term && std::strcmp(term, "dumb") == 0);
}

}  // namespace ppsim::cli
