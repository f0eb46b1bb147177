#include "ppsim/real/transport.hpp"

#include <fmt/format.h>

namespace ppsim::real {

RequestPtr new_request(const TransportContext& c, int rank, int pos, const schedules::Op& op,
                       std::shared_ptr<Buffer> buffer) {
  const int peer = c.semantics.peer_of(op);
  if (peer < 0 || peer == rank || peer >= c.program.ranks())
    throw HazardError("bad_comm", rank, pos,
                      fmt::format("rank {} op {}: {} has no peer on another rank", rank, pos,
                                  c.program.op_text(rank, op)));
  auto req = std::make_shared<Request>();
  req->rank = rank;
  req->pos = pos;
  req->op = op;
  req->send = schedules::is_send(op.kind);
  req->buffer = std::move(buffer);
  return req;
}

std::size_t tag_of(const TransportContext& c, const Request& r) {
  return c.semantics.tensor_index(c.semantics.tensor_of(r.op));
}

void throw_duplicate(const TransportContext& c, const Request& r) {
  throw HazardError("duplicate_comm", r.rank, r.pos,
                    fmt::format("rank {} op {}: {} duplicates an earlier op on the same tensor",
                                r.rank, r.pos, c.program.op_text(r.rank, r.op)));
}

std::string released_error(const TransportContext& c, const Request& s) {
  return fmt::format("the transfer of {} reads storage already released by {}",
                     c.program.op_text(s.rank, s.op), s.buffer->released_by());
}

}  // namespace ppsim::real
