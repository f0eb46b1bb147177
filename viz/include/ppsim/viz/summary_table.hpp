#pragma once
// Human-readable summaries: one run, or a comparison of many (text table or CSV).
#include <string>
#include <vector>

#include "ppsim/sim/analysis.hpp"

namespace ppsim::viz {

// `ppsim run` without --json: headline metrics, per-rank table, verdict, problems.
std::string summary_text(const sim::Analysis& analysis);
// One-line verdict: "ok", "DEADLOCK (1 cycle)", "ERRORS (3)", "INVALID (2)".
std::string verdict(const sim::Analysis& analysis);
std::string compare_table(const std::vector<sim::Analysis>& runs);
std::string compare_csv(const std::vector<sim::Analysis>& runs);

}  // namespace ppsim::viz
