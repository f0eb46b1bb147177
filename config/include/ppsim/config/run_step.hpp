#pragma once
// The run step that the simulator (sim::analyze) and the executor (real::execute) share: prepare
// -> start_run (what runs, in words, and the program's diagnostics) -> simulate or execute, only
// when the program can run -> the run record. One place says what a record of either origin
// holds before its run.
#include <string>

#include "ppsim/config/prepare.hpp"
#include "ppsim/record/run_record.hpp"

namespace ppsim::config {

// The record of a run of `prepared` before it runs: its info (the config's names, the comm style
// and, for a lowered program, the lowering and the schedule's default one in words, the matching
// and semantics the model runs under), the program, and validation's diagnostics. `origin`:
// "simulated" or "measured".
record::RunRecord start_run(const Prepared& prepared, std::string origin);
// False when validation found a fatal hazard: neither the simulator nor the executor runs it.
bool runnable(const record::RunRecord& started);

}  // namespace ppsim::config
