#include "ppsim/schedules/validation.hpp"

#include "ppsim/base/huge_pages.hpp"
#include "ppsim/schedules/rank_blocks.hpp"
#include "ppsim/schedules/semantics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <span>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

namespace ppsim::schedules {

bool has_fatal(const std::vector<Diagnostic>& diagnostics) {
  return std::any_of(diagnostics.begin(), diagnostics.end(),
                     [](const Diagnostic& d) { return d.fatal; });
}

namespace {

constexpr std::size_t kMaxDiagnostics = 1000;
// One int32 per side (send, receive) of each tensor: the op that transfers it and whether that
// op's request is still outstanding. kUnseen: no such op yet; pos >= 0: the op at pos, blocking or
// already waited; ~pos (< 0): the async op at pos, not waited yet (its request id is that op's).
// Half the memory of a state and a position each, and the one int is all a check reads.
constexpr std::int32_t kUnseen = std::numeric_limits<std::int32_t>::min();
constexpr bool outstanding(std::int32_t side) {
  return side < 0 && side != kUnseen;
}
constexpr std::int32_t op_of(std::int32_t side) {
  return side >= 0 ? side : ~side;
}

struct Counts {
  std::uint8_t f = 0, b = 0, i = 0, w = 0;
};

// What validation records per (stage, microbatch) cell and per tensor. Ranks share these tables
// but never an entry: a cell belongs to the rank of its stage, a tensor's send side to the
// sender's rank and its receive side to the receiver's, and an op is only recorded once it is
// known to be on its stage's rank. So ranks can be checked on several threads at once.
struct Tables {
  explicit Tables(const Semantics& sem)
      : counts(base::huge_vector(sem.cell_count(), Counts{})),
        send(base::huge_vector(sem.tensor_count(), kUnseen)),
        recv(base::huge_vector(sem.tensor_count(), kUnseen)) {}
  std::vector<Counts> counts;
  std::vector<std::int32_t> send, recv;  // each tensor's sides, as kUnseen above describes
};

// A posted request, as validation tracks it.
struct Request {
  std::size_t tensor;
  bool send;
  int pos;  // the op that posted it
};

// Request ids of one rank: a dense table indexed by id when the ids are small (as lowering
// numbers them, 0..n-1), else a hash map, so that memory follows the ops and not the largest id.
class RequestTable {
 public:
  explicit RequestTable(std::span<const Op> ops) {
    std::int64_t min_id = 0, max_id = -1;
    for (const Op& op : ops)
      if (is_comm(op.kind) && op.async) {
        min_id = std::min<std::int64_t>(min_id, op.request);
        max_id = std::max<std::int64_t>(max_id, op.request);
      }
    dense_ = min_id >= 0 && max_id < static_cast<std::int64_t>(2 * ops.size() + 64);
    if (dense_) base::assign_huge(slots_, static_cast<std::size_t>(max_id + 1), Slot{});
  }
  // The outstanding request `id`, or nullptr.
  const Request* outstanding(std::int32_t id) const {
    if (dense_) {
      const Slot* s = slot(id);
      return s && s->state == State::outstanding ? &s->req : nullptr;
    }
    const auto it = outstanding_.find(id);
    return it == outstanding_.end() ? nullptr : &it->second;
  }
  bool finished(std::int32_t id) const {
    if (dense_) {
      const Slot* s = slot(id);
      return s && s->state == State::finished;
    }
    return finished_.count(id) > 0;
  }
  bool used(std::int32_t id) const {
    if (dense_) {
      const Slot* s = slot(id);
      return s && s->state != State::none;
    }
    return outstanding_.count(id) > 0 || finished_.count(id) > 0;
  }
  void post(std::int32_t id, Request req) {  // id not used()
    if (dense_) {
      slots_[static_cast<std::size_t>(id)] = {req, State::outstanding};
      ++open_;
    } else {
      outstanding_.emplace(id, req);
    }
  }
  void finish(std::int32_t id) {  // id outstanding()
    if (dense_) {
      slots_[static_cast<std::size_t>(id)].state = State::finished;
      --open_;
    } else {
      outstanding_.erase(id);
      finished_.insert(id);
    }
  }
  // (id, the op that posted it) of every request still outstanding, by id.
  std::vector<std::pair<std::int32_t, int>> left() const {
    std::vector<std::pair<std::int32_t, int>> out;
    if (dense_) {
      if (open_ == 0) return out;
      for (std::size_t id = 0; id < slots_.size(); ++id)
        if (slots_[id].state == State::outstanding)
          out.emplace_back(static_cast<std::int32_t>(id), slots_[id].req.pos);
      return out;
    }
    for (const auto& [id, req] : outstanding_) out.emplace_back(id, req.pos);
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  enum class State : std::uint8_t { none, outstanding, finished };
  struct Slot {
    Request req{};
    State state = State::none;
  };
  const Slot* slot(std::int32_t id) const {
    return id >= 0 && static_cast<std::size_t>(id) < slots_.size()
               ? &slots_[static_cast<std::size_t>(id)]
               : nullptr;
  }
  bool dense_ = false;
  std::size_t open_ = 0;
  std::vector<Slot> slots_;
  std::unordered_map<std::int32_t, Request> outstanding_;
  std::unordered_set<std::int32_t> finished_;
};

// Checks ranks into its own list of diagnostics; `absorb` appends another checker's list as if
// its ranks had been checked here, after this one's.
class Validator {
 public:
  Validator(const Program& p, const ValidateOptions& o, const Semantics& sem, Tables& tables)
      : p_(p),
        o_(o),
        sem_(sem),
        S_(p.stages()),
        M_(p.microbatches()),
        counts_(tables.counts),
        send_(tables.send),
        recv_(tables.recv) {}

  void check_ranks(int first, int end) {
    for (int r = first; r < end; ++r) check_rank(r);
  }
  void absorb(Validator& other) {
    for (Diagnostic& d : other.out_) {
      if (full())
        ++truncated_;
      else
        out_.push_back(std::move(d));
    }
    truncated_ += other.truncated_;
  }
  std::vector<Diagnostic> finish() {
    check_totals();
    if (truncated_ > 0)
      out_.push_back({"too_many_diagnostics", -1, -1, "",
                      fmt::format("{} more diagnostics were not listed", truncated_), false});
    return std::move(out_);
  }

 private:
  std::size_t cell(int stage, int mb) const { return sem_.cell_index(stage, mb); }
  std::size_t tensor_index(const Op& comm_op) const {
    return sem_.tensor_index(sem_.tensor_of(comm_op));
  }

  bool full() const { return out_.size() >= kMaxDiagnostics; }
  // `message` is a string or a callable making one: past the cap nothing is formatted.
  template <typename Message>
  void report(std::string_view kind, int rank, int pos, Message&& message, bool fatal) {
    if (full()) {
      ++truncated_;
      return;
    }
    std::string text =
        pos >= 0 ? op_label(p_, rank, p_.ops(rank)[static_cast<std::size_t>(pos)]) : "";
    std::string where = pos >= 0 ? fmt::format("rank {} op {} ({}): ", rank, pos, text)
                                 : (rank >= 0 ? fmt::format("rank {}: ", rank) : "");
    std::string m;
    if constexpr (std::is_invocable_v<Message>)
      m = message();
    else
      m = std::string(message);
    out_.push_back({std::string(kind), rank, pos, std::move(text), where + m, fatal});
  }

  // Range, placement and route of a plain op; false when it cannot be checked further.
  bool check_place(int r, int pos, const Op& op) {
    const bool mb = has_microbatch(op.kind);
    if (op.stage < 0 || op.stage >= S_ || (mb && (op.microbatch < 0 || op.microbatch >= M_))) {
      report(
          "out_of_range", r, pos,
          [&] {
            return mb ? fmt::format("stage must be in [0, {}) and microbatch in [0, {})", S_, M_)
                      : fmt::format("stage must be in [0, {})", S_);
          },
          true);
      return false;
    }
    if (p_.rank_of(op.stage) != r) {
      report(
          "wrong_rank", r, pos,
          [&] { return fmt::format("stage {} lives on rank {}", op.stage, p_.rank_of(op.stage)); },
          true);
      return false;
    }
    if (mb && !p_.routes().on_route(op.stage, op.microbatch)) {
      report(
          "off_route", r, pos,
          [&] {
            return fmt::format("microbatch {} does not pass through stage {} (route {})",
                               op.microbatch, op.stage, p_.routes().route_of(op.microbatch));
          },
          true);
      return false;
    }
    if (is_comm(op.kind)) {
      const int peer_stage = sem_.peer_stage(op);
      const bool towards_next = op.kind == OpKind::SEND_F || op.kind == OpKind::RECV_B;
      if (peer_stage < 0) {
        report(
            "bad_comm", r, pos,
            [&] {
              return fmt::format("stage {} has no {} neighbour for microbatch {}", op.stage,
                                 towards_next ? "next" : "previous", op.microbatch);
            },
            true);
        return false;
      }
      if (p_.rank_of(peer_stage) == r) {
        report(
            "bad_comm", r, pos,
            [&] {
              return fmt::format(
                  "the neighbouring stage is on the same rank {}: no communication is needed", r);
            },
            true);
        return false;
      }
    }
    return true;
  }

  // The request id of an outstanding side recorded by rank r: its op's.
  std::int32_t request_at(int r, std::int32_t side) const {
    return p_.ops(r)[static_cast<std::size_t>(op_of(side))].request;
  }

  // A compute op reads a tensor received from another rank: the receive must come first and, if
  // asynchronous, be waited.
  void check_input(int r, int pos, std::size_t tensor, std::string_view what) {
    const std::int32_t s = recv_[tensor];
    if (s == kUnseen)
      report(
          "missing_receive", r, pos,
          [&] {
            return fmt::format("needs {} from another rank but no receive precedes it", what);
          },
          false);
    else if (outstanding(s))
      report(
          "read_before_wait", r, pos,
          [&] {
            return fmt::format("reads {} while its receive (request #{}) has not been waited", what,
                               request_at(r, s));
          },
          false);
  }

  void check_compute(int r, int pos, const Op& op) {
    const int s = op.stage, m = op.microbatch;
    Counts& c = counts_[cell(s, m)];
    const int local = sem_.local_producer_stage(op);
    const auto recv = sem_.input_recv(op);
    switch (op.kind) {
      case OpKind::F:
        if (local >= 0 && counts_[cell(local, m)].f == 0)
          report(
              "order", r, pos,
              [&] { return fmt::format("runs before {}F{} on the same rank", local, m); }, true);
        if (recv) check_input(r, pos, tensor_index(*recv), "its activation");
        ++c.f;
        break;
      case OpKind::B:
      case OpKind::I: {
        if (c.f == 0)
          report(
              "order", r, pos, [&] { return fmt::format("runs before {}F{}", s, m); }, true);
        if (local >= 0 && counts_[cell(local, m)].b + counts_[cell(local, m)].i == 0)
          report(
              "order", r, pos,
              [&] {
                return fmt::format("runs before the backward of stage {} on the same rank", local);
              },
              true);
        if (recv) check_input(r, pos, tensor_index(*recv), "its output gradient");
        // The backward frees the forward's output buffer: its send must be complete.
        if (const auto sent = o_.send_buffers_released_early ? std::nullopt : sem_.freed_send(op)) {
          const std::int32_t st = send_[tensor_index(*sent)];
          if (outstanding(st))
            report(
                "buffer_released_before_wait", r, pos,
                [&] {
                  return fmt::format(
                      "frees the output of {}F{} while its send (request #{}) is not "
                      "waited: Gloo aborts with \"Cannot lock pointer to unbound buffer\"",
                      s, m, request_at(r, st));
                },
                false);
        }
        ++(op.kind == OpKind::B ? c.b : c.i);
        break;
      }
      case OpKind::W:
        if (c.i == 0)
          report(
              "order", r, pos, [&] { return fmt::format("runs before {}I{}", s, m); }, true);
        ++c.w;
        break;
      default:
        break;
    }
  }

  void check_rank(int r) {
    const auto& ops = p_.ops(r);
    RequestTable requests(ops);
    int group_depth = 0, group_start = -1;  // groups nest as NCCL's do: the outermost one counts
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      const int pos = static_cast<int>(i);
      if (is_group_marker(op.kind)) {
        if (op.kind == OpKind::GROUP_START) {
          if (group_depth++ == 0) group_start = pos;
        } else if (group_depth == 0) {
          report("unbalanced_group", r, pos, "GROUP_END without an open GROUP_START", true);
        } else {
          --group_depth;
        }
        continue;
      }
      // NCCL launches a group's kernels at its GROUP_END: waiting inside the group waits for ops
      // that have not started (a hang on NCCL, whatever the peer does).
      if (group_depth > 0 && (op.kind == OpKind::WAIT || (is_comm(op.kind) && !op.async)))
        report(
            "blocking_in_group", r, pos,
            [&] {
              return fmt::format(
                  "{} inside the group opened at op {}: the group's ops launch only at its "
                  "GROUP_END, so this waits for ops that never start (NCCL hangs); use async "
                  "ops in the group and WAIT after GROUP_END",
                  op.kind == OpKind::WAIT ? "a WAIT" : "a blocking send or receive", group_start);
            },
            true);
      if (op.kind == OpKind::WAIT) {
        for (std::int32_t id : p_.wait_ids(r, op)) {
          const Request* req = requests.outstanding(id);
          if (!req) {
            const bool finished = requests.finished(id);
            report(
                finished ? "double_wait" : "unknown_request", r, pos,
                [&] {
                  return finished
                             ? fmt::format("request #{} was already waited", id)
                             : fmt::format("request #{} was never posted before this WAIT", id);
                },
                true);
            continue;
          }
          (req->send ? send_ : recv_)[req->tensor] = req->pos;
          requests.finish(id);
        }
        continue;
      }
      if (is_composite(op.kind)) {
        for (const Op& part : p_.parts(r, op))
          if (check_place(r, pos, part)) check_compute(r, pos, part);
        continue;
      }
      if (!check_place(r, pos, op)) continue;
      if (info(op.kind).cls == OpClass::resource) continue;
      if (is_compute(op.kind)) {
        check_compute(r, pos, op);
        continue;
      }
      const int s = op.stage, m = op.microbatch;
      Counts& c = counts_[cell(s, m)];
      switch (op.kind) {
        case OpKind::SEND_F:
        case OpKind::SEND_B:
        case OpKind::RECV_F:
        case OpKind::RECV_B: {
          const std::size_t t = tensor_index(op);
          const bool send = is_send(op.kind);
          std::int32_t& side = (send ? send_ : recv_)[t];
          if (side != kUnseen) {
            report("duplicate_comm", r, pos,
                   "the same tensor is already transferred by an earlier op", true);
            break;
          }
          if (op.kind == OpKind::SEND_F && c.f == 0)
            report(
                "order", r, pos,
                [&] { return fmt::format("sends the output of {}F{} before it runs", s, m); },
                true);
          if (op.kind == OpKind::SEND_B && c.b + c.i == 0)
            report(
                "order", r, pos,
                [&] {
                  return fmt::format(
                      "sends the input gradient of stage {} before its backward runs", s);
                },
                true);
          side = pos;  // an unmatched one is reported at its op
          if (op.async) {
            if (requests.used(op.request)) {
              report(
                  "duplicate_request", r, pos,
                  [&] {
                    return fmt::format("request id #{} is used twice on rank {}", op.request, r);
                  },
                  true);
              break;
            }
            requests.post(op.request, Request{t, send, pos});
            side = ~pos;
          }
          break;
        }
        default:
          break;
      }
    }
    if (group_depth > 0)
      report(
          "unbalanced_group", r, group_start,
          [&] {
            return fmt::format(
                "GROUP_START is never closed: {} GROUP_END{} missing before the "
                "end of the rank",
                group_depth, group_depth > 1 ? "s are" : " is");
          },
          true);
    for (const auto& entry : requests.left()) {
      const std::int32_t id = entry.first;  // named: clang 14 cannot capture a structured binding
      report(
          "never_waited", r, entry.second,
          [&] { return fmt::format("request #{} is never waited before the program ends", id); },
          false);
    }
  }

  // Every (stage, microbatch) on a route must be computed once and its tensors sent and received
  // alike. Only the cells the program touches are visited one by one; a cell it never touches
  // gives exactly two missing_compute diagnostics, listed while there is room and counted after.
  void check_totals() {
    const std::size_t cells = sem_.cell_count();
    std::uint64_t absent_listed = 0, present_on_route = 0;
    std::size_t i = 0;
    for (int s = 0; s < S_; ++s) {
      int m = 0;  // the next microbatch of stage s not yet visited
      for (; i < cells && sem_.cell_at(i).first == s; ++i) {
        const int present = sem_.cell_at(i).second;
        absent_listed += list_absent(s, m, present);
        m = present + 1;
        if (!p_.routes().on_route(s, present)) continue;
        ++present_on_route;
        check_cell(s, present);
      }
      absent_listed += list_absent(s, m, M_);
    }
    const std::uint64_t absent = on_route_cells() - present_on_route;
    truncated_ += 2 * (absent - absent_listed);
  }

  // Reports the untouched cells (s, m) for m in [from, to) while there is room; returns how many.
  std::uint64_t list_absent(int s, int from, int to) {
    std::uint64_t listed = 0;
    for (int m = from; m < to && !full(); ++m) {
      if (!p_.routes().on_route(s, m)) {
        // Past the explicit route list every microbatch takes route 0: all on it or none.
        if (static_cast<std::size_t>(m) >= p_.routes().route_of_microbatch().size()) return listed;
        continue;
      }
      const int r = p_.rank_of(s);
      report(
          "missing_compute", r, -1,
          [&] { return fmt::format("stage {} microbatch {}: no forward {}F{}", s, m, s, m); },
          false);
      report(
          "missing_compute", r, -1,
          [&] {
            return fmt::format("stage {} microbatch {}: no backward ({}B{} or {}I{} + {}W{})", s, m,
                               s, m, s, m, s, m);
          },
          false);
      ++listed;
    }
    return listed;
  }

  // (stage, microbatch) pairs on a route, counted per route.
  std::uint64_t on_route_cells() const {
    const Routes& routes = p_.routes();
    const auto M = static_cast<std::uint64_t>(M_);
    if (routes.is_linear()) return static_cast<std::uint64_t>(S_) * M;
    const auto& of_mb = routes.route_of_microbatch();
    std::vector<std::uint64_t> takers(static_cast<std::size_t>(routes.count()), 0);
    std::uint64_t listed = 0;
    for (std::size_t m = 0; m < of_mb.size() && m < M; ++m, ++listed)
      ++takers[static_cast<std::size_t>(of_mb[m])];
    takers[0] += M - listed;  // the rest take route 0
    std::uint64_t n = 0;
    for (int k = 0; k < routes.count(); ++k)
      n += takers[static_cast<std::size_t>(k)] * routes.path(k).size();
    return n;
  }

  void check_cell(int s, int m) {
    const int r = p_.rank_of(s);
    const Counts& c = counts_[cell(s, m)];
    auto at = [&](std::string_view kind, auto&& msg, bool fatal) {
      report(
          kind, r, -1, [&] { return fmt::format("stage {} microbatch {}: {}", s, m, msg()); },
          fatal);
    };
    if (c.f == 0)
      at(
          "missing_compute", [&] { return fmt::format("no forward {}F{}", s, m); }, false);
    if (c.f > 1)
      at(
          "duplicate_compute", [&] { return fmt::format("{}F{} appears {} times", s, m, c.f); },
          false);
    if (c.b > 0 && (c.i > 0 || c.w > 0))
      at(
          "mixed_backward", [] { return "has both a full B and a split I/W backward"; }, false);
    else if (c.b == 0 && c.i == 0)
      at(
          "missing_compute",
          [&] { return fmt::format("no backward ({}B{} or {}I{} + {}W{})", s, m, s, m, s, m); },
          false);
    else if (c.b > 1 || c.i > 1 || c.w > 1)
      at(
          "duplicate_compute", [] { return "backward appears more than once"; }, false);
    else if (c.i == 1 && c.w == 0)
      at(
          "missing_compute", [&] { return fmt::format("{}I{} has no {}W{}", s, m, s, m); }, false);
    const int n = sem_.next_stage(s, m);
    if (n < 0 || p_.rank_of(n) == r) return;
    // Sparse cells: (s, m) may be only a neighbour of a touched cell, and then no op at s or n
    // carries microbatch m, so (n, m) has no index and its gradient was neither sent nor received.
    if (!sem_.has_cell(n, m)) return;
    for (bool backward : {false, true}) {
      const std::size_t t = sem_.tensor_index({backward, backward ? n : s, m});
      const bool sent = send_[t] != kUnseen, received = recv_[t] != kUnseen;
      if (sent == received) continue;
      const int sender = p_.rank_of(backward ? n : s), receiver = p_.rank_of(backward ? s : n);
      report(
          sent ? "unmatched_send" : "unmatched_recv", sent ? sender : receiver,
          op_of(sent ? send_[t] : recv_[t]),
          [&] {
            const std::string tensor =
                backward ? fmt::format("gradient {}->{} of microbatch {}", n, s, m)
                         : fmt::format("activation {}->{} of microbatch {}", s, n, m);
            return sent
                       ? fmt::format("sends the {} but rank {} never receives it", tensor, receiver)
                       : fmt::format("receives the {} but rank {} never sends it", tensor, sender);
          },
          false);
    }
  }

  const Program& p_;
  const ValidateOptions& o_;
  const Semantics& sem_;
  int S_, M_;
  std::vector<Counts>& counts_;
  std::vector<std::int32_t>& send_;
  std::vector<std::int32_t>& recv_;
  std::vector<Diagnostic> out_;
  std::size_t truncated_ = 0;
};

}  // namespace

std::vector<Diagnostic> validate(const Program& program, const ValidateOptions& options) {
  const Semantics sem(program);
  Tables tables(sem);  // after this, sem's cell index is built: the threads only read it
  const std::vector<int> bounds = rank_blocks(program, options.threads);
  // Each block lists at most kMaxDiagnostics of its own, so memory stays bounded in any count.
  std::vector<Validator> blocks;
  blocks.reserve(bounds.size() - 1);
  for (std::size_t b = 0; b + 1 < bounds.size(); ++b)
    blocks.emplace_back(program, options, sem, tables);
  base::for_rank_blocks(
      bounds, [&](std::size_t b, int first, int end) { blocks[b].check_ranks(first, end); });
  for (std::size_t b = 1; b < blocks.size(); ++b) blocks[0].absorb(blocks[b]);
  return blocks[0].finish();
}

}  // namespace ppsim::schedules
