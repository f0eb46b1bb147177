#pragma once
// A list of named extensions (generators, lowering styles), looked up by name or alias without
// regard to case. Each extension lives in a file of its own that registers it.
#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace ppsim::schedules {

inline bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// T has `std::string name` and `std::vector<std::string> aliases`.
template <typename T>
class NamedRegistry {
 public:
  void add(T item) {
    items_.push_back(std::move(item));
    std::sort(items_.begin(), items_.end(), [](const T& a, const T& b) { return a.name < b.name; });
  }
  // nullptr when unknown.
  const T* find(std::string_view name) const {
    for (const auto& item : items_) {
      if (iequals(item.name, name)) return &item;
      for (const auto& alias : item.aliases)
        if (iequals(alias, name)) return &item;
    }
    return nullptr;
  }
  const std::vector<T>& all() const { return items_; }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& item : items_) out.push_back(item.name);
    return out;
  }

 private:
  std::vector<T> items_;
};

}  // namespace ppsim::schedules
