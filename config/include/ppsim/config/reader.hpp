#pragma once
// Reads one JSON object of a config strictly: typed getters that name the key in their errors, and
// a check that no key went unread. Sections added by other libraries read themselves with it.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ppsim/config/error.hpp"

namespace ppsim::config {

// Edit distance of two words, an adjacent transposition counting one ("serach" to "search": 1).
std::size_t edit_distance(std::string_view a, std::string_view b);
// The candidate nearest to `word` if it is near enough to be a typo of it (1 edit for words of
// up to 3 letters, 2 up to 7, else 3, and fewer edits than the shorter word has letters); else
// "". The first of equally near candidates wins.
std::string nearest(std::string_view word, const std::vector<std::string>& candidates);

class Reader {
 public:
  // `prefix`: the dotted path of this object with a trailing dot ("comm."), empty at the top.
  Reader(const nlohmann::json& j, std::string source, std::string prefix);

  static std::string describe(const nlohmann::json& v);
  std::string key(const std::string& k) const { return prefix_ + k; }
  const std::string& source() const { return source_; }
  const std::string& prefix() const { return prefix_; }
  [[noreturn]] void fail(const std::string& k, const std::string& msg) const {
    throw ConfigError(source_, key(k), msg);
  }

  // "`k` is required: `expected`", unless a key not read yet is near `k` (a misspelling of it,
  // "microbatchs"): then that key is named as unknown, with `k` suggested.
  [[noreturn]] void missing(const std::string& k, const std::string& expected) const;

  // The value, marked as read; nullptr when absent or null.
  const nlohmann::json* get(const std::string& k);
  bool has(const std::string& k) const;
  const nlohmann::json& object() const { return j_; }

  double number(const std::string& k, double def, bool allow_negative = false);
  std::optional<double> opt_number(const std::string& k);
  std::int64_t bytes(const std::string& k, std::int64_t def);
  int integer(const std::string& k, int def, int min, bool required = false);
  std::string string(const std::string& k, std::string def, bool required = false);
  bool boolean(const std::string& k, bool def);
  std::string one_of(const std::string& k, std::string def,
                     std::initializer_list<std::string_view> allowed);
  std::string one_of(const std::string& k, std::string def,
                     const std::vector<std::string>& allowed);

  // Call last: every key not read is a typo or a feature we do not have. `hint(key)` may explain
  // a key that belongs elsewhere (e.g. a parameter of another schedule); else the nearest key
  // read here is suggested.
  void reject_unknown(const std::function<std::string(const std::string&)>& hint = {}) const;

 private:
  const nlohmann::json& j_;
  std::string source_, prefix_;
  std::set<std::string> known_;
};

}  // namespace ppsim::config
