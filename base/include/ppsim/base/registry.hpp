#pragma once
// One list of named extensions per kind (schedules, lowering styles, program sources, config
// sections, transports, computes, trace formats), looked up by name or alias without regard to
// case. Each extension is a file of its own that registers itself: the library that owns the
// kind declares `void register_builtins(base::Registry<Info>&)` beside Info (CMake generates it
// from the files of a folder, cmake/ppsim_helpers.cmake), and instance() calls it once, found by
// argument-dependent lookup in Info's namespace.
#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace ppsim::base {

inline bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// Info has `std::string name`, and may have `std::vector<std::string> aliases`.
template <typename Info>
class Registry {
 public:
  // The process's registry of Info, its built-ins registered on first use.
  static Registry& instance() {
    static Registry registry = [] {
      Registry r;
      register_builtins(r);
      return r;
    }();
    return registry;
  }

  // Kept sorted by name, so listings do not depend on link order; an Info of a name already
  // registered replaces it (registering is idempotent).
  void add(Info info) {
    const auto it =
        std::lower_bound(items_.begin(), items_.end(), info.name,
                         [](const Info& a, const std::string& n) { return a.name < n; });
    if (it != items_.end() && it->name == info.name)
      *it = std::move(info);
    else
      items_.insert(it, std::move(info));
  }
  // nullptr when unknown.
  const Info* find(std::string_view name) const {
    for (const auto& item : items_) {
      if (iequals(item.name, name)) return &item;
      if constexpr (requires { item.aliases; })
        for (const auto& alias : item.aliases)
          if (iequals(alias, name)) return &item;
    }
    return nullptr;
  }
  // The first Info `pred` accepts, in name order; nullptr when none does.
  template <typename Pred>
  const Info* find_if(Pred pred) const {
    const auto it = std::find_if(items_.begin(), items_.end(), pred);
    return it == items_.end() ? nullptr : &*it;
  }
  const std::vector<Info>& all() const { return items_; }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    out.reserve(items_.size());
    for (const auto& item : items_) out.push_back(item.name);
    return out;
  }

 private:
  std::vector<Info> items_;
};

}  // namespace ppsim::base
