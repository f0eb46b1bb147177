#pragma once
// A posted send or receive. It owns its buffer until it has been waited: the buffer cannot be
// released under it (Gloo's "Cannot lock pointer to unbound buffer" is what happens otherwise).
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "ppsim/real/buffer.hpp"
#include "ppsim/schedules/op.hpp"

namespace ppsim::real {

struct Request {
  int rank = 0, pos = 0;  // the op that posted it
  schedules::Op op;
  bool send = false;
  std::shared_ptr<Buffer> buffer;

  // Written by the transport before `complete` is set (release), read by the rank after it sees
  // `complete` (acquire).
  int peer_rank = -1, peer_pos = -1;            // the op it was matched with
  double transfer_start = 0, transfer_end = 0;  // seconds since the run's start
  std::string error;  // what went wrong with the transfer (e.g. the send's storage was released)
  std::atomic<bool> complete{false};
  // When the transfer under way will end (seconds on the run clock), from the moment it takes its
  // link; negative before. A rank may wait for a transfer the clock says is over.
  std::atomic<double> ends_at{-1.0};

  bool waited = false;  // the rank's own bookkeeping
};
using RequestPtr = std::shared_ptr<Request>;

}  // namespace ppsim::real
