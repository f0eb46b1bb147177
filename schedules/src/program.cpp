#include "ppsim/schedules/program.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>

#include "ppsim/schedules/error.hpp"

namespace ppsim::schedules {

Program::Program(int microbatches, std::vector<StagePlace> placement)
    : microbatches_(microbatches), placement_(std::move(placement)) {
  int ranks = 0;
  for (const auto& p : placement_) {
    ranks = std::max(ranks, p.rank + 1);
    chunks_ = std::max(chunks_, p.chunk + 1);
  }
  ops_.resize(static_cast<std::size_t>(ranks));
  wait_pool_.resize(static_cast<std::size_t>(ranks));
}

std::size_t Program::total_ops() const {
  std::size_t n = 0;
  for (const auto& list : ops_) n += list.size();
  return n;
}

void Program::push_wait(int rank, std::span<const std::int32_t> ids) {
  auto& pool = wait_pool_[static_cast<std::size_t>(rank)];
  Op op;
  op.kind = OpKind::WAIT;
  op.request = static_cast<std::int32_t>(pool.size());
  op.wait_count = static_cast<std::uint16_t>(ids.size());
  pool.insert(pool.end(), ids.begin(), ids.end());
  push(rank, op);
}

std::string Program::op_text(int rank, const Op& op) const {
  if (op.kind != OpKind::WAIT) return schedules::op_text(op);
  return fmt::format("WAIT({})", fmt::join(wait_ids(rank, op), ";"));
}

std::string Program::to_text() const {
  std::string out;
  for (int r = 0; r < ranks(); ++r) {
    bool first = true;
    for (const Op& op : ops(r)) {
      if (!first) out += ',';
      out += op_text(r, op);
      first = false;
    }
    out += '\n';
  }
  return out;
}

namespace {

struct Token {
  std::string_view text;
  int column;  // 1-based
};

bool parse_int(std::string_view s, int& out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size() && out >= 0;
}

struct ParsedOp {
  Op op;
  std::vector<std::int32_t> wait_ids;
};

ParsedOp parse_op(const Token& tok, int line) {
  const std::string_view t = tok.text;
  auto fail = [&](const std::string& why) -> ParseError {
    return ParseError(line, tok.column, fmt::format("bad op '{}': {}", t, why));
  };
  ParsedOp out;
  if (t.starts_with("WAIT")) {
    if (t.size() < 6 || t[4] != '(' || t.back() != ')') throw fail("expected WAIT(id;id;...)");
    std::string_view body = t.substr(5, t.size() - 6);
    while (!body.empty()) {
      const auto semi = body.find(';');
      int id = 0;
      if (!parse_int(body.substr(0, semi), id)) throw fail("request ids must be integers >= 0");
      out.wait_ids.push_back(id);
      if (semi == std::string_view::npos) break;
      body.remove_prefix(semi + 1);
      if (body.empty()) throw fail("empty request id");
    }
    if (out.wait_ids.empty()) throw fail("WAIT needs at least one request id");
    out.op.kind = OpKind::WAIT;
    return out;
  }
  std::size_t i = 0;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
  int stage = 0;
  if (!parse_int(t.substr(0, i), stage)) throw fail("expected a stage number first");
  static constexpr std::pair<std::string_view, OpKind> kNames[] = {
      {"SEND_F", OpKind::SEND_F}, {"RECV_F", OpKind::RECV_F},
      {"SEND_B", OpKind::SEND_B}, {"RECV_B", OpKind::RECV_B},
      {"F", OpKind::F},           {"B", OpKind::B},
      {"I", OpKind::I},           {"W", OpKind::W}};
  std::string_view rest = t.substr(i);
  bool found = false;
  for (const auto& [name, kind] : kNames) {
    if (rest.starts_with(name)) {
      out.op.kind = kind;
      rest.remove_prefix(name.size());
      found = true;
      break;
    }
  }
  if (!found) throw fail("expected F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B or WAIT(...)");
  const auto hash = rest.find('#');
  int mb = 0;
  if (!parse_int(rest.substr(0, hash), mb)) throw fail("expected a microbatch number");
  out.op.stage = stage;
  out.op.microbatch = mb;
  if (hash != std::string_view::npos) {
    if (!is_comm(out.op.kind)) throw fail("only SEND/RECV ops take a #request id");
    int req = 0;
    if (!parse_int(rest.substr(hash + 1), req)) throw fail("request id must be an integer >= 0");
    out.op.async = true;
    out.op.request = req;
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

}  // namespace

Program Program::parse(std::string_view text) {
  struct Line {
    int number;
    std::vector<ParsedOp> ops;
  };
  std::vector<Line> lines;
  int line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const auto nl = text.find('\n');
    std::string_view raw = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (trim(raw).empty() || trim(raw).front() == '#') continue;
    Line line{line_no, {}};
    std::size_t pos = 0;
    while (pos <= raw.size()) {
      const auto comma = raw.find(',', pos);
      const auto end = comma == std::string_view::npos ? raw.size() : comma;
      std::string_view field = raw.substr(pos, end - pos);
      auto lead = field.find_first_not_of(" \t\r");
      if (lead == std::string_view::npos) lead = 0;
      Token tok{trim(field), static_cast<int>(pos + lead) + 1};
      if (tok.text.empty()) {
        // A trailing comma or an empty rank (a rank with no ops) is fine; an empty field between
        // ops is not.
        if (comma != std::string_view::npos && !(trim(raw.substr(pos)).empty()))
          throw ParseError(line_no, tok.column, "empty op between commas");
      } else {
        line.ops.push_back(parse_op(tok, line_no));
      }
      if (comma == std::string_view::npos) break;
      pos = comma + 1;
    }
    lines.push_back(std::move(line));
  }
  if (lines.empty()) throw ParseError(1, 1, "no ranks: expected one line of ops per rank");

  // Infer placement: compute ops decide; comm ops are a fallback for stages with no compute.
  std::map<int, std::pair<int, int>> owner;  // stage -> (rank, line of first sighting)
  int max_stage = -1, max_mb = -1;
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t r = 0; r < lines.size(); ++r) {
      for (const auto& p : lines[r].ops) {
        if (p.op.kind == OpKind::WAIT) continue;
        max_mb = std::max(max_mb, p.op.microbatch);
        int stage = p.op.stage;
        max_stage =
            std::max(max_stage,
                     stage + (p.op.kind == OpKind::SEND_F || p.op.kind == OpKind::RECV_B ? 1 : 0));
        if (pass == 0 && !is_compute(p.op.kind)) continue;
        if (pass == 1 && owner.count(stage)) continue;
        auto [it, inserted] =
            owner.emplace(stage, std::pair<int, int>{static_cast<int>(r), lines[r].number});
        if (!inserted && it->second.first != static_cast<int>(r))
          throw ParseError(
              lines[r].number, 1,
              fmt::format(
                  "stage {} has compute ops on rank {} and on rank {}: a stage lives on one rank",
                  stage, it->second.first, r));
      }
    }
  }
  std::vector<StagePlace> placement(static_cast<std::size_t>(max_stage + 1));
  std::vector<int> chunk_count(lines.size(), 0);
  for (int s = 0; s <= max_stage; ++s) {
    auto it = owner.find(s);
    if (it == owner.end())
      throw ParseError(1, 1,
                       fmt::format("stage {} appears in no op: cannot place it on a rank", s));
    const int r = it->second.first;
    placement[static_cast<std::size_t>(s)] = {r, chunk_count[static_cast<std::size_t>(r)]++};
  }
  // A rank that owns no stage still needs to exist in the program.
  Program program(max_mb + 1, std::move(placement));
  if (program.ranks() < static_cast<int>(lines.size())) {
    program.ops_.resize(lines.size());
    program.wait_pool_.resize(lines.size());
  }
  for (std::size_t r = 0; r < lines.size(); ++r) {
    for (auto& p : lines[r].ops) {
      if (p.op.kind == OpKind::WAIT) {
        program.push_wait(static_cast<int>(r), p.wait_ids);
      } else {
        program.push(static_cast<int>(r), p.op);
      }
    }
  }
  return program;
}

}  // namespace ppsim::schedules
