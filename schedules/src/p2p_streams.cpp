#include "ppsim/schedules/p2p_streams.hpp"

#include <fmt/format.h>

namespace ppsim::schedules {

std::string P2pStreams::stream_name(int rank, int stream) const {
  if (stream == kRankStream) return fmt::format("rank {}'s p2p stream", rank);
  return fmt::format("rank {}'s p2p stream to rank {}", rank, stream);
}

std::string P2pStreams::queued_text(int rank, const Op& awaited, const Op& blocker) const {
  const Program& p = sem_.program();
  return fmt::format("{} (queued behind kernel {} on {})", p.op_text(rank, awaited),
                     p.op_text(rank, blocker), stream_name(rank, stream_of(awaited)));
}

std::string P2pStreams::partner_text(int rank, const Op& awaited, const Op& partner) const {
  const Program& p = sem_.program();
  return fmt::format("{} (done; its kernel waits on {})", p.op_text(rank, awaited),
                     p.op_text(rank, partner));
}

}  // namespace ppsim::schedules
