#pragma once
// Bad input: names the source (file or command-line flag), the key or line:column, and what was
// expected. what() is the full message. The CLI turns it into exit code 2.
#include <stdexcept>
#include <string>

namespace ppsim::config {

class ConfigError : public std::runtime_error {
 public:
  ConfigError(const std::string& source, const std::string& key, const std::string& message);
  const std::string& source() const { return source_; }
  const std::string& key() const { return key_; }

 private:
  std::string source_, key_;
};

}  // namespace ppsim::config
