#include "ppsim/schedules/semantics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace ppsim::schedules {

std::string op_label(const Program& program, int rank, const Op& op) {
  if (op.kind != OpKind::WAIT) return program.op_text(rank, op);
  const auto ids = program.wait_ids(rank, op);
  if (ids.size() <= kLabelIds) return program.op_text(rank, op);
  std::string s = "WAIT(";
  for (std::size_t i = 0; i < kLabelIds; ++i) s += fmt::format("{};", ids[i]);
  return s + fmt::format("\u2026 {} ids)", ids.size());
}

namespace {
std::uint64_t key(int stage, int microbatch) {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(stage)) << 32 |
         static_cast<std::uint32_t>(microbatch);
}
}  // namespace

void Semantics::index_cells() const {
  // A generated schedule has at least two compute ops per cell; a grid up to this size costs a
  // few table entries per op and keeps the hot path free of lookups.
  const std::size_t ops = p_.total_ops();
  if (dense_cells() <= 2 * ops + 1024) {
    mode_ = Mode::dense;
    return;
  }
  const int S = p_.stages(), M = p_.microbatches();
  std::vector<std::uint64_t> keys;
  keys.reserve(3 * ops);
  auto add = [&](int stage, int mb) {
    if (stage >= 0 && stage < S) keys.push_back(key(stage, mb));
  };
  auto add_op = [&](const Op& op) {
    if (!has_microbatch(op.kind) || op.microbatch < 0 || op.microbatch >= M) return;
    if (op.stage < 0 || op.stage >= S) return;
    add(op.stage, op.microbatch);
    add(next_stage(op.stage, op.microbatch), op.microbatch);
    add(prev_stage(op.stage, op.microbatch), op.microbatch);
  };
  for (int r = 0; r < p_.ranks(); ++r)
    for (const Op& op : p_.ops(r)) {
      if (is_composite(op.kind))
        for (const Op& part : p_.parts(r, op)) add_op(part);
      else
        add_op(op);
    }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  keys.shrink_to_fit();
  keys_ = std::make_shared<const std::vector<std::uint64_t>>(std::move(keys));
  mode_ = Mode::sparse;
}

std::size_t Semantics::sparse_cell_index(int stage, int microbatch) const {
  if (mode_ == Mode::unknown) {
    index_cells();
    if (mode_ == Mode::dense) return cell_index(stage, microbatch);
  }
  const auto& keys = *keys_;
  const std::uint64_t k = key(stage, microbatch);
  const auto it = std::lower_bound(keys.begin(), keys.end(), k);
  if (it == keys.end() || *it != k)
    throw std::logic_error("Semantics: a cell outside the program was looked up");
  return static_cast<std::size_t>(it - keys.begin());
}

bool Semantics::has_cell(int stage, int microbatch) const {
  if (dense()) return true;
  return std::binary_search(keys_->begin(), keys_->end(), key(stage, microbatch));
}

std::pair<int, int> Semantics::cell_at(std::size_t index) const {
  if (dense()) {
    const auto M = static_cast<std::size_t>(p_.microbatches());
    return {static_cast<int>(index / M), static_cast<int>(index % M)};
  }
  const std::uint64_t k = (*keys_)[index];
  return {static_cast<int>(k >> 32), static_cast<int>(static_cast<std::uint32_t>(k))};
}

}  // namespace ppsim::schedules
