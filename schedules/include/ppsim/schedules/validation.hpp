#pragma once
// Static checks of a Program before it runs.
#include <vector>

#include "ppsim/schedules/diagnostic.hpp"
#include "ppsim/schedules/program.hpp"

namespace ppsim::schedules {

struct ValidateOptions {
  // NCCL (through PyTorch) keeps a send's tensor alive until its kernel is done, so freeing it
  // before the WAIT is no hazard there (comm.semantics nccl); Gloo and MPI-like transports abort.
  bool send_buffers_released_early = false;
  // Threads that check ranks at once; 0: PPSIM_JOBS or the machine's cores, and only for programs
  // large enough for a thread to pay. The diagnostics are the same in any count.
  unsigned threads = 0;
};

// Every (stage, microbatch) has one F and one B or one I + one W, in a legal order on the right
// rank; every send has a receive of the same tensor; every async request is waited, and waited
// before its buffer is read or released. Fatal diagnostics mean the simulator must not run it.
// Group markers must balance, and nothing waits while a group is open.
std::vector<Diagnostic> validate(const Program& program, const ValidateOptions& options = {});

bool has_fatal(const std::vector<Diagnostic>& diagnostics);

}  // namespace ppsim::schedules
