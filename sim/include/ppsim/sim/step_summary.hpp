#pragma once
// A simulated step in the figures training logs print (docs/MODEL.md, "The whole step"): the
// critical rank's breakdown, tokens per second, model TFLOP/s per GPU and MFU.
#include "ppsim/config/prepare.hpp"
#include "ppsim/record/run_record.hpp"

namespace ppsim::sim {

// Fills `rec.step->summary` (and picks the critical rank) when the run has step timings.
void summarize_step(const config::Prepared& prepared, record::RunRecord& rec);

}  // namespace ppsim::sim
