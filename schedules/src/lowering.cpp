#include "ppsim/schedules/lowering.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "ppsim/schedules/error.hpp"

namespace ppsim::schedules {

std::string_view to_string(CommStyle style) {
  switch (style) {
    case CommStyle::blocking:
      return "blocking";
    case CommStyle::async_send:
      return "async-send";
    case CommStyle::batched:
      return "batched";
    case CommStyle::async:
      return "async";
  }
  return "?";
}

bool parse_comm_style(std::string_view text, CommStyle& out) {
  for (auto s :
       {CommStyle::blocking, CommStyle::async_send, CommStyle::batched, CommStyle::async}) {
    if (text == to_string(s)) {
      out = s;
      return true;
    }
  }
  return false;
}

namespace {

class Lowerer {
 public:
  Lowerer(const Program& in, Program& out, int rank) : in_(in), out_(out), rank_(rank) {}

  // The receive a compute op needs before it can run, when its input comes from another rank.
  std::optional<Op> recv_needed(const Op& c) const {
    if (c.kind == OpKind::F && c.stage > 0 && in_.rank_of(c.stage - 1) != rank_)
      return Op::comm(OpKind::RECV_F, c.stage, c.microbatch);
    if (is_backward_input(c.kind) && c.stage + 1 < in_.stages() &&
        in_.rank_of(c.stage + 1) != rank_)
      return Op::comm(OpKind::RECV_B, c.stage, c.microbatch);
    return std::nullopt;
  }
  // The send of a compute op's output, when its consumer lives on another rank.
  std::optional<Op> send_after(const Op& c) const {
    if (c.kind == OpKind::F && c.stage + 1 < in_.stages() && in_.rank_of(c.stage + 1) != rank_)
      return Op::comm(OpKind::SEND_F, c.stage, c.microbatch);
    if (is_backward_input(c.kind) && c.stage > 0 && in_.rank_of(c.stage - 1) != rank_)
      return Op::comm(OpKind::SEND_B, c.stage, c.microbatch);
    return std::nullopt;
  }

  void emit(Op op) { out_.push(rank_, op); }
  int post(Op op) {  // emit as async, return its request id
    op.async = true;
    op.request = next_request_++;
    emit(op);
    return op.request;
  }
  void wait(std::vector<std::int32_t>& ids) {
    if (ids.empty()) return;
    out_.push_wait(rank_, ids);
    ids.clear();
  }

  void blocking() {
    for (const Op& c : in_.ops(rank_)) {
      if (auto r = recv_needed(c)) emit(*r);
      emit(c);
      if (auto s = send_after(c)) emit(*s);
    }
  }

  // Forward sends are waited at the end of their step, i.e. before the rank's next forward, or
  // earlier if the backward that frees their buffer comes first.
  void async_send() {
    std::unordered_map<long long, std::int32_t> pending;  // (stage, mb) -> request
    std::vector<std::int32_t> ids;
    for (const Op& c : in_.ops(rank_)) {
      if (c.kind == OpKind::F) {
        for (const auto& [key, id] : pending) ids.push_back(id);
        pending.clear();
      } else if (is_backward_input(c.kind)) {
        if (auto it = pending.find(key(c)); it != pending.end()) {
          ids.push_back(it->second);
          pending.erase(it);
        }
      }
      std::sort(ids.begin(), ids.end());
      wait(ids);
      if (auto r = recv_needed(c)) emit(*r);
      emit(c);
      if (auto s = send_after(c)) {
        if (s->kind == OpKind::SEND_F)
          pending[key(c)] = post(*s);
        else
          emit(*s);
      }
    }
    for (const auto& [k, id] : pending) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    wait(ids);
  }

  // Megatron's send_forward_recv_backward / send_backward_recv_forward: the send after one
  // compute op and the receive for the next one go out together when they run in opposite
  // directions; everything else is a single blocking transfer.
  void batched() {
    const auto& c = in_.ops(rank_);
    bool next_recv_done = false;
    std::vector<std::int32_t> ids;
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (auto r = recv_needed(c[i]); r && !next_recv_done) emit(*r);
      next_recv_done = false;
      emit(c[i]);
      auto s = send_after(c[i]);
      if (!s) continue;
      std::optional<Op> r = i + 1 < c.size() ? recv_needed(c[i + 1]) : std::nullopt;
      const bool pair = r && ((s->kind == OpKind::SEND_F && r->kind == OpKind::RECV_B) ||
                              (s->kind == OpKind::SEND_B && r->kind == OpKind::RECV_F));
      if (pair) {
        ids.push_back(post(*s));
        ids.push_back(post(*r));
        wait(ids);
        next_recv_done = true;
      } else {
        emit(*s);
      }
    }
  }

  void async(int prefetch) {
    const auto& c = in_.ops(rank_);
    const std::size_t n = c.size();
    std::vector<std::int32_t> recv_request(n, -1);
    std::size_t next_post = 0;
    auto post_slot = [&](std::size_t consumer) -> std::size_t {
      if (prefetch == LoweringOptions::kPrefetchAll) return 0;
      return consumer > static_cast<std::size_t>(prefetch)
                 ? consumer - static_cast<std::size_t>(prefetch)
                 : 0;
    };
    std::unordered_map<long long, std::int32_t> pending_send_f;  // (stage, mb) -> request
    std::vector<std::int32_t> pending_send_b;
    std::vector<std::int32_t> ids;
    for (std::size_t i = 0; i < n; ++i) {
      for (; next_post < n && post_slot(next_post) <= i; ++next_post)
        if (auto r = recv_needed(c[next_post])) recv_request[next_post] = post(*r);
      if (recv_request[i] >= 0) ids.push_back(recv_request[i]);
      if (is_backward_input(c[i].kind)) {
        // The backward frees the forward output (so its send must be done) and reuses the
        // gradient buffer of the previous backward.
        if (auto it = pending_send_f.find(key(c[i])); it != pending_send_f.end()) {
          ids.push_back(it->second);
          pending_send_f.erase(it);
        }
        ids.insert(ids.end(), pending_send_b.begin(), pending_send_b.end());
        pending_send_b.clear();
      }
      std::sort(ids.begin(), ids.end());
      wait(ids);
      emit(c[i]);
      if (auto s = send_after(c[i])) {
        const int id = post(*s);
        if (s->kind == OpKind::SEND_F)
          pending_send_f[key(c[i])] = id;
        else
          pending_send_b.push_back(id);
      }
    }
    for (const auto& [k, id] : pending_send_f) ids.push_back(id);
    ids.insert(ids.end(), pending_send_b.begin(), pending_send_b.end());
    std::sort(ids.begin(), ids.end());
    wait(ids);
  }

 private:
  static long long key(const Op& c) {
    return (static_cast<long long>(c.stage) << 32) | static_cast<unsigned>(c.microbatch);
  }

  const Program& in_;
  Program& out_;
  int rank_;
  std::int32_t next_request_ = 0;
};

}  // namespace

Program lower(const Program& compute, const LoweringOptions& options) {
  if (options.prefetch < 0 && options.prefetch != LoweringOptions::kPrefetchAll)
    throw ParameterError("prefetch",
                         fmt::format("prefetch must be >= 0 or \"all\", got {}", options.prefetch));
  Program out(compute.microbatches(), compute.placement());
  for (int r = 0; r < compute.ranks(); ++r) {
    for (const Op& op : compute.ops(r)) {
      if (!is_compute(op.kind))
        throw ParameterError(
            "kind",
            fmt::format("lowering expects compute ops only, found {} on rank {}", op_text(op), r));
    }
    out.reserve(r, compute.ops(r).size() * 4);
    Lowerer l(compute, out, r);
    switch (options.style) {
      case CommStyle::blocking:
        l.blocking();
        break;
      case CommStyle::async_send:
        l.async_send();
        break;
      case CommStyle::batched:
        l.batched();
        break;
      case CommStyle::async:
        l.async(options.prefetch);
        break;
    }
    out.ops(r).shrink_to_fit();
  }
  return out;
}

}  // namespace ppsim::schedules
