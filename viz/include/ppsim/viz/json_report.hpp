#pragma once
// JSON writers of a run record: the `ppsim run --json` object (keys documented in
// docs/METRICS.md) and the `ppsim check --json` entry.
#include <nlohmann/json.hpp>
#include <string>

#include "ppsim/record/run_record.hpp"
#include "ppsim/schedules/op_location.hpp"

namespace ppsim::viz {

// JSON text as ppsim prints it: bytes that are not UTF-8 (a config's file name may hold any)
// become U+FFFD instead of failing the whole output.
std::string json_text(const nlohmann::json& j, int indent = 2);

nlohmann::json to_json(const record::RunRecord& run);
nlohmann::json to_json(const record::Deadlock& deadlock);
// `step` of `model --json` and `run --json`: the whole training step, seconds (docs/MODEL.md).
nlohmann::json to_json(const record::StepTiming& step, const std::string& schedule);
nlohmann::json to_json(const schedules::Diagnostic& diagnostic);
// One element of `ppsim check --json`: {config, name, ok, verdict, errors, deadlock}. With
// `locate`, each error and stuck op whose op was written in a text gets "location" (and "line",
// "column" where known).
nlohmann::json check_json(const record::RunRecord& run, const std::string& config_path,
                          const schedules::OpLocator& locate = {});

}  // namespace ppsim::viz
