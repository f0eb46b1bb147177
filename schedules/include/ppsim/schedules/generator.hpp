#pragma once
// Schedule generators: one file each under schedules/src/generators, registered by name.
// A generator emits compute ops only (F, B, I, W, OVERLAP_F_B); lowering adds the communication.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ppsim/base/registry.hpp"
#include "ppsim/schedules/params.hpp"
#include "ppsim/schedules/program.hpp"

namespace ppsim::schedules {

using ScheduleParams = Params;

// The point-to-point lowering a config that sets no comm.style gets for a schedule: the one that
// runs it without stalling on its own sends, measured within 2% of the best style ppsim offers
// for it at the smallest receive-buffer memory (docs/SCHEDULES.md, "Default comm style").
struct DefaultComm {
  std::string style = "async";
  // The style's parameters that differ from its own defaults, for the schedule's parameters
  // (resolved: ranks, chunks, microbatches); none when empty.
  std::function<Params(const ScheduleParams&)> params = nullptr;
  std::string text = "async";  // as `ppsim list` shows it: "async, prefetch 2P"
  std::string why = {};        // for `ppsim list`; empty for the plain default
};

struct Generator {
  std::string name;                  // canonical, e.g. "1f1b"
  std::vector<std::string> aliases;  // e.g. PyTorch class names; matched case-insensitively
  std::string summary;
  std::vector<ParamSpec> params;  // every parameter it reads; anything else is refused
  // Receives resolved parameters (declared, defaults filled, ranges checked); throws
  // ParameterError for combinations it cannot honour.
  std::function<Program(const ScheduleParams&)> build;
  // Small valid parameter sets that tests run through every comm style and the simulator.
  std::vector<ScheduleParams> test_params;
  DefaultComm default_comm = {};
};

// async with receives posted `ahead(schedule)` compute ops ahead of their consumers (kPrefetchAll:
// at the start), described as `text` ("2P").
DefaultComm prefetch_comm(std::function<std::int64_t(const ScheduleParams&)> ahead,
                          const std::string& text, std::string why);

// The schedules, one file each under schedules/src/generators/.
using Registry = base::Registry<Generator>;
void register_builtins(Registry& registry);

// Look up, resolve parameters and build; throws ParameterError (key "kind") for an unknown name
// and (key = the parameter) for a parameter the generator does not take or a bad value.
Program generate(std::string_view kind, const ScheduleParams& params);

// The declarations most generators share.
ParamSpec ranks_param(std::string description = "pipeline ranks P", std::int64_t min = 1);
ParamSpec microbatches_param(std::string description = "microbatches M", std::int64_t min = 1);
// Schedules with one stage per rank: ranks, microbatches, and chunks fixed at 1; and small
// parameter sets for their tests.
std::vector<ParamSpec> one_chunk_params();
std::vector<ScheduleParams> one_chunk_test_params();

}  // namespace ppsim::schedules
