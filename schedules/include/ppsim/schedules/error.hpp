#pragma once
// Typed errors of the schedules module. Each carries the key it is about so callers can name it.
#include <stdexcept>
#include <string>

namespace ppsim::schedules {

// A schedule parameter that the generator cannot honour (key: "ranks", "chunks", ...).
class ParameterError : public std::runtime_error {
 public:
  ParameterError(std::string key, const std::string& message)
      : std::runtime_error(message), key_(std::move(key)) {}
  const std::string& key() const { return key_; }

 private:
  std::string key_;
};

// Op-list text that does not parse (line = rank + 1, column is 1-based).
class ParseError : public std::runtime_error {
 public:
  ParseError(int line, int column, const std::string& message)
      : std::runtime_error(message), line_(line), column_(column) {}
  int line() const { return line_; }
  int column() const { return column_; }

 private:
  int line_;
  int column_;
};

}  // namespace ppsim::schedules
