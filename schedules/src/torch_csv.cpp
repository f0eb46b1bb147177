#include "ppsim/schedules/torch_csv.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "ppsim/base/excerpt.hpp"
#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/semantics.hpp"

namespace ppsim::schedules {

std::string_view to_string(TorchCsvForm form) {
  return form == TorchCsvForm::compute_only ? "compute_only" : "compute_comms";
}

namespace {

struct Cell {
  std::string text;  // unquoted, trimmed
  int column;        // 1-based cell index
};

// What an action cell holds, for telling the two forms apart.
enum class CellClass { blank, compute, other };

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// PyTorch's action types that carry a microbatch, and those that do not.
constexpr std::string_view kWithMicrobatch[] = {"SEND_F", "RECV_F", "SEND_B", "RECV_B",
                                                "F",      "I",      "B",      "W"};
constexpr std::string_view kWithout[] = {"UNSHARD", "RESHARD", "REDUCE_GRAD"};
constexpr std::string_view kExpected =
    "expected {stage}{F|I|B|W|SEND_F|RECV_F|SEND_B|RECV_B}{microbatch}, "
    "{stage}{UNSHARD|RESHARD|REDUCE_GRAD} or (a;b)OVERLAP_F_B, e.g. 2F0";

// Checks one action `{stage}{TYPE}[{microbatch}]`; returns why it is not one, or "". `compute`
// is set to whether it is F, I, B or W.
std::string check_simple(std::string_view a, bool& compute) {
  if (a.starts_with("WAIT"))
    return "WAIT is ppsim's op, not a PyTorch action: the runtime waits by itself";
  std::size_t i = 0;
  while (i < a.size() && is_digit(a[i])) ++i;
  if (i == 0) return fmt::format("expected a stage number first: {}", kExpected);
  std::string_view rest = a.substr(i);
  std::size_t j = 0;
  while (j < rest.size() && !is_digit(rest[j])) ++j;
  const std::string_view type = rest.substr(0, j), mb = rest.substr(j);
  for (std::string_view t : kWithout) {
    if (type != t) continue;
    if (!mb.empty()) return fmt::format("{} takes no microbatch number", t);
    compute = false;
    return "";
  }
  for (std::string_view t : kWithMicrobatch) {
    if (type != t) continue;
    if (mb.empty()) return fmt::format("expected a microbatch number after {}", t);
    if (mb.find_first_not_of("0123456789") != std::string_view::npos)
      return fmt::format("expected only digits after {}", t);
    compute = t.size() == 1;
    return "";
  }
  if (type == "BW")
    return "unknown action type 'BW' (older PyTorch spelled a full backward BW; it is now B)";
  return fmt::format("unknown action type '{}': {}", base::excerpt(type, 40), kExpected);
}

// Returns why `a` is not an action, or ""; sets `cls`.
std::string check_action(std::string_view a, CellClass& cls) {
  bool compute = false;
  if (!a.empty() && a.front() == '(') {
    const auto close = a.find(')');
    if (close == std::string_view::npos) return "expected (a;b)OVERLAP_F_B";
    if (a.substr(close + 1) != "OVERLAP_F_B")
      return fmt::format("unknown composite '{}': expected OVERLAP_F_B",
                         base::excerpt(a.substr(close + 1), 40));
    const std::string_view body = a.substr(1, close - 1);
    const auto semi = body.find(';');
    if (semi == std::string_view::npos || body.find(';', semi + 1) != std::string_view::npos)
      return "OVERLAP_F_B holds two actions, e.g. (0F7;7B3)OVERLAP_F_B";
    for (std::string_view part : {body.substr(0, semi), body.substr(semi + 1)}) {
      if (std::string why = check_simple(part, compute); !why.empty())
        return fmt::format("in '{}': {}", base::excerpt(part, 40), why);
      if (!compute) return "OVERLAP_F_B holds compute actions (F, B, I)";
    }
    cls = CellClass::compute;
    return "";
  }
  std::string why = check_simple(a, compute);
  cls = compute ? CellClass::compute : CellClass::other;
  return why;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// One row's cells, quoted cells unquoted as Python's csv module does.
std::vector<Cell> split_row(std::string_view line, int row) {
  std::vector<Cell> cells;
  std::size_t pos = 0;
  while (true) {
    const int column = static_cast<int>(cells.size()) + 1;
    auto fail = [&](const std::string& why) { return ParseError(row, column, why); };
    std::string text;
    if (pos < line.size() && line[pos] == '"') {
      std::size_t i = pos + 1;
      while (true) {
        const auto q = line.find('"', i);
        if (q == std::string_view::npos)
          throw fail("unterminated quoted cell (a cell holds one action and no line break)");
        text.append(line.substr(i, q - i));
        if (q + 1 < line.size() && line[q + 1] == '"') {  // "" is one quote
          text += '"';
          i = q + 2;
          continue;
        }
        pos = q + 1;
        break;
      }
      if (pos < line.size() && line[pos] != ',')
        throw fail("text after the closing quote of a quoted cell");
      if (text.size() > kMaxTorchCell)
        throw fail(fmt::format("a cell of {} characters: an action is at most {}", text.size(),
                               kMaxTorchCell));
    } else {
      const auto comma = line.find(',', pos);
      const std::string_view raw =
          line.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
      if (raw.size() > kMaxTorchCell)
        throw fail(fmt::format("a cell of {} characters: an action is at most {}", raw.size(),
                               kMaxTorchCell));
      if (raw.find('"') != std::string_view::npos)
        throw fail(fmt::format("a quote inside an unquoted cell '{}'", base::excerpt(raw, 60)));
      text = std::string(raw);
      pos += raw.size();
    }
    cells.push_back({std::string(trim(text)), column});
    if (pos >= line.size()) break;
    ++pos;                     // the comma
    if (pos == line.size()) {  // a final comma: one more (blank) cell, as Python reads it
      cells.push_back({"", column + 1});
      break;
    }
  }
  return cells;
}

// Text of an op as PyTorch writes it: no request id.
std::string action_text(const Program& p, int rank, const Op& op) {
  if (is_comm(op.kind)) {
    Op plain = op;
    plain.async = false;
    plain.request = -1;
    return op_text(plain);
  }
  return p.op_text(rank, op);
}

}  // namespace

TorchCsv parse_torch_csv(std::string_view text) {
  if (text.empty()) throw ParseError(0, 0, "the file is empty: expected one row per rank");
  std::vector<std::vector<Cell>> rows;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.ends_with('\r')) line.remove_suffix(1);
    rows.push_back(split_row(line, static_cast<int>(rows.size()) + 1));
    // A row without an action is an error (below): the rows after it are not read, so that
    // megabytes of blank lines cost no more than the first of them.
    if (std::ranges::all_of(rows.back(), [](const Cell& c) { return c.text.empty(); })) break;
  }
  TorchCsv out;
  bool comms = false;
  std::optional<std::pair<int, int>> first_blank;  // (row, column)
  std::vector<std::vector<std::string>> actions(rows.size());
  out.steps.resize(rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const int row = static_cast<int>(r) + 1;
    for (const Cell& c : rows[r]) {
      if (c.text.empty()) {
        if (!first_blank) first_blank = {{row, c.column}};
        continue;
      }
      CellClass cls = CellClass::blank;
      if (std::string why = check_action(c.text, cls); !why.empty())
        throw ParseError(row, c.column,
                         fmt::format("bad action '{}': {}", base::excerpt(c.text), why));
      comms = comms || cls == CellClass::other;
      actions[r].push_back(c.text);
      out.steps[r].push_back(c.column - 1);
    }
    if (actions[r].empty())
      throw ParseError(row, 1,
                       "no actions in this row: every rank of a PyTorch schedule runs at least one "
                       "(a blank line is a rank, not skipped)");
    out.cells.push_back(static_cast<std::int32_t>(rows[r].size()));
  }
  out.form = comms ? TorchCsvForm::compute_comms : TorchCsvForm::compute_only;
  if (comms && first_blank)
    throw ParseError(first_blank->first, first_blank->second,
                     "a blank cell in a compute_comms schedule (it has SEND/RECV, UNSHARD, RESHARD "
                     "or REDUCE_GRAD cells): PyTorch's runtime takes no idle steps there");
  // The op-list text form reads the actions (placement, routes, id limits); its columns are
  // mapped back to cells.
  std::string joined;
  std::vector<std::vector<int>> starts(rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r) {
    std::size_t at = 0;
    for (std::size_t k = 0; k < actions[r].size(); ++k) {
      if (k > 0) {
        joined += ',';
        ++at;
      }
      starts[r].push_back(static_cast<int>(at) + 1);
      joined += actions[r][k];
      at += actions[r][k].size();
    }
    joined += '\n';
  }
  try {
    out.program = Program::parse(joined);
  } catch (const ParseError& e) {
    if (e.line() <= 0) throw;
    const auto r = static_cast<std::size_t>(e.line() - 1);
    const auto& s = starts[r];
    const auto k = static_cast<std::size_t>(std::upper_bound(s.begin(), s.end(), e.column()) -
                                            s.begin() - (s.empty() ? 0 : 1));
    const int cell = k < out.steps[r].size() ? out.steps[r][k] + 1 : 1;
    throw ParseError(e.line(), cell, e.what());
  }
  return out;
}

std::string write_torch_csv(const Program& program, TorchCsvForm form,
                            const std::vector<std::vector<std::int32_t>>& steps,
                            const std::vector<std::int32_t>& cells, std::string_view line_end) {
  // A CSV names stages only: a microbatch's next stage is always the next id, so DualPipe's
  // second pipeline (stages in the other order) would be read back as something else.
  if (program.routes().count() > 1)
    throw ParameterError("routes",
                         fmt::format("the program has {} routes (DualPipe's two pipelines); "
                                     "PyTorch's schedule CSV can only say one route through the "
                                     "stages in order",
                                     program.routes().count()));
  std::string out;
  for (int r = 0; r < program.ranks(); ++r) {
    std::vector<std::string> row;
    for (const Op& op : program.ops(r)) {
      if (op.kind == OpKind::WAIT) continue;
      if (form == TorchCsvForm::compute_only && !is_compute(op.kind)) continue;
      row.push_back(action_text(program, r, op));
    }
    if (row.empty())
      throw ParameterError(
          "ranks", fmt::format("rank {} has no {} to write: a PyTorch schedule "
                               "has at least one action per rank",
                               r, form == TorchCsvForm::compute_only ? "compute op" : "op"));
    const auto ru = static_cast<std::size_t>(r);
    // Blank cells back where they were, when the steps fit these ops.
    if (ru < steps.size() && steps[ru].size() == row.size() &&
        std::is_sorted(steps[ru].begin(), steps[ru].end()) &&
        std::adjacent_find(steps[ru].begin(), steps[ru].end()) == steps[ru].end() &&
        steps[ru].front() >= 0) {
      std::vector<std::string> placed(static_cast<std::size_t>(steps[ru].back()) + 1);
      for (std::size_t k = 0; k < row.size(); ++k)
        placed[static_cast<std::size_t>(steps[ru][k])] = std::move(row[k]);
      row = std::move(placed);
    }
    if (ru < cells.size() && static_cast<std::size_t>(cells[ru]) > row.size())
      row.resize(static_cast<std::size_t>(cells[ru]));
    out += fmt::format("{}", fmt::join(row, ","));
    out += line_end;
  }
  return out;
}

Program torch_runtime(const Program& comms) {
  const Semantics sem(comms);
  Program out(comms.microbatches(), comms.placement(), comms.routes());
  out.ensure_ranks(comms.ranks());
  auto key = [](const Op& op) {
    return (static_cast<std::uint64_t>(op.kind) << 60) |
           (static_cast<std::uint64_t>(op.stage) << 30) | static_cast<std::uint64_t>(op.microbatch);
  };
  for (int r = 0; r < comms.ranks(); ++r) {
    std::int32_t next = 0;
    std::unordered_map<std::uint64_t, std::int32_t> recvs;  // posted, not yet waited
    std::vector<std::int32_t> sends, ids;
    out.reserve(r, comms.ops(r).size() * 2);
    for (const Op& op : comms.ops(r)) {
      if (is_comm(op.kind)) {
        Op posted = op;
        posted.async = true;
        posted.request = next++;
        if (is_send(op.kind))
          sends.push_back(posted.request);
        else
          recvs[key(op)] = posted.request;
        out.push(r, posted);
      } else if (op.kind == OpKind::WAIT) {
        continue;  // the runtime decides its waits
      } else if (is_compute(op.kind)) {
        // The runtime waits for a receive right before the compute op that reads it.
        sem.for_each_part(r, op, [&](const Op& part) {
          if (auto need = sem.input_recv(part))
            if (auto it = recvs.find(key(*need)); it != recvs.end()) {
              ids.push_back(it->second);
              recvs.erase(it);
            }
        });
        if (!ids.empty()) {
          std::sort(ids.begin(), ids.end());
          out.push_wait(r, ids);
          ids.clear();
        }
        if (is_composite(op.kind))
          out.push_composite(r, op.kind, comms.parts(r, op));
        else
          out.push(r, op);
      } else {
        out.push(r, op);
      }
    }
    // Sends are waited once, at the end of the step.
    if (!sends.empty()) out.push_wait(r, sends);
  }
  return out;
}

}  // namespace ppsim::schedules
