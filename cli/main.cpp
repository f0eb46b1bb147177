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

  std::string config;
  bool json = false, csv = false;
  RunOutputs run_out;
  auto* run = app.add_subcommand("run", "simulate one config and print its metrics");
  run->add_option("config", config, "JSON config file")->required();
  auto* run_json = run->add_flag("--json", run_out.json, "print one JSON object (docs/METRICS.md)");
  auto* trace_opt = run->add_option("--trace", run_out.trace_file,
                                    "write a Chrome trace (open in Perfetto or chrome://tracing)");
  auto* svg_opt = run->add_option("--svg", run_out.svg_file,
                                  "write an SVG timeline: one row per rank, a box per compute op");
  run->add_flag("--timeline", run_out.timeline,
                "print a timeline in the terminal after the summary, scaled to its width")
      ->excludes(run_json);
  run->add_flag("--no-color", run_out.no_color,
                "no ANSI colours in --timeline (default: colours when stdout is a terminal)");
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

  std::string report_file, report_title;
  SweepOptions report_sweep;
  auto* report = app.add_subcommand(
      "report", "one self-contained HTML page: table, timelines, memory and sweep charts");
  report->add_option("configs", configs, "JSON config files")->required();
  report->add_option("-o,--output", report_file, "the HTML file to write")->required();
  report->add_option("--title", report_title, "the page title (default: ppsim report)");
  report
      ->add_option("--schedules", report_sweep.schedules, "sweep: schedule kinds, e.g. gpipe,1f1b")
      ->type_name("LIST");
  report
      ->add_option("--microbatches", report_sweep.microbatches,
                   "sweep: microbatch counts, e.g. 8,16,32,64 (adds the bubble chart)")
      ->type_name("LIST");
  report->add_option("--chunks", report_sweep.chunks, "sweep: chunks per rank, e.g. 2,4")
      ->type_name("LIST");
  add_set(report);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kOk : kBadInput;
  }
  for (const auto& [opt, file] :
       {std::pair{trace_opt, &run_out.trace_file}, std::pair{svg_opt, &run_out.svg_file}})
    if (*run && opt->count() > 0 && file->empty()) {  // not "no file": a mistake
      std::cerr << "ppsim: error: " << opt->get_name() << ": the file name is empty\n";
      return kBadInput;
    }
  if (*run && !run_out.svg_file.empty() && run_out.svg_file == run_out.trace_file) {
    std::cerr << "ppsim: error: --svg and --trace name the same file '" << run_out.svg_file
              << "'\n";
    return kBadInput;
  }
  if (*run) return cmd_run(config, run_out, common);
  if (*compare) return cmd_compare(configs, json, csv, sweep, common);
  if (*check) return cmd_check(configs, json, common);
  if (*list) return cmd_list();
  if (*exp) return cmd_export(config, common);
  if (*report) return cmd_report(configs, report_file, report_title, report_sweep, common);
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
