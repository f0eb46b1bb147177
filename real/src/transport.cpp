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

}  // namespace ppsim::real
