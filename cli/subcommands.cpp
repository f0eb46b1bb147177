#include "subcommands.hpp"

#include <iostream>
#include <memory>

#include "ppsim/config/config.hpp"
#include "ppsim/viz/trace_format.hpp"

namespace ppsim::cli {

namespace {

using Files = std::vector<std::pair<std::string, std::string>>;

void add_set(CLI::App* sub, CommonOptions& common) {
  sub->add_option("--set", common.overrides,
                  "override a config value, e.g. --set comm.style=blocking")
      ->type_name("KEY=VALUE");
  // --max-memory: refuse configs estimated to need more (docs/LIMITS.md).
  sub->add_option_function<std::string>(
         "--max-memory",
         [&common](const std::string& v) { common.max_memory = config::parse_bytes(v); },
         "refuse configs estimated to need more memory, e.g. 512M, 8G; 0 = no limit "
         "(default: half of physical memory)")
      ->type_name("BYTES")
      ->check([](const std::string& v) {
        try {
          config::parse_bytes(v);
          return std::string();
        } catch (const std::invalid_argument& e) {
          return std::string(e.what());
        }
      });
}

// An option given with an empty file name: a mistake, not "no file".
std::string empty_file(std::initializer_list<std::pair<CLI::Option*, const std::string*>> opts) {
  for (const auto& [opt, file] : opts)
    if (opt->count() > 0 && file->empty()) return opt->get_name() + ": the file name is empty";
  return "";
}

// --calibration FILE, on every subcommand that uses costs (its misuse and inputs name it too).
CLI::Option* add_calibration(CLI::App* sub, CommonOptions& common) {
  return sub
      ->add_option("--calibration", common.calibration,
                   "measured costs: `import-profile -o` or `real --calibrate --json` output")
      ->type_name("FILE");
}

Subcommand add_run(CLI::App& app, CommonOptions& common) {
  struct Args {
    std::string config;
    RunOutputs out;
  };
  auto a = std::make_shared<Args>();
  auto* run = app.add_subcommand("run", "simulate one config and print its metrics");
  run->add_option("config", a->config, "JSON config file")->required();
  run->add_flag("--json", a->out.json, "print one JSON object (docs/METRICS.md)");
  auto* trace = run->add_option("--trace", a->out.trace_file,
                                "write a trace for Perfetto: " + viz::trace_formats_help());
  auto* svg = run->add_option("--svg", a->out.svg_file,
                              "write an SVG timeline: one row per rank, a box per compute op");
  // Not ->excludes(): CLI11 prints that inside the help's name column.
  run->add_flag("--timeline", a->out.timeline,
                "print a timeline in the terminal after the summary, scaled to its width "
                "(not with --json)");
  run->add_flag("--no-color", a->out.no_color,
                "no ANSI colours in --timeline (default: colours when stdout is a terminal)");
  auto* calibration = add_calibration(run, common);
  add_set(run, common);
  Subcommand s{run, [a, &common] { return cmd_run(a->config, a->out, common); }};
  s.misuse = [a, trace, svg, calibration, &common] {
    if (a->out.json && a->out.timeline)
      return std::string("--json excludes --timeline\nRun with --help for more information.");
    return empty_file(
        {{trace, &a->out.trace_file}, {svg, &a->out.svg_file}, {calibration, &common.calibration}});
  };
  s.outputs = [a] { return Files{{"--svg", a->out.svg_file}, {"--trace", a->out.trace_file}}; };
  s.inputs = [a, &common] { return std::vector<std::string>{a->config, common.calibration}; };
  return s;
}

// The sweep options of compare and report (help texts differ a little).
void add_sweep(CLI::App* sub, SweepOptions& sweep, const char* microbatches_help,
               const char* chunks_help) {
  sub->add_option("--schedules", sweep.schedules, "sweep: schedule kinds, e.g. gpipe,1f1b")
      ->type_name("LIST");
  sub->add_option("--microbatches", sweep.microbatches, microbatches_help)->type_name("LIST");
  sub->add_option("--chunks", sweep.chunks, chunks_help)->type_name("LIST");
}

Subcommand add_compare(CLI::App& app, CommonOptions& common) {
  struct Args {
    std::vector<std::string> configs;
    bool json = false, csv = false;
    SweepOptions sweep;
  };
  auto a = std::make_shared<Args>();
  auto* compare = app.add_subcommand("compare", "one row per config, or a sweep over one config");
  compare->add_option("configs", a->configs, "JSON config files")->required();
  auto* json = compare->add_flag("--json", a->json, "print a JSON array");
  compare->add_flag("--csv", a->csv, "print CSV")->excludes(json);
  // Lists are split and checked by cmd_compare: CLI11 would drop empty elements silently.
  add_sweep(compare, a->sweep, "sweep: microbatch counts, e.g. 8,16",
            "sweep: chunks per rank (schedules that take chunks), e.g. 2,4");
  compare
      ->add_option(
          "--shard", a->sweep.shard,
          "run points I, I+N, ... only (a Slurm array index); with --json, for `ppsim merge`")
      ->type_name("I/N");
  auto* calibration = add_calibration(compare, common);
  add_set(compare, common);
  Subcommand s{compare,
               [a, &common] { return cmd_compare(a->configs, a->json, a->csv, a->sweep, common); }};
  s.misuse = [calibration, &common] { return empty_file({{calibration, &common.calibration}}); };
  s.inputs = [a, &common] {
    std::vector<std::string> in = a->configs;
    in.push_back(common.calibration);
    return in;
  };
  return s;
}

Subcommand add_check(CLI::App& app, CommonOptions& common) {
  struct Args {
    std::vector<std::string> configs;
    bool json = false;
    std::string junit;
  };
  auto a = std::make_shared<Args>();
  auto* check = app.add_subcommand(
      "check", "validate and look for deadlocks; exit 1 if any schedule is wrong");
  check
      ->add_option("configs", a->configs,
                   "config files, or directories: every *.json and *.csv under them")
      ->required();
  check->add_flag("--json", a->json, "print a JSON array of verdicts");
  auto* junit = check->add_option("--junit", a->junit,
                                  "also write a JUnit XML report, one testcase per file (for CI)");
  auto* calibration = add_calibration(check, common);
  add_set(check, common);
  // --junit against its inputs: cmd_check (every file found under a directory).
  Subcommand s{check, [a, &common] { return cmd_check(a->configs, a->json, a->junit, common); }};
  s.misuse = [a, junit, calibration, &common] {
    return empty_file({{junit, &a->junit}, {calibration, &common.calibration}});
  };
  return s;
}

Subcommand add_list(CLI::App& app) {
  return {app.add_subcommand("list", "list schedules and their parameters"),
          [] { return cmd_list(); }};
}

Subcommand add_model(CLI::App& app, CommonOptions& common) {
  struct Args {
    std::string config, calibration;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  auto* model = app.add_subcommand(
      "model", "per-stage costs and memory derived from the config's model and hardware");
  model->add_option("config", a->config, "JSON config file with model and hardware sections")
      ->required();
  model->add_flag("--json", a->json, "print one JSON object");
  auto* calibration =
      model
          ->add_option("--calibration", a->calibration,
                       "measured costs to set against the derived ones: the calibrated fragment "
                       "of `ppsim real --calibrate --json` (or its whole output)")
          ->type_name("FILE");
  add_set(model, common);
  Subcommand s{model,
               [a, &common] { return cmd_model(a->config, a->json, a->calibration, common); }};
  s.misuse = [a, calibration] { return empty_file({{calibration, &a->calibration}}); };
  return s;
}

Subcommand add_import_profile(CLI::App& app) {
  struct Args {
    std::vector<std::string> traces;
    ImportProfileOptions o;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "import-profile", "read PyTorch profiler traces of a pipeline run: its order and its costs");
  sub->add_option("traces", a->traces, "Kineto traces (.json, .json.gz), one per rank")->required();
  sub->add_flag("--json", a->o.json, "print one JSON object");
  auto* output = sub->add_option("-o,--output", a->o.output,
                                 "write the calibrated fragment (for --calibration)")
                     ->type_name("FILE");
  sub->add_option("--step", a->o.step, "use ProfilerStep#N (default the last)")->type_name("N");
  auto* map = sub->add_option("--map", a->o.map_file,
                              "regular expressions for other frameworks' range names "
                              "(docs/PROFILES.md)")
                  ->type_name("FILE");
  auto* report =
      sub->add_option("--report", a->o.report_file,
                      "HTML report: the measured run beside its replay with the measured costs")
          ->type_name("FILE");
  auto* trace =
      sub->add_option("--trace", a->o.trace_file,
                      "trace of the measured run and its replay: " + viz::trace_formats_help())
          ->type_name("FILE");
  auto* svg = sub->add_option("--svg", a->o.svg_file, "SVG timeline of the measured run")
                  ->type_name("FILE");
  Subcommand s{sub, [a] { return cmd_import_profile(a->traces, a->o); }};
  s.misuse = [a, output, map, report, trace, svg] {
    return empty_file({{output, &a->o.output},
                       {map, &a->o.map_file},
                       {report, &a->o.report_file},
                       {trace, &a->o.trace_file},
                       {svg, &a->o.svg_file}});
  };
  s.outputs = [a] {
    return Files{{"--output", a->o.output},
                 {"--report", a->o.report_file},
                 {"--trace", a->o.trace_file},
                 {"--svg", a->o.svg_file}};
  };
  s.inputs = [a] {
    std::vector<std::string> in = a->traces;
    in.push_back(a->o.map_file);
    return in;
  };
  return s;
}

Subcommand add_search(CLI::App& app, CommonOptions& common) {
  struct Args {
    std::string config;
    SearchCliOptions o;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "search", "the fastest schedule that finishes within a per-rank memory limit");
  sub->add_option("config", a->config, "JSON config file (its P, M, costs and comm)")->required();
  sub->add_option("--memory-limit", a->o.memory_limit,
                  "per rank: bytes or with a unit, e.g. 80GB (default hardware.memory_bytes)")
      ->type_name("BYTES");
  sub->add_option("--time-limit", a->o.time_limit,
                  "seconds the local search may take in all (default: its op budget alone)")
      ->type_name("S");
  sub->add_option("--seed", a->o.seed, "local search seed (default 1)");
  sub->add_option("--shard", a->o.shard,
                  "run shard I of N (a Slurm array index); join them with `ppsim merge`")
      ->type_name("I/N");
  sub->add_flag("--mpi", a->o.mpi,
                "under mpirun: each process searches a shard, process 0 prints the whole");
  sub->add_flag("--json", a->o.json, "print one JSON object");
  auto* output =
      sub->add_option("-o,--output", a->o.output,
                      "write the winner: a runnable config, or a CSV with --format torch-csv "
                      "(- for stdout)")
          ->type_name("FILE");
  sub->add_option("--format", a->o.format, "config (default) or torch-csv");
  auto* report = sub->add_option("--report", a->o.report_file,
                                 "HTML report: the Pareto chart and the winner's timeline")
                     ->type_name("FILE");
  auto* calibration = add_calibration(sub, common);
  add_set(sub, common);
  Subcommand s{sub, [a, &common] { return cmd_search(a->config, a->o, common); }};
  s.misuse = [a, output, report, calibration, &common] {
    if (a->o.output == "-" && a->o.json)
      return std::string(
          "--output - and --json: both print a document on standard output; write the winner "
          "to a file, or leave out --json");
    return empty_file(
        {{output, &a->o.output}, {report, &a->o.report_file}, {calibration, &common.calibration}});
  };
  s.outputs = [a] { return Files{{"--output", a->o.output}, {"--report", a->o.report_file}}; };
  s.inputs = [a, &common] { return std::vector<std::string>{a->config, common.calibration}; };
  return s;
}

Subcommand add_merge(CLI::App& app) {
  struct Args {
    std::vector<std::string> files;
    bool json = false;
    std::string output;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("merge", "join the JSON results of `ppsim search --shard` runs");
  sub->add_option("results", a->files, "JSON files, one per shard")->required();
  sub->add_flag("--json", a->json, "print one JSON object");
  auto* output =
      sub->add_option("-o,--output", a->output, "write the merged JSON here")->type_name("FILE");
  Subcommand s{sub, [a] { return cmd_merge(a->files, a->json, a->output); }};
  s.misuse = [a, output] { return empty_file({{output, &a->output}}); };
  s.outputs = [a] { return Files{{"--output", a->output}}; };
  s.inputs = [a] { return a->files; };
  return s;
}

Subcommand add_real(CLI::App& app, CommonOptions& common) {
  struct Args {
    std::string config;
    RealOptions o;
  };
  auto a = std::make_shared<Args>();
  auto& o = a->o;
  // Values are checked by cmd_real so that each error names its option (docs/EXECUTOR.md).
  auto* sub = app.add_subcommand(
      "real", "run the op lists on the executor, then print measured vs predicted");
  sub->add_option("config", a->config, "JSON config file")->required();
  sub->add_option("--backend", o.backend, "transport (default host)")->type_name("NAME");
  sub->add_option("--compute", o.compute, "compute (default emulated)")->type_name("NAME");
  sub->add_option("--time-scale", o.time_scale,
                  "wall clock per time unit, e.g. 1ms, 250us, 0 (default 1ms)")
      ->type_name("DURATION");
  sub->add_option("--memory-scale", o.memory_scale,
                  "real bytes per modelled byte, in (0, 1] (default: chosen)")
      ->type_name("X");
  sub->add_option("--iterations", o.iterations,
                  "measured runs; the median one is reported (default 1)")
      ->type_name("N");
  sub->add_option("--warmup", o.warmup, "runs before them (default 0)")->type_name("K");
  sub->add_option("--hang-timeout", o.hang_timeout,
                  "seconds without progress before the watchdog stops the run (default 2)")
      ->type_name("SECONDS");
  auto* trace = sub->add_option(
      "--trace", o.trace_file,
      "write a trace of the measured and the simulated run: " + viz::trace_formats_help());
  auto* report =
      sub->add_option("--report", o.report_file,
                      "write an HTML report of the simulated and the measured run side by side");
  sub->add_flag("--json", o.json, "print one JSON object");
  sub->add_flag("--calibrate", o.calibrate,
                "replay with per-op durations measured in the run before comparing");
  auto* profile = sub->add_option("--profile-trace", o.profile_dir,
                                  "also write the measured run as PyTorch profiler (Kineto) "
                                  "traces, one per rank, replacing an earlier run's")
                      ->type_name("DIR");
  auto* calibration =
      sub->add_option("--calibration", common.calibration,
                      "predict with measured costs (of another run, another schedule too)")
          ->type_name("FILE");
  add_set(sub, common);
  Subcommand s{sub, [a, &common] { return cmd_real(a->config, a->o, common); }};
  s.misuse = [a, trace, report, profile, calibration, &common] {
    return empty_file({{trace, &a->o.trace_file},
                       {report, &a->o.report_file},
                       {profile, &a->o.profile_dir},
                       {calibration, &common.calibration}});
  };
  s.outputs = [a] { return Files{{"--report", a->o.report_file}, {"--trace", a->o.trace_file}}; };
  s.inputs = [a, &common] { return std::vector<std::string>{a->config, common.calibration}; };
  return s;
}

Subcommand add_export(CLI::App& app, CommonOptions& common) {
  struct Args {
    std::string config;
    ExportOptions o;
  };
  auto a = std::make_shared<Args>();
  auto* exp = app.add_subcommand("export", "print the lowered op lists, one line per rank");
  exp->add_option("config", a->config, "JSON config file")->required();
  add_set(exp, common);
  exp->add_option("--format", a->o.format,
                  "text (ppsim's op lists, default) or torch-csv (PyTorch's schedule CSV)")
      ->check(CLI::IsMember({"text", "torch-csv"}));
  exp->add_flag("--compute-only", a->o.compute_only,
                "torch-csv: the compute_only form (no SEND/RECV)");
  auto* output =
      exp->add_option("-o,--output", a->o.output, "write to this file instead of stdout");
  exp->add_option("--line-end", a->o.line_end,
                  "torch-csv: crlf (as Python's csv module writes, default) or lf")
      ->check(CLI::IsMember({"crlf", "lf"}));
  Subcommand s{exp, [a, &common] {
                 const auto& o = a->o;
                 if (o.format == "text" && (o.compute_only || !o.output.empty())) {
                   std::cerr << "ppsim: error: --compute-only and -o go with --format torch-csv\n";
                   return kBadInput;
                 }
                 return o.format == "text" ? cmd_export(a->config, common)
                                           : cmd_export_torch(a->config, o, common);
               }};
  s.misuse = [a, output] { return empty_file({{output, &a->o.output}}); };
  s.outputs = [a] { return Files{{"--output", a->o.output}}; };
  s.inputs = [a] { return std::vector<std::string>{a->config}; };
  return s;
}

Subcommand add_import(CLI::App& app, CommonOptions& common) {
  struct Args {
    std::string csv;
    ImportOptions o;
  };
  auto a = std::make_shared<Args>();
  auto* imp = app.add_subcommand(
      "import", "read a PyTorch pipelining schedule CSV, print a ppsim config for it");
  imp->add_option("csv", a->csv, "PyTorch schedule CSV (compute_only or compute_comms)")
      ->required();
  auto* output = imp->add_option("-o,--output", a->o.output, "write the config to this file");
  imp->add_flag("--custom", a->o.custom,
                "write the lowered op lists as a custom schedule instead of the CSV's rows");
  add_set(imp, common);
  Subcommand s{imp, [a, &common] { return cmd_import(a->csv, a->o, common); }};
  s.misuse = [a, output] { return empty_file({{output, &a->o.output}}); };
  s.outputs = [a] { return Files{{"--output", a->o.output}}; };
  s.inputs = [a] { return std::vector<std::string>{a->csv}; };
  return s;
}

Subcommand add_report(CLI::App& app, CommonOptions& common) {
  struct Args {
    std::vector<std::string> configs;
    std::string file, title;
    SweepOptions sweep;
  };
  auto a = std::make_shared<Args>();
  auto* report = app.add_subcommand(
      "report", "one self-contained HTML page: table, timelines, memory and sweep charts");
  report->add_option("configs", a->configs, "JSON config files")->required();
  report->add_option("-o,--output", a->file, "the HTML file to write")->required();
  report->add_option("--title", a->title, "the page title (default: ppsim report)");
  add_sweep(report, a->sweep, "sweep: microbatch counts, e.g. 8,16,32,64 (adds the bubble chart)",
            "sweep: chunks per rank, e.g. 2,4");
  auto* calibration = add_calibration(report, common);
  add_set(report, common);
  // (cmd_report also checks -o against the CSVs the configs read.)
  Subcommand s{
      report, [a, &common] { return cmd_report(a->configs, a->file, a->title, a->sweep, common); }};
  s.misuse = [calibration, &common] { return empty_file({{calibration, &common.calibration}}); };
  s.outputs = [a] { return Files{{"-o", a->file}}; };
  s.inputs = [a, &common] {
    std::vector<std::string> in = a->configs;
    in.push_back(common.calibration);
    return in;
  };
  return s;
}

}  // namespace

std::vector<Subcommand> add_subcommands(CLI::App& app, CommonOptions& common) {
  return {add_run(app, common),    add_compare(app, common), add_check(app, common),
          add_list(app),           add_model(app, common),   add_import_profile(app),
          add_search(app, common), add_merge(app),           add_real(app, common),
          add_export(app, common), add_import(app, common),  add_report(app, common)};
}

}  // namespace ppsim::cli
