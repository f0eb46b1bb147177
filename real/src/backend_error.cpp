#include "ppsim/real/backend_error.hpp"

#include <fmt/format.h>

#include <string_view>

namespace ppsim::real {

std::string format_library_error(const std::string& library, const char* file, int line,
                                 const std::string& call, long long code, const std::string& name,
                                 const std::string& message) {
  std::string_view f = file ? file : "?";
  if (const auto slash = f.find_last_of('/'); slash != std::string_view::npos)
    f.remove_prefix(slash + 1);
  const std::string what = name.empty()      ? message
                           : message.empty() ? name
                                             : fmt::format("{}: {}", name, message);
  return fmt::format("{}:{}: {} error {} ({}) in {}", f, line, library, code,
                     what.empty() ? "no message" : what, call);
}

}  // namespace ppsim::real
