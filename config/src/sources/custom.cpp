// `custom`: hand-written op lists, one string per rank. Lists that write communication out run as
// written; lists of compute ops only are lowered with comm.style like a generator's. Optional
// routes for programs whose microbatches take different paths (DualPipe).
#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "../param_reader.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/generator.hpp"
#include "ppsim/schedules/lowering.hpp"

namespace ppsim::config::sources {

namespace {

// The text form's positionless errors (line 0) are about the whole list; the others name a line.
class CustomSpec : public ProgramSpec {
 public:
  // `array`: one element per rank (errors name schedule.ops[rank]); else one text, a line per rank.
  CustomSpec(std::string text, bool array, std::optional<schedules::Routes> routes)
      : text_(std::move(text)),
        array_(array),
        routes_(std::move(routes)),
        written_comm_(writes_comm(text_)) {}
  schedules::Program build(const schedules::LoweringOptions& lowering,
                           const std::string& source) const override {
    schedules::Program written = parse(source);
    if (written_comm_) return written;
    try {
      return schedules::lower(written, lowering);
    } catch (const schedules::ParameterError& e) {
      throw ConfigError(source, "comm." + e.key(), e.what());
    }
  }
  std::string comm_style(const schedules::LoweringOptions& lowering) const override {
    return written_comm_ ? "custom" : lowering.style;
  }
  bool sweepable() const override { return false; }

  std::optional<schedules::OpLocation> locate(const schedules::Program& built, int rank,
                                              int position) const override {
    if (rank < 0 || rank >= built.ranks() || position < 0) return std::nullopt;
    const auto& ops = built.ops(rank);
    if (static_cast<std::size_t>(position) >= ops.size()) return std::nullopt;
    std::size_t index = static_cast<std::size_t>(position);
    auto place = [&](std::pair<int, int> at) {
      return array_ ? fmt::format("schedule.ops[{}] column {}", rank, at.second)
                    : fmt::format("schedule.ops line {}, column {}", at.first, at.second);
    };
    if (!written_comm_) {
      // The lowering keeps the written ops in their order and only adds comm ops around them.
      index = static_cast<std::size_t>(
          std::count_if(ops.begin(), ops.begin() + position,
                        [](const schedules::Op& op) { return is_written(op.kind); }));
      if (!is_written(ops[static_cast<std::size_t>(position)].kind)) {
        std::string where = "added by comm.style";
        if (const auto before = index > 0 ? find_op(rank, index - 1) : std::nullopt)
          where += ", after the op at " + place(*before);
        else if (const auto after = find_op(rank, 0))
          where += ", before the op at " + place(*after);
        return schedules::OpLocation{where, 0, 0};
      }
    }
    const auto found = find_op(rank, index);
    if (!found) return std::nullopt;
    return schedules::OpLocation{place(*found), array_ ? 0 : found->first, found->second};
  }

 private:
  static bool is_written(schedules::OpKind k) {
    return !schedules::is_comm(k) && k != schedules::OpKind::WAIT;
  }

  // Whether the lists write communication out. Exact for any text that parses: no compute or
  // resource op's spelling holds these words, every comm op's does; comment lines are skipped.
  static bool writes_comm(std::string_view text) {
    std::size_t pos = 0;
    while (pos < text.size()) {
      const auto nl = text.find('\n', pos);
      const std::string_view line =
          text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
      const auto first = line.find_first_not_of(" \t\r");
      if (first != std::string_view::npos && line[first] != '#')
        for (const std::string_view word : {"SEND_", "RECV_", "WAIT"})
          if (line.find(word) != std::string_view::npos) return true;
      if (nl == std::string_view::npos) break;
      pos = nl + 1;
    }
    return false;
  }

  // The line (1-based, comments counted) and column of op `index` of `rank` as written, found the
  // way Program::parse splits the text. The lines are found once, a rank's op columns when first
  // asked for: a report naming many ops of one long line reads it once.
  std::optional<std::pair<int, int>> find_op(int rank, std::size_t index) const {
    const std::lock_guard<std::mutex> lock(cache_mutex_);
    if (!lines_found_) {
      std::size_t pos = 0;
      int line_no = 0;
      while (pos < text_.size()) {
        ++line_no;
        const auto nl = text_.find('\n', pos);
        const std::size_t end = nl == std::string::npos ? text_.size() : nl;
        const std::string_view line = std::string_view(text_).substr(pos, end - pos);
        const auto first = line.find_first_not_of(" \t\r");
        if (first != std::string_view::npos && line[first] != '#')
          rank_lines_.push_back({line_no, pos, end});
        if (nl == std::string::npos) break;
        pos = nl + 1;
      }
      lines_found_ = true;
    }
    if (static_cast<std::size_t>(rank) >= rank_lines_.size()) return std::nullopt;
    const RankLine& at = rank_lines_[static_cast<std::size_t>(rank)];
    auto [it, fresh] = columns_.try_emplace(rank);
    if (fresh) {
      const std::string_view line = std::string_view(text_).substr(at.begin, at.end - at.begin);
      std::size_t start = 0;
      while (start <= line.size()) {
        const auto comma = line.find(',', start);
        const std::string_view field = line.substr(
            start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
        const auto lead = field.find_first_not_of(" \t\r");
        if (lead != std::string_view::npos) it->second.push_back(start + lead + 1);
        if (comma == std::string_view::npos) break;
        start = comma + 1;
      }
    }
    if (index >= it->second.size()) return std::nullopt;
    return std::pair{at.line, static_cast<int>(it->second[index])};
  }

  schedules::Program parse(const std::string& source) const {
    try {
      return schedules::Program::parse(text_, routes_.value_or(schedules::Routes{}));
    } catch (const schedules::ParseError& e) {
      if (e.line() <= 0) throw ConfigError(source, "schedule.ops", e.what());
      if (array_)
        throw ConfigError(source, fmt::format("schedule.ops[{}]", e.line() - 1),
                          fmt::format("column {}: {}", e.column(), e.what()));
      throw ConfigError(source, "schedule.ops",
                        fmt::format("line {} (rank {}), column {}: {}", e.line(),
                                    rank_of_line(e.line()), e.column(), e.what()));
    } catch (const schedules::ParameterError& e) {
      throw ConfigError(source, "schedule." + e.key(), e.what());
    }
  }

  // The rank a line of the text form is (or would be): the op lines before it, comments skipped.
  int rank_of_line(int line) const {
    int rank = 0, at = 1;
    std::size_t pos = 0;
    while (at < line && pos < text_.size()) {
      const auto nl = text_.find('\n', pos);
      const std::string_view raw = std::string_view(text_).substr(
          pos, nl == std::string::npos ? std::string::npos : nl - pos);
      const auto first = raw.find_first_not_of(" \t\r");
      if (first != std::string_view::npos && raw[first] != '#') ++rank;
      if (nl == std::string::npos) break;
      pos = nl + 1;
      ++at;
    }
    return rank;
  }

  std::string text_;
  bool array_;
  std::optional<schedules::Routes> routes_;
  bool written_comm_;  // run as written; otherwise lowered with comm.style

  // For locate(): each rank's line, and the columns of the ops of the ranks asked about.
  struct RankLine {
    int line;
    std::size_t begin, end;
  };
  mutable std::mutex cache_mutex_;
  mutable bool lines_found_ = false;
  mutable std::vector<RankLine> rank_lines_;
  mutable std::unordered_map<int, std::vector<std::size_t>> columns_;
};

std::vector<std::int32_t> int_list(Reader& r, const std::string& key, const nlohmann::json& v) {
  if (!v.is_array() || v.empty())
    r.fail(key,
           fmt::format("expected a non-empty array of integers >= 0, got {}", Reader::describe(v)));
  std::vector<std::int32_t> out;
  for (const auto& x : v) {
    if (!x.is_number_integer() || x.get<long long>() < 0 || x.get<long long>() > 1'000'000'000)
      r.fail(key, fmt::format("expected integers >= 0, got {}", Reader::describe(x)));
    out.push_back(static_cast<std::int32_t>(x.get<long long>()));
  }
  return out;
}

// "routes": [{"stages": [0, 1], "microbatches": [0, 1]}, {"stages": [2, 3], ...}]
schedules::Routes read_routes(Reader& s, const nlohmann::json& v) {
  if (!v.is_array() || v.empty())
    s.fail("routes", "expected an array of {\"stages\": [...], \"microbatches\": [...]}");
  // Every stage is on some route and every microbatch on one, so ids are below the number of
  // entries: bounding them so keeps the tables (routes x stages) as small as the text.
  std::size_t stage_entries = 0, mb_entries = 0;
  for (const auto& one : v) {
    if (one.is_object() && one.contains("stages") && one["stages"].is_array())
      stage_entries += one["stages"].size();
    if (one.is_object() && one.contains("microbatches") && one["microbatches"].is_array())
      mb_entries += one["microbatches"].size();
  }
  constexpr std::size_t kMaxRouteCells = std::size_t{1} << 24;
  std::vector<std::vector<std::int32_t>> paths;
  std::vector<std::int32_t> of_mb;
  int stages = 0;
  for (std::size_t k = 0; k < v.size(); ++k) {
    Reader one(v[k], s.source(), fmt::format("schedule.routes[{}].", k));
    const nlohmann::json* st = one.get("stages");
    const nlohmann::json* mb = one.get("microbatches");
    if (!st) one.missing("stages", "the stages of this route in forward order");
    if (!mb) one.missing("microbatches", "the microbatches that take this route");
    paths.push_back(int_list(one, "stages", *st));
    for (auto x : paths.back()) {
      if (static_cast<std::size_t>(x) >= stage_entries)
        one.fail("stages", fmt::format("stage {} is out of range: the routes name {} stages in "
                                       "all, so stage ids are below {}",
                                       x, stage_entries, stage_entries));
      stages = std::max(stages, x + 1);
    }
    for (std::int32_t m : int_list(one, "microbatches", *mb)) {
      if (static_cast<std::size_t>(m) >= mb_entries)
        one.fail("microbatches",
                 fmt::format("microbatch {} is out of range: the routes list {} microbatches in "
                             "all, so their ids are 0..{}",
                             m, mb_entries, mb_entries - 1));
      if (static_cast<std::size_t>(m) >= of_mb.size())
        of_mb.resize(static_cast<std::size_t>(m) + 1, -1);
      if (of_mb[static_cast<std::size_t>(m)] >= 0)
        one.fail("microbatches", fmt::format("microbatch {} is already on route {}", m,
                                             of_mb[static_cast<std::size_t>(m)]));
      of_mb[static_cast<std::size_t>(m)] = static_cast<std::int32_t>(k);
    }
    one.reject_unknown();
  }
  if (v.size() * static_cast<std::size_t>(stages) > kMaxRouteCells)
    s.fail("routes", fmt::format("{} routes over {} stages are too many: routes x stages is at "
                                 "most {}",
                                 v.size(), stages, kMaxRouteCells));
  for (std::size_t m = 0; m < of_mb.size(); ++m)
    if (of_mb[m] < 0) s.fail("routes", fmt::format("microbatch {} is on no route", m));
  try {
    return schedules::Routes(stages, std::move(paths), std::move(of_mb));
  } catch (const schedules::ParameterError& e) {
    s.fail("routes", e.what());
  }
}

std::shared_ptr<const ProgramSpec> read(Reader& s, const std::string&) {
  const nlohmann::json* ops = s.get("ops");
  if (!ops || !(ops->is_array() || ops->is_string()))
    s.fail("ops",
           "kind \"custom\" needs ops: an array with one op string per rank (\"0F0,0F1,...\")");
  std::string text;
  const bool array = ops->is_array();
  if (!array) {
    text = ops->get<std::string>();
  } else {
    // One element is one rank: no element may hide a rank or add one.
    for (std::size_t i = 0; i < ops->size(); ++i) {
      const std::string key = fmt::format("ops[{}]", i);
      if (!(*ops)[i].is_string())
        s.fail(key, fmt::format("expected a string of ops, got {}", Reader::describe((*ops)[i])));
      const std::string& line = (*ops)[i].get_ref<const std::string&>();
      const auto first = line.find_first_not_of(" \t\r");
      if (first == std::string::npos)
        s.fail(key, fmt::format("rank {} has no ops: write \"IDLE\" for a rank that runs "
                                "nothing (an empty element is not skipped)",
                                i));
      if (line.find('\n') != std::string::npos)
        s.fail(key,
               "one element is one rank's ops and holds no newline (the one-string form of "
               "ops takes a line per rank)");
      if (line[first] == '#')
        s.fail(key,
               "one element is one rank's ops: '#' comments belong to the one-string form "
               "of ops");
      text += line;
      text += '\n';
    }
  }
  std::optional<schedules::Routes> routes;
  if (const nlohmann::json* r = s.get("routes")) routes = read_routes(s, *r);
  s.reject_unknown([](const std::string& key) -> std::string {
    std::vector<std::string> users;
    for (const auto& g : schedules::Registry::instance().all())
      if (schedules::find_param(g.params, key)) users.push_back(g.name);
    if (users.empty()) return "";
    return not_a_parameter_of("schedule", "custom", users) +
           ": a custom schedule takes ops (and routes), its op lists say the rest";
  });
  return std::make_shared<CustomSpec>(std::move(text), array, std::move(routes));
}

}  // namespace

void register_custom(SourceRegistry& registry) {
  registry.add({"custom",
                "your own op lists: schedule.ops, one string per rank; compute-only lists are "
                "lowered by comm.style",
                [](std::string_view kind) { return kind == "custom"; }, read});
}

}  // namespace ppsim::config::sources
