#pragma once
// Human-readable summaries of run records: one run, or a comparison of many (text table or CSV).
#include <string>
#include <vector>

#include "ppsim/record/run_record.hpp"
#include "ppsim/schedules/op_location.hpp"

namespace ppsim::viz {

// `ppsim run` without --json: headline metrics, per-rank table, verdict, problems.
std::string summary_text(const record::RunRecord& run);
// The `ppsim check` lines of one config: "ok    PATH (NAME)" or FAIL with the explanation: the
// deadlock, a `stuck:` line per blocked op, and the diagnostics; `locate` adds where each op was
// written (programs read from text).
// `overridden`: the config was changed by --set, so the schedule and comm style that ran are
// shown beside its name ("1f1b-all-blocking (deadlocks); ran: 1f1b, batched/tag"), which may
// describe the file as it is without them.
std::string check_text(const record::RunRecord& run, const std::string& config_path,
                       const schedules::OpLocator& locate = {}, bool overridden = false);
// Rows whose lowering held a rank on its own sends for more than this share of the makespan
// (RunRecord::send_hold) are footnoted: the schedule ran slower than its program allows.
inline constexpr double kStallShare = 0.05;
// "stalled by the lowering: 11.3 ms blocked (rank 3, ...); try comm.prefetch=all", or empty.
std::string lowering_stall(const record::RunRecord& run);
// One row per run; rows the lowering stalled are marked [n] and footnoted below the table.
std::string compare_table(const std::vector<record::RunRecord>& runs);
std::string compare_csv(const std::vector<record::RunRecord>& runs);

}  // namespace ppsim::viz
