#pragma once
// Bad input: names the source (file or command-line flag), the key or line:column, and what was
// expected. what() is the full message. The CLI turns it into exit code 2.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include "ppsim/base/excerpt.hpp"

namespace ppsim::config {

class ConfigError : public std::runtime_error {
 public:
  ConfigError(const std::string& source, const std::string& key, const std::string& message);
  const std::string& source() const { return source_; }
  const std::string& key() const { return key_; }
  // what() without the "SOURCE: key 'K': " prefix.
  const std::string& message() const { return message_; }

 private:
  std::string source_, key_, message_;
};

using base::excerpt;  // input echoed in messages, cut and escaped

}  // namespace ppsim::config
