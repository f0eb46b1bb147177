#pragma once
// Entry functions of the libFuzzer targets, shared with tests/test_fuzz_regressions.cpp so a saved
// crash replays through exactly the code the fuzzer ran. Plain C++: no libFuzzer dependency.
//
// Each returns how the input ended. Bad input must end in one of the errors the CLI turns into
// exit 2 (what cli/commands.cpp's guarded() catches); the entry catches those and returns
// `rejected`. Anything else escapes: another exception (std::logic_error for a broken invariant
// the entry checks itself), a crash, a sanitizer report or a hang, and all of them are bugs.
#include <string>
#include <string_view>

namespace ppsim::fuzz {

enum class Outcome { accepted, rejected, skipped };

// The source name errors must carry (the CLI passes the config path).
inline constexpr const char* kSource = "fuzz-input.json";

// Bytes = JSON config text, then optional NUL-separated `--set` assignments:
// parse_json_text -> apply_override... -> parse_config.
Outcome config_entry(std::string_view bytes);

// Bytes = op-list text: Program::parse with linear routes; an accepted program must survive
// to_text -> parse -> to_text unchanged.
Outcome oplist_entry(std::string_view bytes);

// Bytes = PyTorch schedule CSV text: parse_torch_csv; an accepted CSV, written back cell for cell
// (write_torch_csv with its steps and cells), must parse to the same text again.
Outcome torch_csv_entry(std::string_view bytes);

// Bytes as for config_entry, then prepare -> analyze (with a trace) -> every report writer. Inputs
// whose size parameters would make one execution slow are `skipped` before anything is built
// (sizes are the resource guard's business, measured by bench/hostile_inputs.sh). The Chrome
// trace written must parse back as JSON.
Outcome pipeline_entry(std::string_view bytes);

// Bytes = a `ppsim search --json` result, as `ppsim merge` reads it: from_json -> to_json ->
// from_json -> to_json must give the same JSON, and merge of it alone must succeed when it is
// the only shard.
Outcome search_result_entry(std::string_view bytes);

// Bytes = a PyTorch profiler (Kineto) trace of one rank: parse_trace, then import_traces of it
// alone; an accepted import's program has every action once. The same bytes are also read as a
// calibration fragment (profile::calibration_overrides) over a config of another layout.
Outcome profile_entry(std::string_view bytes);

// Bytes = a Hugging Face config.json: parse_json_text -> parse_hf_config; an accepted one must
// give a network the `model` section's checks would take (positive sizes, heads dividing hidden,
// key/value heads dividing heads, top_k within the experts).
Outcome hf_config_entry(std::string_view bytes);

// Name for messages: "config", "oplist", "torch_csv", "pipeline", "search_result", "profile",
// "hf_config".
Outcome run_entry(const std::string& target, std::string_view bytes);

}  // namespace ppsim::fuzz
