// ppsim: generate, simulate and check pipeline-parallel schedules.
#include <CLI/CLI.hpp>
#include <iostream>

#include "commands.hpp"

int main(int argc, char** argv) {
  using namespace ppsim::cli;
  CLI::App app{"ppsim: pipeline-parallel schedule generator, simulator and checker"};
  app.require_subcommand(1);
  CommonOptions common;
  auto add_set = [&](CLI::App* sub) {
    sub->add_option("--set", common.overrides,
                    "override a config value, e.g. --set comm.style=blocking")
        ->type_name("KEY=VALUE");
    // --max-memory: refuse configs estimated to need more (docs/LIMITS.md).
    sub->add_option_function<std::string>(
           "--max-memory",
           [&](const std::string& v) { common.max_memory = ppsim::config::parse_bytes(v); },
           "refuse configs estimated to need more memory, e.g. 512M, 8G; 0 = no limit "
           "(default: half of physical memory)")
        ->type_name("BYTES")
        ->check([](const std::string& v) {
          try {
            ppsim::config::parse_bytes(v);
            return std::string();
          } catch (const std::invalid_argument& e) {
            return std::string(e.what());
          }
        });
  };

  std::string config, trace_file;
  bool json = false, csv = false;
  auto* run = app.add_subcommand("run", "simulate one config and print its metrics");
  run->add_option("config", config, "JSON config file")->required();
  run->add_flag("--json", json, "print one JSON object (docs/METRICS.md)");
  run->add_option("--trace", trace_file,
                  "write a Chrome trace (open in Perfetto or chrome://tracing)");
  add_set(run);

  std::vector<std::string> configs, schedules;
  std::vector<int> microbatches, chunks;
  auto* compare = app.add_subcommand("compare", "one row per config, or a sweep over one config");
  compare->add_option("configs", configs, "JSON config files")->required();
  auto* compare_json = compare->add_flag("--json", json, "print a JSON array");
  compare->add_flag("--csv", csv, "print CSV")->excludes(compare_json);
  compare->add_option("--schedules", schedules, "sweep: schedule kinds")->delimiter(',');
  compare->add_option("--microbatches", microbatches, "sweep: microbatch counts")->delimiter(',');
  compare->add_option("--chunks", chunks, "sweep: chunks per rank (schedules that take chunks)")
      ->delimiter(',');
  add_set(compare);

  auto* check = app.add_subcommand(
      "check", "validate and look for deadlocks; exit 1 if any schedule is wrong");
  check->add_option("configs", configs, "JSON config files")->required();
  check->add_flag("--json", json, "print a JSON array of verdicts");
  add_set(check);

  auto* list = app.add_subcommand("list", "list schedules and their parameters");

  auto* exp = app.add_subcommand("export", "print the lowered op lists, one line per rank");
  exp->add_option("config", config, "JSON config file")->required();
  add_set(exp);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (*run) return cmd_run(config, json, trace_file, common);
  if (*compare) return cmd_compare(configs, json, csv, schedules, microbatches, chunks, common);
  if (*check) return cmd_check(configs, json, common);
  if (*list) return cmd_list();
  if (*exp) return cmd_export(config, common);
  return 2;
}
