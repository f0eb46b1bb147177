// config::Reader: strict, typed reading of one JSON object of a config, and the near-miss
// suggestions its errors (and the CLI's) make.
#include "ppsim/config/reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>

#include "ppsim/base/excerpt.hpp"

namespace ppsim::config {

using nlohmann::json;

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: insertions, deletions, substitutions and adjacent transpositions
  // ("serach") each count one. Three rows of b's length.
  std::vector<std::size_t> prev2(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  std::iota(prev.begin(), prev.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

namespace {
std::string lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}
}  // namespace

std::string nearest(std::string_view word, const std::vector<std::string>& candidates) {
  // Input echoed from a file may be megabytes: only words of a key's length are compared.
  if (word.empty() || word.size() > 64) return "";
  std::string best;
  std::size_t best_d = 0;
  for (const auto& c : candidates) {
    if (c.empty() || c.size() > 64) continue;
    const std::size_t longest = std::max(word.size(), c.size());
    const std::size_t limit = longest <= 3 ? 1 : longest <= 7 ? 2 : 3;
    // Case is one edit at most ("RUN" for "run"), else letters count as they are.
    const std::size_t d = lower(word) == lower(c) ? (word == c ? 0 : 1) : edit_distance(word, c);
    // Not a typo when the word is all changed ("ab" for "cd").
    if (d == 0 || d > limit || d >= std::min(word.size(), c.size())) continue;
    if (best.empty() || d < best_d) best = c, best_d = d;
  }
  return best;
}

Reader::Reader(const json& j, std::string source, std::string prefix)
    : j_(j), source_(std::move(source)), prefix_(std::move(prefix)) {
  if (!j_.is_object())
    throw ConfigError(source_,
                      prefix_.empty() ? "(top level)" : prefix_.substr(0, prefix_.size() - 1),
                      fmt::format("expected an object, got {}", describe(j_)));
}

std::string Reader::describe(const json& v) {
  // A huge array is not dumped whole to show its first characters.
  std::string d;
  if (v.is_array() && v.size() > 16)
    d = fmt::format("[... {} elements]", v.size());
  else if (v.is_object() && v.size() > 16)
    d = fmt::format("{{... {} keys}}", v.size());
  else
    d = v.dump(-1, ' ', true, json::error_handler_t::replace);
  return fmt::format("{} {}", v.type_name(), base::excerpt(d, 40));
}

const json* Reader::get(const std::string& k) {
  known_.insert(k);
  auto it = j_.find(k);
  if (it == j_.end() || it->is_null()) return nullptr;
  return &*it;
}
bool Reader::has(const std::string& k) const {
  return j_.contains(k) && !j_.at(k).is_null();
}

double Reader::number(const std::string& k, double def, bool allow_negative) {
  const json* v = get(k);
  if (!v) return def;
  if (!v->is_number()) fail(k, fmt::format("expected a number, got {}", describe(*v)));
  const double x = v->get<double>();
  if (!std::isfinite(x)) fail(k, "expected a finite number");
  if (!allow_negative && x < 0) fail(k, fmt::format("expected a number >= 0, got {}", x));
  return x;
}
std::optional<double> Reader::opt_number(const std::string& k) {
  if (!has(k)) {
    known_.insert(k);
    return std::nullopt;
  }
  return number(k, 0);
}
std::int64_t Reader::bytes(const std::string& k, std::int64_t def) {
  const json* v = get(k);
  if (!v) return def;
  if (!v->is_number() || v->get<double>() < 0 || std::floor(v->get<double>()) != v->get<double>() ||
      v->get<double>() > 9.0e18)
    fail(k, fmt::format("expected a whole number of bytes >= 0, got {}", describe(*v)));
  return v->is_number_integer() ? v->get<std::int64_t>()
                                : static_cast<std::int64_t>(v->get<double>());
}
int Reader::integer(const std::string& k, int def, int min, bool required) {
  const json* v = get(k);
  if (!v) {
    if (required) missing(k, fmt::format("expected an integer >= {}", min));
    return def;
  }
  if (!v->is_number_integer() || v->get<long long>() < min || v->get<long long>() > 1'000'000'000)
    fail(k, fmt::format("expected an integer >= {}, got {}", min, describe(*v)));
  return static_cast<int>(v->get<long long>());
}
std::string Reader::string(const std::string& k, std::string def, bool required) {
  const json* v = get(k);
  if (!v) {
    if (required) missing(k, "expected a string");
    return def;
  }
  if (!v->is_string()) fail(k, fmt::format("expected a string, got {}", describe(*v)));
  return v->get<std::string>();
}
bool Reader::boolean(const std::string& k, bool def) {
  const json* v = get(k);
  if (!v) return def;
  if (!v->is_boolean()) fail(k, fmt::format("expected true or false, got {}", describe(*v)));
  return v->get<bool>();
}
std::string Reader::one_of(const std::string& k, std::string def,
                           std::initializer_list<std::string_view> allowed) {
  return one_of(k, std::move(def), std::vector<std::string>(allowed.begin(), allowed.end()));
}
std::string Reader::one_of(const std::string& k, std::string def,
                           const std::vector<std::string>& allowed) {
  std::string v = string(k, def);
  for (const auto& a : allowed)
    if (v == a) return v;
  fail(k,
       fmt::format("expected one of {}, got \"{}\"", fmt::join(allowed, ", "), base::excerpt(v)));
}

void Reader::reject_unknown(const std::function<std::string(const std::string&)>& hint) const {
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    if (known_.count(it.key())) continue;
    const std::string why = hint ? hint(it.key()) : std::string();
    if (!why.empty()) fail(it.key(), why);
    const std::vector<std::string> known(known_.begin(), known_.end());
    const std::string near = nearest(it.key(), known);
    fail(it.key(), fmt::format("unknown key{}; known keys here: {}",
                               near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near),
                               fmt::join(known_, ", ")));
  }
}

void Reader::missing(const std::string& k, const std::string& expected) const {
  // A key given but not yet read that is near `k` is most likely `k` misspelled: name it, since
  // "k is required" would send the reader looking for a key they believe they wrote.
  std::vector<std::string> unread;
  for (auto it = j_.begin(); it != j_.end(); ++it)
    if (!known_.count(it.key()) && it.key() != k) unread.push_back(it.key());
  for (const auto& u : unread)
    if (nearest(k, {u}) == u)
      fail(u, fmt::format("unknown key; did you mean '{}'? ('{}' is required: {})", k, key(k),
                          expected));
  fail(k, "is required: " + expected);
}

}  // namespace ppsim::config
