#include "ppsim/schedules/program.hpp"

#include "ppsim/base/excerpt.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <functional>
#include <map>

#include "ppsim/base/huge_pages.hpp"
#include "ppsim/schedules/error.hpp"

namespace ppsim::schedules {

Program::Program(int microbatches, std::vector<StagePlace> placement, Routes routes)
    : microbatches_(microbatches), placement_(std::move(placement)), routes_(std::move(routes)) {
  if (routes_.stages() == 0 && routes_.is_linear()) routes_ = Routes::linear(stages());
  if (routes_.stages() != stages())
    throw ParameterError("routes", fmt::format("the routes are over {} stages, the program has {}",
                                               routes_.stages(), stages()));
  int ranks = 0;
  for (const auto& p : placement_) {
    ranks = std::max(ranks, p.rank + 1);
    chunks_ = std::max(chunks_, p.chunk + 1);
  }
  ops_.resize(static_cast<std::size_t>(ranks));
  wait_pool_.resize(static_cast<std::size_t>(ranks));
  part_pool_.resize(static_cast<std::size_t>(ranks));
  chunks_on_.assign(static_cast<std::size_t>(ranks), 0);
  for (const auto& p : placement_)
    if (p.rank >= 0) ++chunks_on_[static_cast<std::size_t>(p.rank)];
}

std::size_t Program::total_ops() const {
  std::size_t n = 0;
  for (const auto& list : ops_) n += list.size();
  return n;
}

namespace {
constexpr std::size_t kMaxListSize = 0xffff;  // Op::list_size is 16 bits
}

void check_wait_size(std::size_t ids) {
  if (ids > kMaxListSize)
    throw ParameterError(
        "wait", fmt::format("a WAIT holds at most {} request ids, got {}", kMaxListSize, ids));
}

Op Program::pool_composite(int rank, OpKind kind, std::span<const Op> parts) {
  if (parts.size() != 2)  // OVERLAP_F_B, the one composite kind, pairs an F with a B
    throw ParameterError("ops",
                         fmt::format("{} holds two ops, got {}", to_string(kind), parts.size()));
  auto& pool = part_pool_[static_cast<std::size_t>(rank)];
  Op op;
  op.kind = kind;
  op.list_begin = static_cast<std::int32_t>(pool.size());
  op.list_size = static_cast<std::uint16_t>(parts.size());
  pool.insert(pool.end(), parts.begin(), parts.end());
  return op;
}

void Program::push_wait(int rank, std::span<const std::int32_t> ids) {
  push(rank, append_wait(wait_pool_[static_cast<std::size_t>(rank)], ids));
}

void Program::push_composite(int rank, OpKind kind, std::span<const Op> parts) {
  push(rank, pool_composite(rank, kind, parts));
}

void Program::set_ops(int rank, std::span<const Op> ops, std::span<const std::int32_t> wait_ids) {
  // The old storage goes first, so an arena can reuse it.
  OpList& list = this->ops(rank);
  list = OpList(list.get_allocator());
  list.reserve(ops.size());
  list.assign(ops.begin(), ops.end());
  WaitIds& pool = wait_pool_[static_cast<std::size_t>(rank)];
  pool = WaitIds(pool.get_allocator());
  pool.reserve(wait_ids.size());
  pool.assign(wait_ids.begin(), wait_ids.end());
}

namespace {
// Below this a program stays on the heap: a few huge pages save little, and a transient program's
// heap pages are reused by what comes after it (an arena's go back to the kernel).
constexpr std::size_t kArenaMinBytes = std::size_t{8} << 20;
}  // namespace

void Program::reserve(int rank, std::size_t n) {
  OpList& list = ops(rank);
  if (list.capacity() == 0 && !list.get_allocator().arena())
    use_arena(n * sizeof(Op) * static_cast<std::size_t>(ranks()));  // nothing under 8 MiB
  // Generators reserve each rank's count (dualpipe, dualpipev and the torch CSV import a bound: 16
  // resident bytes per op they do not write).
  base::reserve_prefaulted(list, n);
}

void Program::use_arena(std::size_t capacity_hint) {
  if (capacity_hint < kArenaMinBytes) return;
  const ArenaAllocator<Op> alloc(std::make_shared<OpArena>(capacity_hint));
  for (std::size_t r = 0; r < ops_.size(); ++r) {
    if (ops_[r].empty()) ops_[r] = OpList(alloc);
    if (wait_pool_[r].empty()) wait_pool_[r] = WaitIds(alloc);
  }
}

std::string Program::op_text(int rank, const Op& op) const {
  if (op.kind == OpKind::WAIT) return fmt::format("WAIT({})", fmt::join(wait_ids(rank, op), ";"));
  if (is_composite(op.kind)) {
    std::vector<std::string> parts;
    for (const Op& p : this->parts(rank, op)) parts.push_back(schedules::op_text(p));
    return fmt::format("({}){}", fmt::join(parts, ";"), to_string(op.kind));
  }
  return schedules::op_text(op);
}

std::string Program::to_text() const {
  std::string out;
  for (int r = 0; r < ranks(); ++r) {
    if (ops(r).empty()) {  // a blank line would not be a rank
      out += "IDLE\n";
      continue;
    }
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

// Stage, microbatch and request ids are below this (the bound of integers in configs).
constexpr int kMaxIndex = 1'000'000'000;
// The line that stands for a rank with no ops.
constexpr std::string_view kIdle = "IDLE";

// A decimal id >= 0: false when `s` is not one; `fail` when it is one but too large.
template <typename Fail>
bool parse_int(std::string_view s, int& out, std::string_view what, const Fail& fail) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string_view::npos) return false;
  const std::string_view digits = s.substr(std::min(s.find_first_not_of('0'), s.size() - 1));
  if (digits.size() > 10 || std::stoll(std::string(digits)) >= kMaxIndex)
    throw fail(fmt::format("{} {} is out of range: ids are below {}", what, base::excerpt(s, 20),
                           kMaxIndex));
  out = static_cast<int>(std::stoll(std::string(digits)));
  return true;
}

struct ParsedOp {
  Op op;
  std::vector<std::int32_t> wait_ids;
  std::vector<Op> parts;  // composite ops
};

// `{stage}{KIND}{microbatch}[#request]` or `{stage}{KIND}` for kinds without a microbatch.
Op parse_simple(std::string_view t, const std::function<ParseError(const std::string&)>& fail) {
  std::size_t i = 0;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
  int stage = 0;
  if (!parse_int(t.substr(0, i), stage, "stage", fail)) throw fail("expected a stage number first");
  std::string_view rest = t.substr(i);
  // Longest name first, so that "SEND_F" is not read as "S..." and "RESHARD" not as "R...".
  const OpKindInfo* kind = nullptr;
  std::size_t kind_index = 0;
  for (std::size_t k = 0; k < kOpKindCount; ++k) {
    const OpKindInfo& cand = kOpKinds[k];
    if (cand.cls == OpClass::wait || cand.cls == OpClass::group || cand.composite) continue;
    if (rest.starts_with(cand.name) && (!kind || cand.name.size() > kind->name.size())) {
      kind = &cand;
      kind_index = k;
    }
  }
  if (!kind)
    throw fail(
        "expected F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, UNSHARD, RESHARD, REDUCE_GRAD, "
        "WAIT(...), (...)OVERLAP_F_B, GROUP_START or GROUP_END");
  rest.remove_prefix(kind->name.size());
  Op op;
  op.kind = static_cast<OpKind>(kind_index);
  op.stage = stage;
  if (!kind->microbatch) {
    if (!rest.empty()) throw fail(fmt::format("{} takes no microbatch number", kind->name));
    return op;
  }
  const auto hash = rest.find('#');
  int mb = 0;
  if (!parse_int(rest.substr(0, hash), mb, "microbatch", fail))
    throw fail("expected a microbatch number");
  op.microbatch = mb;
  if (hash != std::string_view::npos) {
    if (!is_comm(op.kind)) throw fail("only SEND/RECV ops take a #request id");
    int req = 0;
    if (!parse_int(rest.substr(hash + 1), req, "request id", fail))
      throw fail("request id must be an integer >= 0");
    op.async = true;
    op.request = req;
  }
  return op;
}

ParsedOp parse_op(const Token& tok, int line) {
  const std::string_view t = tok.text;
  const std::function<ParseError(const std::string&)> fail = [&](const std::string& why) {
    return ParseError(line, tok.column, fmt::format("bad op '{}': {}", base::excerpt(t), why));
  };
  ParsedOp out;
  if (t == kIdle) throw fail("IDLE marks a rank with no ops and stands alone on its line");
  for (const OpKind k : {OpKind::GROUP_START, OpKind::GROUP_END})
    if (t == to_string(k)) {
      out.op = Op::group(k);
      return out;
    }
  if (t.starts_with("WAIT")) {
    if (t.size() < 6 || t[4] != '(' || t.back() != ')') throw fail("expected WAIT(id;id;...)");
    std::string_view body = t.substr(5, t.size() - 6);
    while (!body.empty()) {
      const auto semi = body.find(';');
      int id = 0;
      if (!parse_int(body.substr(0, semi), id, "request id", fail))
        throw fail("request ids must be integers >= 0");
      out.wait_ids.push_back(id);
      if (out.wait_ids.size() > kMaxListSize)
        throw fail(fmt::format("a WAIT holds at most {} request ids", kMaxListSize));
      if (semi == std::string_view::npos) break;
      body.remove_prefix(semi + 1);
      if (body.empty()) throw fail("empty request id");
    }
    if (out.wait_ids.empty()) throw fail("WAIT needs at least one request id");
    out.op.kind = OpKind::WAIT;
    return out;
  }
  if (t.starts_with("(")) {
    const auto close = t.find(')');
    if (close == std::string_view::npos) throw fail("expected (a;b)OVERLAP_F_B");
    const std::string_view kind = t.substr(close + 1);
    if (kind != to_string(OpKind::OVERLAP_F_B))
      throw fail(fmt::format("unknown composite '{}': expected OVERLAP_F_B", base::excerpt(kind)));
    std::string_view body = t.substr(1, close - 1);
    while (true) {
      const auto semi = body.find(';');
      const Op part = parse_simple(body.substr(0, semi), fail);
      out.parts.push_back(part);
      if (semi == std::string_view::npos) break;
      body.remove_prefix(semi + 1);
    }
    // DualPipe's overlapped pair: one forward and one backward (B or I).
    if (out.parts.size() != 2 || out.parts[0].kind != OpKind::F ||
        !is_backward_input(out.parts[1].kind))
      throw fail("OVERLAP_F_B holds a forward and then a backward, e.g. (0F7;7B3)OVERLAP_F_B");
    out.op.kind = OpKind::OVERLAP_F_B;
    return out;
  }
  out.op = parse_simple(t, fail);
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

Program Program::parse(std::string_view text, Routes routes) {
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
    // Comments are skipped; a blank line is an error rather than a rank that silently vanishes
    // (the text's final newline ends its last line and starts none).
    if (trim(raw).empty())
      throw ParseError(line_no, 1,
                       fmt::format("line {} is empty: write IDLE for a rank that runs no ops "
                                   "(a blank line is not a rank)",
                                   line_no));
    if (trim(raw).front() == '#') continue;
    Line line{line_no, {}};
    if (trim(raw) == kIdle) {
      lines.push_back(std::move(line));
      continue;
    }
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
    if (line.ops.empty())
      throw ParseError(line_no, 1, "no ops on this line: write IDLE for a rank that runs no ops");
    lines.push_back(std::move(line));
  }
  if (lines.empty()) throw ParseError(1, 1, "no ranks: expected one line of ops per rank");

  // Infer placement: compute ops decide; comm ops are a fallback for stages with no compute.
  std::map<int, std::pair<int, int>> owner;  // stage -> (rank, line of first sighting)
  int max_stage = -1, max_mb = -1;
  auto sight = [&](int pass, std::size_t r, const Op& op) {
    max_mb = std::max(max_mb, op.microbatch);
    const int stage = op.stage;
    // The stages are those the ops name. A SEND_F from the last one (no next stage) is not a
    // stage more: validation reports it as bad_comm.
    max_stage = std::max(max_stage, stage);
    if (pass == 0 && !is_compute(op.kind)) return;
    if (pass == 1 && owner.count(stage)) return;
    auto [it, inserted] =
        owner.emplace(stage, std::pair<int, int>{static_cast<int>(r), lines[r].number});
    if (!inserted && it->second.first != static_cast<int>(r))
      throw ParseError(
          lines[r].number, 1,
          fmt::format(
              "stage {} has compute ops on rank {} and on rank {}: a stage lives on one rank",
              stage, it->second.first, r));
  };
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t r = 0; r < lines.size(); ++r) {
      for (const auto& p : lines[r].ops) {
        if (p.op.kind == OpKind::WAIT || is_group_marker(p.op.kind)) continue;
        if (is_composite(p.op.kind)) {
          for (const Op& part : p.parts) sight(pass, r, part);
        } else {
          sight(pass, r, p.op);
        }
      }
    }
  }
  if (routes.stages() != 0) {
    if (max_stage >= routes.stages())
      throw ParseError(0, 0,
                       fmt::format("the ops name stage {}, but the routes are over stages 0..{}",
                                   max_stage, routes.stages() - 1));
    max_stage = routes.stages() - 1;
  }
  // Every stage up to the largest must appear: checked on the map, before sizing anything by
  // the largest stage id.
  if (owner.size() != static_cast<std::size_t>(max_stage + 1)) {
    int missing = 0;
    for (const auto& [s, where] : owner) {
      if (s != missing) break;
      ++missing;
    }
    throw ParseError(0, 0,
                     fmt::format("stage {} appears in no op: cannot place it on a rank (the ops "
                                 "name stages up to {})",
                                 missing, max_stage));
  }
  std::vector<StagePlace> placement(static_cast<std::size_t>(max_stage + 1));
  std::vector<int> chunk_count(lines.size(), 0);
  for (int s = 0; s <= max_stage; ++s) {
    auto it = owner.find(s);
    const int r = it->second.first;
    placement[static_cast<std::size_t>(s)] = {r, chunk_count[static_cast<std::size_t>(r)]++};
  }
  // A rank that owns no stage still needs to exist in the program.
  Program program(max_mb + 1, std::move(placement), std::move(routes));
  program.ensure_ranks(static_cast<int>(lines.size()));
  for (std::size_t r = 0; r < lines.size(); ++r) {
    for (auto& p : lines[r].ops) {
      if (p.op.kind == OpKind::WAIT) {
        program.push_wait(static_cast<int>(r), p.wait_ids);
      } else if (is_composite(p.op.kind)) {
        program.push_composite(static_cast<int>(r), p.op.kind, p.parts);
      } else {
        program.push(static_cast<int>(r), p.op);
      }
    }
  }
  return program;
}

void Program::ensure_ranks(int ranks) {
  if (this->ranks() >= ranks) return;
  const auto n = static_cast<std::size_t>(ranks);
  ops_.resize(n);
  wait_pool_.resize(n);
  part_pool_.resize(n);
}

}  // namespace ppsim::schedules
