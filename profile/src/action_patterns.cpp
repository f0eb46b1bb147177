// The patterns that say which ranges are pipeline actions: PyTorch pipelining's `PP:` names and
// those a map file adds (docs/PROFILES.md), compiled with RE2.
#include "action_patterns.hpp"

#include <fmt/format.h>
#include <re2/re2.h>

#include <filesystem>
#include <fstream>

#include "ppsim/base/excerpt.hpp"

namespace ppsim::profile {

using nlohmann::json;
using schedules::OpKind;

namespace {

constexpr std::size_t kMaxMapBytes = std::size_t{1} << 20;

std::optional<OpKind> kind_of_letter(std::string_view s) {
  if (s == "F") return OpKind::F;
  if (s == "B") return OpKind::B;
  if (s == "I") return OpKind::I;
  if (s == "W") return OpKind::W;
  return std::nullopt;
}

// RE2 with errors returned, not logged, and its default memory bound (a pattern too large to
// compile within it is an error, not an allocation of gigabytes).
std::shared_ptr<const re2::RE2> compile(const std::string& text, std::string& error) {
  re2::RE2::Options options;
  options.set_log_errors(false);
  auto re = std::make_shared<const re2::RE2>(text, options);
  if (!re->ok()) {
    error = re->error();
    return nullptr;
  }
  return re;
}

std::string read_map_text(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ProfileError(fmt::format("{}: is a directory, not a map file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ProfileError(fmt::format("{}: cannot open the map file", path));
  std::string text;
  char buf[1 << 14];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxMapBytes)
      throw ProfileError(fmt::format("{}: over {} bytes: not a map file", path, kMaxMapBytes));
  }
  return text;
}

}  // namespace

std::vector<ActionPattern> default_patterns() {
  ActionPattern p;
  p.text = "PP:<stage><F|B|I|W><microbatch> (PyTorch pipelining)";
  std::string error;
  p.regex = compile("PP:(\\d{1,6})([FBIW])(\\d{1,9})", error);
  p.stage_group = 1;
  p.kind_group = 2;
  p.microbatch_group = 3;
  return {p};
}

std::vector<ActionPattern> read_map(const std::string& path) {
  const std::string text = read_map_text(path);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw ProfileError(fmt::format("{}: malformed JSON: {}", path, base::excerpt(e.what(), 160)));
  }
  auto fail = [&](const std::string& key, const std::string& what) {
    throw ProfileError(fmt::format("{}: key '{}': {}", path, key, what));
  };
  if (!j.is_object() || !j.contains("actions") || !j["actions"].is_array() ||
      j["actions"].empty() || j.size() != 1)
    fail("actions", "expected {\"actions\": [{\"pattern\": REGEX, \"kind\": \"F\", ...}, ...]}");
  if (j["actions"].size() > kMaxPatterns)
    fail("actions", fmt::format("at most {} patterns", kMaxPatterns));
  std::vector<ActionPattern> out;
  for (std::size_t i = 0; i < j["actions"].size(); ++i) {
    const json& a = j["actions"][i];
    const std::string at = fmt::format("actions[{}]", i);
    if (!a.is_object() || !a.contains("pattern") || !a["pattern"].is_string())
      fail(at + ".pattern", "expected a regular expression (a string)");
    ActionPattern p;
    p.text = a["pattern"].get<std::string>();
    if (p.text.size() > kMaxPatternBytes)
      fail(at + ".pattern", fmt::format("{} bytes: at most {}", p.text.size(), kMaxPatternBytes));
    std::string error;
    p.regex = compile(p.text, error);
    if (!p.regex)
      fail(at + ".pattern",
           fmt::format("not a regular expression (RE2 syntax): {}", base::excerpt(error, 120)));
    const int groups = p.regex->NumberOfCapturingGroups();
    auto group = [&](const char* key) {
      if (!a.contains(key)) return 0;
      if (!a[key].is_number_integer() || a[key].get<long long>() < 1 ||
          a[key].get<long long>() > groups)
        fail(at + "." + key, fmt::format("expected a capture group from 1 to {}", groups));
      return a[key].get<int>();
    };
    for (const auto& item : a.items())
      if (item.key() != "pattern" && item.key() != "kind" && item.key() != "kind_group" &&
          item.key() != "stage" && item.key() != "microbatch")
        fail(at + "." + base::excerpt(item.key(), 40),
             "unknown key (pattern, kind, kind_group, stage, microbatch)");
    if (a.contains("kind")) {
      if (!a["kind"].is_string() || !kind_of_letter(a["kind"].get<std::string>()))
        fail(at + ".kind", "expected \"F\", \"B\", \"I\" or \"W\"");
      p.kind = kind_of_letter(a["kind"].get<std::string>());
    }
    p.kind_group = group("kind_group");
    if (!p.kind && !p.kind_group) fail(at + ".kind", "give kind or kind_group");
    p.stage_group = group("stage");
    p.microbatch_group = group("microbatch");
    if (!p.microbatch_group)
      fail(at + ".microbatch", "expected the capture group of the microbatch");
    out.push_back(std::move(p));
  }
  return out;
}

namespace detail {

bool matches(const ActionPattern& p, std::string_view name) {
  if (!p.regex || name.size() > kMaxActionNameBytes) return false;
  return p.regex->Match(re2::StringPiece(name.data(), name.size()), 0, name.size(),
                        re2::RE2::ANCHOR_BOTH, nullptr, 0);
}

bool match_groups(const ActionPattern& p, std::string_view name,
                  std::vector<std::string_view>& groups) {
  if (!p.regex || name.size() > kMaxActionNameBytes) return false;
  const int n = 1 + p.regex->NumberOfCapturingGroups();
  std::vector<re2::StringPiece> sub(static_cast<std::size_t>(n));
  if (!p.regex->Match(re2::StringPiece(name.data(), name.size()), 0, name.size(),
                      re2::RE2::ANCHOR_BOTH, sub.data(), n))
    return false;
  groups.assign(static_cast<std::size_t>(n), std::string_view());
  for (int g = 0; g < n; ++g)
    if (sub[static_cast<std::size_t>(g)].data())
      groups[static_cast<std::size_t>(g)] = std::string_view(
          sub[static_cast<std::size_t>(g)].data(), sub[static_cast<std::size_t>(g)].size());
  return true;
}

}  // namespace detail

}  // namespace ppsim::profile
