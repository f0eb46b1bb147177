#pragma once
// Typed parameters of an extension (a generator, a lowering style), declared once by it: config
// reading, `ppsim list`, validation and sweeps all read the declarations.
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ppsim::schedules {

struct ParamSpec {
  ParamSpec(std::string n, std::string d) : name(std::move(n)), description(std::move(d)) {}
  ParamSpec& with_default(std::int64_t v) {
    default_value = v;
    return *this;
  }
  ParamSpec& must() {
    required = true;
    return *this;
  }
  ParamSpec& range(std::int64_t lo, std::int64_t hi = 1'000'000'000) {
    min = lo;
    max = hi;
    return *this;
  }
  ParamSpec& or_word(std::string word, std::int64_t value) {
    keyword = std::move(word);
    keyword_value = value;
    return *this;
  }

  std::string name;
  std::string description;
  std::int64_t default_value = 0;  // used when the parameter is not given (and not required)
  bool required = false;
  std::int64_t min = 0;
  std::int64_t max = 1'000'000'000;
  // A word accepted in place of a number, and the value it stands for (prefetch: "all" -> -1).
  std::string keyword;
  std::int64_t keyword_value = 0;
};

// Parameter values by name. Generators read them with get(); resolve() fills defaults and checks
// them against the declarations.
class Params {
 public:
  Params() = default;
  Params(std::initializer_list<std::pair<const std::string, std::int64_t>> values)
      : values_(values) {}

  void set(std::string_view name, std::int64_t value) { values_[std::string(name)] = value; }
  void erase(std::string_view name) {
    if (auto it = values_.find(name); it != values_.end()) values_.erase(it);
  }
  bool has(std::string_view name) const { return values_.find(name) != values_.end(); }
  std::int64_t get(std::string_view name, std::int64_t fallback = 0) const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }
  int integer(std::string_view name, int fallback = 0) const {
    return static_cast<int>(get(name, fallback));
  }
  const std::map<std::string, std::int64_t, std::less<>>& values() const { return values_; }

  // The common ones, by name.
  int ranks() const { return integer("ranks"); }
  int microbatches() const { return integer("microbatches"); }
  int chunks() const { return integer("chunks", 1); }

  friend bool operator==(const Params&, const Params&) = default;

 private:
  std::map<std::string, std::int64_t, std::less<>> values_;
};

// Checks `given` against `specs` and fills defaults. Throws ParameterError naming the key: a
// parameter `owner` does not declare, a required one missing, a value out of range.
Params resolve(const std::vector<ParamSpec>& specs, const Params& given, std::string_view owner);

const ParamSpec* find_param(const std::vector<ParamSpec>& specs, std::string_view name);

}  // namespace ppsim::schedules
