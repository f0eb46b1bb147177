#pragma once
// Static checks of a Program before it runs.
#include <vector>

#include "ppsim/schedules/diagnostic.hpp"
#include "ppsim/schedules/program.hpp"

namespace ppsim::schedules {

// Every (stage, microbatch) has one F and one B or one I + one W, in a legal order on the right
// rank; every send has a receive of the same tensor; every async request is waited, and waited
// before its buffer is read or released. Fatal diagnostics mean the simulator must not run it.
std::vector<Diagnostic> validate(const Program& program);

bool has_fatal(const std::vector<Diagnostic>& diagnostics);

}  // namespace ppsim::schedules
