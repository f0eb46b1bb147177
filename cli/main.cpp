// ppsim: generate, simulate and check pipeline-parallel schedules.
#include <CLI/CLI.hpp>
#include <iostream>

#include "commands.hpp"
#include "messages.hpp"
#include "ppsim/base/output_file.hpp"
#include "ppsim/real/mlp_model.hpp"
#include "ppsim/real/mpi_backend.hpp"
#include "ppsim/real/settings.hpp"
#include "ppsim/viz/trace_format.hpp"
#include "version.hpp"
#ifdef PPSIM_WITH_GPU
#include "ppsim/real/gpu/backends.hpp"
#endif

namespace {

// The first clash among `outputs` (option, path; empty paths are not written) and `inputs`.
std::string colliding_outputs(const std::vector<std::pair<std::string, std::string>>& outputs,
                              const std::vector<std::string>& inputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const auto& [option, path] = outputs[i];
    if (path.empty()) continue;
    for (std::size_t j = i + 1; j < outputs.size(); ++j)
      if (!outputs[j].second.empty() && ppsim::base::same_file(path, outputs[j].second))
        return option + " and " + outputs[j].first + " name the same file '" + path + "'";
    for (const auto& input : inputs)
      if (!input.empty() && ppsim::base::same_file(path, input))
        return option + " " + path + ": is the input file " + input +
               ": writing it would replace the input";
  }
  return "";
}

int run_cli(int argc, char** argv) {
  using namespace ppsim::cli;
  CLI::App app{"ppsim: pipeline-parallel schedule generator, simulator and checker", "ppsim"};
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
  run->add_flag("--json", run_out.json, "print one JSON object (docs/METRICS.md)");
  auto* trace_opt =
      run->add_option("--trace", run_out.trace_file,
                      "write a trace for Perfetto: " + ppsim::viz::trace_formats_help());
  auto* svg_opt = run->add_option("--svg", run_out.svg_file,
                                  "write an SVG timeline: one row per rank, a box per compute op");
  // Not ->excludes(): CLI11 prints that inside the help's name column.
  run->add_flag("--timeline", run_out.timeline,
                "print a timeline in the terminal after the summary, scaled to its width "
                "(not with --json)");
  run->add_flag("--no-color", run_out.no_color,
                "no ANSI colours in --timeline (default: colours when stdout is a terminal)");
  run->add_option("--calibration", common.calibration,
                  "measured costs: `import-profile -o` or `real --calibrate --json` output")
      ->type_name("FILE");
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
  compare
      ->add_option(
          "--shard", sweep.shard,
          "run points I, I+N, ... only (a Slurm array index); with --json, for `ppsim merge`")
      ->type_name("I/N");
  add_set(compare);

  auto* check = app.add_subcommand(
      "check", "validate and look for deadlocks; exit 1 if any schedule is wrong");
  check
      ->add_option("configs", configs,
                   "config files, or directories: every *.json and *.csv under them")
      ->required();
  check->add_flag("--json", json, "print a JSON array of verdicts");
  std::string junit_file;
  auto* junit_opt = check->add_option(
      "--junit", junit_file, "also write a JUnit XML report, one testcase per file (for CI)");
  add_set(check);

  auto* list = app.add_subcommand("list", "list schedules and their parameters");

  bool model_json = false;
  auto* model_sub = app.add_subcommand(
      "model", "per-stage costs and memory derived from the config's model and hardware");
  model_sub->add_option("config", config, "JSON config file with model and hardware sections")
      ->required();
  model_sub->add_flag("--json", model_json, "print one JSON object");
  std::string calibration;
  model_sub
      ->add_option("--calibration", calibration,
                   "measured costs to set against the derived ones: the calibrated fragment "
                   "of `ppsim real --calibrate --json` (or its whole output)")
      ->type_name("FILE");
  add_set(model_sub);

  std::vector<std::string> profile_traces;
  ImportProfileOptions profile_options;
  auto* profile_sub = app.add_subcommand(
      "import-profile", "read PyTorch profiler traces of a pipeline run: its order and its costs");
  profile_sub->add_option("traces", profile_traces, "Kineto traces (.json, .json.gz), one per rank")
      ->required();
  profile_sub->add_flag("--json", profile_options.json, "print one JSON object");
  profile_sub
      ->add_option("-o,--output", profile_options.output,
                   "write the calibrated fragment (for --calibration)")
      ->type_name("FILE");
  profile_sub->add_option("--step", profile_options.step, "use ProfilerStep#N (default the last)")
      ->type_name("N");
  profile_sub
      ->add_option("--map", profile_options.map_file,
                   "regular expressions for other frameworks' range names (docs/PROFILES.md)")
      ->type_name("FILE");
  profile_sub
      ->add_option("--report", profile_options.report_file,
                   "HTML report: the measured run beside its replay with the measured costs")
      ->type_name("FILE");
  profile_sub
      ->add_option("--trace", profile_options.trace_file,
                   "trace of the measured run and its replay: " + ppsim::viz::trace_formats_help())
      ->type_name("FILE");
  profile_sub->add_option("--svg", profile_options.svg_file, "SVG timeline of the measured run")
      ->type_name("FILE");

  SearchCliOptions search_options;
  auto* search_sub = app.add_subcommand(
      "search", "the fastest schedule that finishes within a per-rank memory limit");
  search_sub->add_option("config", config, "JSON config file (its P, M, costs and comm)")
      ->required();
  search_sub
      ->add_option("--memory-limit", search_options.memory_limit,
                   "per rank: bytes or with a unit, e.g. 80GB (default hardware.memory_bytes)")
      ->type_name("BYTES");
  search_sub
      ->add_option("--time-limit", search_options.time_limit,
                   "seconds the local search may take in all (default: its op budget alone)")
      ->type_name("S");
  search_sub->add_option("--seed", search_options.seed, "local search seed (default 1)");
  search_sub
      ->add_option("--shard", search_options.shard,
                   "run shard I of N (a Slurm array index); join them with `ppsim merge`")
      ->type_name("I/N");
  search_sub->add_flag("--mpi", search_options.mpi,
                       "under mpirun: each process searches a shard, process 0 prints the whole");
  search_sub->add_flag("--json", search_options.json, "print one JSON object");
  search_sub
      ->add_option("-o,--output", search_options.output,
                   "write the winner: a runnable config, or a CSV with --format torch-csv")
      ->type_name("FILE");
  search_sub->add_option("--format", search_options.format, "config (default) or torch-csv");
  search_sub
      ->add_option("--report", search_options.report_file,
                   "HTML report: the Pareto chart and the winner's timeline")
      ->type_name("FILE");
  add_set(search_sub);

  std::vector<std::string> merge_files;
  bool merge_json = false;
  std::string merge_output;
  auto* merge_sub =
      app.add_subcommand("merge", "join the JSON results of `ppsim search --shard` runs");
  merge_sub->add_option("results", merge_files, "JSON files, one per shard")->required();
  merge_sub->add_flag("--json", merge_json, "print one JSON object");
  merge_sub->add_option("-o,--output", merge_output, "write the merged JSON here")
      ->type_name("FILE");

  // Values are checked by cmd_real so that each error names its option (docs/EXECUTOR.md).
  RealOptions real_options;
  auto* real_sub = app.add_subcommand(
      "real", "run the op lists on the executor, then print measured vs predicted");
  real_sub->add_option("config", config, "JSON config file")->required();
  real_sub->add_option("--backend", real_options.backend, "transport (default host)")
      ->type_name("NAME");
  real_sub->add_option("--compute", real_options.compute, "compute (default emulated)")
      ->type_name("NAME");
  real_sub
      ->add_option("--time-scale", real_options.time_scale,
                   "wall clock per time unit, e.g. 1ms, 250us, 0 (default 1ms)")
      ->type_name("DURATION");
  real_sub
      ->add_option("--memory-scale", real_options.memory_scale,
                   "real bytes per modelled byte, in (0, 1] (default: chosen)")
      ->type_name("X");
  real_sub
      ->add_option("--iterations", real_options.iterations,
                   "measured runs; the median one is reported (default 1)")
      ->type_name("N");
  real_sub->add_option("--warmup", real_options.warmup, "runs before them (default 0)")
      ->type_name("K");
  real_sub
      ->add_option("--hang-timeout", real_options.hang_timeout,
                   "seconds without progress before the watchdog stops the run (default 2)")
      ->type_name("SECONDS");
  auto* real_trace = real_sub->add_option(
      "--trace", real_options.trace_file,
      "write a trace of the measured and the simulated run: " + ppsim::viz::trace_formats_help());
  auto* real_report = real_sub->add_option(
      "--report", real_options.report_file,
      "write an HTML report of the simulated and the measured run side by side");
  real_sub->add_flag("--json", real_options.json, "print one JSON object");
  real_sub->add_flag("--calibrate", real_options.calibrate,
                     "replay with per-op durations measured in the run before comparing");
  real_sub
      ->add_option("--profile-trace", real_options.profile_dir,
                   "also write the measured run as PyTorch profiler (Kineto) traces, one per rank")
      ->type_name("DIR");
  real_sub
      ->add_option("--calibration", common.calibration,
                   "predict with measured costs (of another run, another schedule too)")
      ->type_name("FILE");
  add_set(real_sub);

  auto* exp = app.add_subcommand("export", "print the lowered op lists, one line per rank");
  exp->add_option("config", config, "JSON config file")->required();
  add_set(exp);
  ExportOptions export_options;
  exp->add_option("--format", export_options.format,
                  "text (ppsim's op lists, default) or torch-csv (PyTorch's schedule CSV)")
      ->check(CLI::IsMember({"text", "torch-csv"}));
  exp->add_flag("--compute-only", export_options.compute_only,
                "torch-csv: the compute_only form (no SEND/RECV)");
  auto* export_out =
      exp->add_option("-o,--output", export_options.output, "write to this file instead of stdout");
  exp->add_option("--line-end", export_options.line_end,
                  "torch-csv: crlf (as Python's csv module writes, default) or lf")
      ->check(CLI::IsMember({"crlf", "lf"}));

  ImportOptions import_options;
  std::string import_csv;
  auto* imp = app.add_subcommand(
      "import", "read a PyTorch pipelining schedule CSV, print a ppsim config for it");
  imp->add_option("csv", import_csv, "PyTorch schedule CSV (compute_only or compute_comms)")
      ->required();
  imp->add_option("-o,--output", import_options.output, "write the config to this file");
  imp->add_flag("--custom", import_options.custom,
                "write the lowered op lists as a custom schedule instead of the CSV's rows");
  add_set(imp);

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

  app.set_version_flag("--version", version_text(), "print the version and the commit built");
  if (argc <= 1) {  // `ppsim` alone: what it can do
    std::cout << app.help();
    return kOk;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kOk : kBadInput;
  }
  if (*run && run_out.json && run_out.timeline) {
    std::cerr
        << "ppsim: error: --json excludes --timeline\nRun with --help for more information.\n";
    return kBadInput;
  }
  if (*exp && export_out->count() > 0 && export_options.output.empty()) {
    std::cerr << "ppsim: error: --output: the file name is empty\n";
    return kBadInput;
  }
  for (const auto& [opt, file] :
       {std::pair{trace_opt, &run_out.trace_file}, std::pair{svg_opt, &run_out.svg_file}})
    if (*run && opt->count() > 0 && file->empty()) {  // not "no file": a mistake
      std::cerr << "ppsim: error: " << opt->get_name() << ": the file name is empty\n";
      return kBadInput;
    }
  if (*check && junit_opt->count() > 0 && junit_file.empty()) {
    std::cerr << "ppsim: error: --junit: the file name is empty\n";
    return kBadInput;
  }

  for (const auto& [opt, file] : {std::pair{real_trace, &real_options.trace_file},
                                  std::pair{real_report, &real_options.report_file}})
    if (*real_sub && opt->count() > 0 && file->empty()) {
      std::cerr << "ppsim: error: " << opt->get_name() << ": the file name is empty\n";
      return kBadInput;
    }
  // Outputs that name one file (`o.svg`, `./o.svg`, a link to it), or an input: one would be
  // lost, or the input replaced. Compared by identity, refused before anything runs.
  std::vector<std::pair<std::string, std::string>> outputs;  // (option, path)
  std::vector<std::string> inputs;
  if (*run) {
    outputs = {{"--svg", run_out.svg_file}, {"--trace", run_out.trace_file}};
    inputs = {config};
  } else if (*real_sub) {
    outputs = {{"--report", real_options.report_file}, {"--trace", real_options.trace_file}};
    inputs = {config};
  } else if (*exp) {
    outputs = {{"--output", export_options.output}};
    inputs = {config};
  } else if (*imp) {
    outputs = {{"--output", import_options.output}};
    inputs = {import_csv};
  } else if (*search_sub) {
    outputs = {{"--output", search_options.output}, {"--report", search_options.report_file}};
    inputs = {config};
  } else if (*merge_sub) {
    outputs = {{"--output", merge_output}};
    inputs = merge_files;
  }  // report -o and check --junit against their inputs: cmd_report, cmd_check (every file)
  if (const std::string clash = colliding_outputs(outputs, inputs); !clash.empty()) {
    std::cerr << "ppsim: error: " << clash << "\n";
    return kBadInput;
  }
  // Configs may carry the executor's `real` and `model` sections whatever the subcommand.
#ifdef PPSIM_WITH_GPU
  ppsim::real::gpu::register_backends();  // before the `real` section checks backend names
#endif
  ppsim::real::register_mpi_backend();  // (a plugin, loaded only when a run asks for it)
  ppsim::real::register_settings_section();
  if (*run) return cmd_run(config, run_out, common);
  if (*real_sub) return cmd_real(config, real_options, common);
  if (*compare) return cmd_compare(configs, json, csv, sweep, common);
  if (*check) return cmd_check(configs, json, junit_file, common);
  if (*list) return cmd_list();
  if (*model_sub) return cmd_model(config, model_json, calibration, common);
  if (*search_sub) return cmd_search(config, search_options, common);
  if (*profile_sub) return cmd_import_profile(profile_traces, profile_options);
  if (*merge_sub) return cmd_merge(merge_files, merge_json, merge_output);
  if (*exp && (export_options.format != "text" || export_options.compute_only ||
               !export_options.output.empty()))
    return export_options.format == "text"
               ? (std::cerr << "ppsim: error: --compute-only and -o go with --format torch-csv\n",
                  kBadInput)
               : cmd_export_torch(config, export_options, common);
  if (*exp) return cmd_export(config, common);
  if (*imp) return cmd_import(import_csv, import_options, common);
  if (*report) return cmd_report(configs, report_file, report_title, report_sweep, common);
  return kBadInput;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything is opened: a closed stdout must not hand its descriptor to a trace file.
  ppsim::base::reserve_standard_descriptors();
  ppsim::base::StandardOutput out;
  int code = run_cli(argc, argv);
  // SIGPIPE keeps its default action: `ppsim export C | head` ends quietly, as other tools do.
  if (const std::string error = out.check(); !error.empty()) {
    std::cerr << "ppsim: error: " << error << "\n";
    code = ppsim::cli::kBadInput;
  }
  return code;
}
