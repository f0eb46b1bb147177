// ppsim: generate, simulate and check pipeline-parallel schedules.
#include <CLI/CLI.hpp>
#include <iostream>

#include "commands.hpp"
#include "messages.hpp"
#include "output_file.hpp"

namespace {

int run_cli(int argc, char** argv) {
  using namespace ppsim::cli;
  CLI::App app{"ppsim: pipeline-parallel schedule generator, simulator and checker"};
  app.require_subcommand(1);
  // CLI11 echoes the offending arguments: a 5 MB token is shortened, binary junk escaped.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "ppsim: error: " + shorten_long_words(e.what()) +
           "\nRun with --help for more information.\n";
  });
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
  auto* trace_opt = run->add_option("--trace", trace_file,
                                    "write a Chrome trace (open in Perfetto or chrome://tracing)");
  add_set(run);

  std::vector<std::string> configs;
  SweepOptions sweep;
  auto* compare = app.add_subcommand("compare", "one row per config, or a sweep over one config");
  compare->add_option("configs", configs, "JSON config files")->required();
  auto* compare_json = compare->add_flag("--json", json, "print a JSON array");
  compare->add_flag("--csv", csv, "print CSV")->excludes(compare_json);
  // Lists are split and checked by cmd_compare: CLI11 would drop empty elements silently.
  compare->add_option("--schedules", sweep.schedules, "sweep: schedule kinds, e.g. gpipe,1f1b")
      ->type_name("LIST");
  compare->add_option("--microbatches", sweep.microbatches, "sweep: microbatch counts, e.g. 8,16")
      ->type_name("LIST");
  compare
      ->add_option("--chunks", sweep.chunks,
                   "sweep: chunks per rank (schedules that take chunks), e.g. 2,4")
      ->type_name("LIST");
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
    return code == 0 ? kOk : kBadInput;
  }
  if (*run && trace_opt->count() > 0 && trace_file.empty()) {  // not "no trace": a mistake
    std::cerr << "ppsim: error: --trace: the file name is empty\n";
    return kBadInput;
  }
  if (*run) return cmd_run(config, json, trace_file, common);
  if (*compare) return cmd_compare(configs, json, csv, sweep, common);
  if (*check) return cmd_check(configs, json, common);
  if (*list) return cmd_list();
  if (*exp) return cmd_export(config, common);
  return kBadInput;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything is opened: a closed stdout must not hand its descriptor to a trace file.
  ppsim::cli::reserve_standard_descriptors();
  ppsim::cli::StandardOutput out;
  int code = run_cli(argc, argv);
  // SIGPIPE keeps its default action: `ppsim export C | head` ends quietly, as other tools do.
  if (const std::string error = out.check(); !error.empty()) {
    std::cerr << "ppsim: error: " << error << "\n";
    code = ppsim::cli::kBadInput;
  }
  return code;
}
