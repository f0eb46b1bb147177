#pragma once
// How ranks exchange tensors: the point-to-point semantics of DESIGN.md (rendezvous, eager,
// tag/fifo matching, one transfer at a time per directed link) or, under comm.semantics "nccl",
// docs/SEMANTICS.md's (kernels in stream order, groups, buffered sends) over some medium. `host`
// moves them between threads of this process; the GPU transports implement the same interface.
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ppsim/base/registry.hpp"
#include "ppsim/model/model.hpp"
#include "ppsim/real/clock.hpp"
#include "ppsim/real/collective_fit.hpp"
#include "ppsim/real/request.hpp"
#include "ppsim/schedules/program.hpp"
#include "ppsim/schedules/semantics.hpp"

namespace ppsim::real {

struct TransportContext {
  const schedules::Program& program;
  const schedules::Semantics& semantics;
  const model::NetworkOptions& network;
  double time_scale;  // seconds of wall clock per time unit; 0: transfers take no modelled time
  const RunClock& clock;
};

class Transport {
 public:
  virtual ~Transport() = default;

  // A fresh run (the previous one, if any, has ended).
  virtual void begin(const TransportContext& context) = 0;
  // Posts a SEND_* or RECV_* op of `rank` (at `pos`) with the buffer it sends from or receives
  // into. Never blocks. Throws HazardError for what the medium refuses.
  virtual RequestPtr post(int rank, int pos, const schedules::Op& op,
                          std::shared_ptr<Buffer> buffer) = 0;
  // Blocks until every request is complete (under nccl: and the kernel it runs in): true, or
  // false when the run was aborted first.
  virtual bool wait(int rank, std::span<const RequestPtr> requests) = 0;
  // Nothing is moving: no transfer under way or waiting for its link. With every unfinished rank
  // blocked in wait(), the run can make no more progress (the watchdog's proof of a hang).
  virtual bool quiescent() const = 0;
  // How many ranks are inside wait() with a request not complete: with every unfinished rank
  // counted here and the transport quiescent, nothing can move any more.
  virtual std::size_t stuck_waiters() const = 0;
  // Wakes every rank blocked in wait() and makes later waits return false at once. Any thread.
  virtual void abort() = 0;
  // Every rank has returned: transfers still queued are dropped, and every request and buffer the
  // transport holds is let go (their ranks' allocators are about to go).
  virtual void end() = 0;
  // Lines about the last run for the report (a GPU transport: the device, SM partitioning).
  virtual std::vector<std::string> report() const { return {}; }
  // After a run that finished (`--calibrate`): the collectives the model times, run on the
  // transport's own medium over all its ranks at a few sizes. Empty where the transport has no
  // collectives of its own (host, cuda: ranks share one process or one GPU).
  virtual std::vector<CollectiveSample> measure_collectives() { return {}; }

  // GROUP_START / GROUP_END issued by `rank` (groups nest; the outermost one counts). Under nccl
  // the ops posted in between are enqueued as kernels at the outermost group_end; under mpi a
  // group changes nothing.
  virtual void group_start(int /*rank*/) {}
  virtual void group_end(int /*rank*/) {}
  // What a request waits behind: empty while its kernel is running (and always under mpi, where
  // every posted request progresses on its own); else the ops not yet complete of the kernel at
  // the head of its stream, in kernel order. For a complete request whose kernel is not (nccl:
  // a WAIT returns with the kernel), the kernel's ops not yet complete.
  virtual std::vector<RequestPtr> blockers(const Request& /*request*/) const { return {}; }

  // Blocking send and receive: post, then wait.
  bool send_recv(int rank, int pos, const schedules::Op& op, std::shared_ptr<Buffer> buffer,
                 RequestPtr& request) {
    request = post(rank, pos, op, std::move(buffer));
    return wait(rank, std::span<const RequestPtr>(&request, 1));
  }
};

// A request for `op` (a SEND_* or RECV_*) of `rank` at `pos`, holding `buffer` (may be null: a
// transport that attaches it later). Throws HazardError "bad_comm" when the op has no peer on
// another rank of the program. What every transport's post() starts with.
RequestPtr new_request(const TransportContext& context, int rank, int pos, const schedules::Op& op,
                       std::shared_ptr<Buffer> buffer);
// Tag matching's key: the tensor a send or receive moves.
std::size_t tag_of(const TransportContext& context, const Request& request);
// A second op posted on a tensor whose first is still unmatched: HazardError "duplicate_comm".
[[noreturn]] void throw_duplicate(const TransportContext& context, const Request& request);
// What a transfer reports when the send's storage was released before it read it (`send`'s
// buffer holds who released it).
std::string released_error(const TransportContext& context, const Request& send);

struct TransportInfo {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<Transport>()> make;
  // It runs one rank per process, under a launcher (ExecOptions::world); otherwise every rank is
  // a thread of one process.
  bool per_process = false;
};

// Transports by name: one file under real/src/transports/ each, registered by file name.
using TransportRegistry = base::Registry<TransportInfo>;
void register_builtins(TransportRegistry& registry);

}  // namespace ppsim::real
