#include "commands.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <filesystem>
#include <iostream>
#include <new>
#include <optional>
#include <stdexcept>

#include "check_inputs.hpp"
#include "junit.hpp"
#include "messages.hpp"
#include "outputs.hpp"
#include "ppsim/base/excerpt.hpp"
#include "ppsim/base/human_bytes.hpp"
#include "ppsim/base/output_file.hpp"
#include "ppsim/base/parallel_for.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/config/reader.hpp"
#include "ppsim/config/resources.hpp"
#include "ppsim/config/sweep.hpp"
#include "ppsim/profile/calibration.hpp"
#include "ppsim/profile/kineto.hpp"
#include "ppsim/schedules/generator.hpp"
#include "ppsim/schedules/lowering.hpp"
#include "ppsim/search/search.hpp"
#include "ppsim/sim/analysis.hpp"
#include "ppsim/sim/simulator.hpp"
#include "ppsim/viz/chrome_trace.hpp"
#include "ppsim/viz/json_report.hpp"
#include "ppsim/viz/summary_table.hpp"
#include "ppsim/viz/svg_timeline.hpp"
#include "ppsim/viz/terminal_timeline.hpp"
#include "ppsim/viz/trace_stream.hpp"
#include "progress.hpp"
#include "terminal.hpp"

namespace ppsim::cli {

using base::excerpt;

namespace {

// A ConfigError as the user should read it: config blames a value that came from --set on the
// `--set KEY=VALUE` that wrote it, and the file is named beside it; echoed values are shortened.
std::string config_message(const config::ConfigError& e, const std::string& file) {
  const std::string what = e.what();
  const std::string rest = what.starts_with(e.source() + ": ")
                               ? what.substr(e.source().size() + 2)
                               : what;  // the message after "SOURCE: "
  // Values echoed by the reader may be huge or binary: cut them (the file name is left whole).
  const std::string body = shorten_long_words(rest);
  if (e.source().starts_with("--set "))
    return fmt::format("--set {}: {} (config {})", base::excerpt(e.source().substr(6), 80), body,
                       file);
  return what.starts_with(e.source() + ": ") ? e.source() + ": " + body : what;
}

// Runs `body`; bad input and output errors become exit code 2 and are handed to `report`
// (by default: "ppsim: error: MESSAGE" on stderr).
template <typename F, typename R>
int guarded(const std::string& source, F&& body, R&& report) {
  try {
    return body();
  } catch (const std::bad_alloc&) {  // parameters too large for memory: bad input, not a crash
    report(fmt::format("{}: out of memory: the schedule is too large to simulate", source));
  } catch (const std::length_error&) {
    report(fmt::format("{}: the schedule is too large to simulate", source));
  } catch (const config::ConfigError& e) {
    report(config_message(e, source));
  } catch (const UsageError& e) {
    report(e.what());
  } catch (const base::OutputError& e) {
    report(e.what());
  } catch (const sim::SimulationError& e) {
    report(e.what());
  } catch (const profile::ProfileError& e) {  // a trace import-profile cannot use
    report(e.what());
  } catch (const std::filesystem::filesystem_error& e) {
    report(e.what());
  } catch (const std::exception& e) {  // a bug, but `check A B C` still reports B and C
    report(fmt::format("{}: internal error: {}", source, e.what()));
  }
  return kBadInput;
}

void to_stderr(const std::string& message) {
  std::cerr << "ppsim: error: " << message << "\n";
}

template <typename F>
int guarded(const std::string& source, F&& body) {
  return guarded(source, std::forward<F>(body), to_stderr);
}

// `text` with every line but the first indented by `n` spaces, so that the elements of a JSON
// array streamed one by one read as json::dump(2) of the whole array.
std::string indent_lines(const std::string& text, int n) {
  std::string out(static_cast<std::size_t>(n), ' ');
  for (char c : text) {
    out += c;
    if (c == '\n') out.append(static_cast<std::size_t>(n), ' ');
  }
  return out;
}

// --schedules takes a name or an alias, case-insensitively, as schedule.kind does.
const schedules::Generator* find_schedule(const std::string& name) {
  return schedules::Registry::instance().find(name);
}

}  // namespace

std::vector<std::string> split_list(const std::string& option,
                                    const std::vector<std::string>& raw) {
  std::vector<std::string> out;
  for (const auto& arg : raw) {
    std::size_t start = 0, index = 1;
    while (true) {
      const auto comma = arg.find(',', start);
      std::string item = arg.substr(start, comma == std::string::npos ? comma : comma - start);
      // "1f1b, zbv": the spaces around an element are not part of it.
      item.erase(0, item.find_first_not_of(" \t"));
      item.erase(item.find_last_not_of(" \t") + 1);
      if (item.empty())
        throw UsageError(fmt::format("{} '{}': element {} is empty (write a list as 8,16,32)",
                                     option, base::excerpt(arg, 80), index));
      out.push_back(std::move(item));
      if (comma == std::string::npos) break;
      start = comma + 1;
      ++index;
    }
  }
  return out;
}

std::vector<int> parse_positive_list(const std::string& option,
                                     const std::vector<std::string>& raw) {
  std::vector<int> out;
  for (const auto& item : split_list(option, raw)) {
    long long v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec == std::errc::result_out_of_range || (ec == std::errc() && v > INT_MAX))
      throw UsageError(fmt::format("{}: '{}' is too large (at most {})", option,
                                   base::excerpt(item, 80), INT_MAX));
    if (ec != std::errc() || end != item.data() + item.size())
      throw UsageError(fmt::format("{}: '{}' is not an integer", option, base::excerpt(item, 80)));
    if (v < 1)
      throw UsageError(fmt::format("{}: '{}' must be at least 1", option, base::excerpt(item, 80)));
    out.push_back(static_cast<int>(v));
  }
  return out;
}

namespace {

// Counts the ops a traced simulation has run, for the progress line (a metrics-only run gets no
// observer: it would lose the engine's fast path).
class ProgressObserver : public record::Observer {
 public:
  explicit ProgressObserver(Progress& progress) : progress_(progress) {}
  void on_compute(int, int, double, double) override { tick(); }
  void on_blocked(int, int, double, double) override { tick(); }
  void on_post(int, int, double) override { tick(); }

 private:
  void tick() {
    if ((++events_ & 0xfff) == 0) progress_.update(events_, "events");
  }
  Progress& progress_;
  std::size_t events_ = 0;
};

}  // namespace

void refuse_input_as_output(const std::string& option, const std::string& output,
                            const std::string& input) {
  if (output.empty() || input.empty()) return;
  if (base::same_file(output, input))  // by identity: `./c.json`, a link, a hard link
    throw UsageError(fmt::format("{} {}: is the input file {}: writing it would replace the input",
                                 option, output, input));
}

std::vector<std::string> read_files(const config::Config& cfg) {
  std::vector<std::string> files{cfg.source};
  // A torch-csv schedule's `file`, found beside the config as its source finds it.
  const auto& sched = cfg.raw.contains("schedule") ? cfg.raw["schedule"] : nlohmann::json();
  if (sched.is_object() && sched.contains("file") && sched["file"].is_string()) {
    std::filesystem::path p = sched["file"].get<std::string>();
    if (p.is_relative()) p = std::filesystem::path(cfg.source).parent_path() / p;
    files.push_back(p.string());
  }
  return files;
}

namespace {

// `--calibration FILE`: a fragment {"costs": ..., "comm": ...} (or an output holding it under
// "calibrated"), as assignments after the command line's own.
}  // namespace

void write_out(const std::string& text, const std::string& output) {
  if (output.empty()) {
    std::cout << text;
    return;
  }
  base::OutputFile out(output);
  out.stream() << text;
  out.commit();
}

config::Config load_with_calibration(const std::string& path, const CommonOptions& common) {
  if (common.calibration.empty()) return config::load_config(path, common.overrides);
  std::vector<std::string> overrides = common.overrides;
  const std::size_t own = overrides.size();
  const nlohmann::json fragment =
      config::parse_json_text(config::read_config_file(common.calibration), common.calibration);
  for (auto& o : profile::calibration_overrides(fragment, common.calibration, [&] {
         return config::prepare(config::load_config(path, common.overrides));
       }))
    overrides.push_back(std::move(o));
  try {
    return config::load_config(path, overrides);
  } catch (const config::ConfigError& e) {
    // A bad value of the fragment is blamed on its file, not on a --set nobody typed.
    for (std::size_t i = own; i < overrides.size(); ++i)
      if (e.source() == fmt::format("--set {}", base::excerpt(overrides[i], 80)))
        throw config::ConfigError(common.calibration, e.key(), e.message());
    throw;
  }
}

int cmd_run(const std::string& path, const RunOutputs& outputs, const CommonOptions& common) {
  return guarded(path, [&] {
    const NamedOutputs named{{"--trace", outputs.trace_file}, {"--svg", outputs.svg_file}};
    refuse_clashes(named, {path, common.calibration}, outputs.json);
    const config::Config cfg = load_with_calibration(path, common);
    // And the CSV the config reads.
    std::vector<std::string> inputs = read_files(cfg);
    inputs.push_back(common.calibration);
    refuse_clashes(named, inputs);
    // Opened before the simulation: a bad path fails at once, and the temporaries are cleaned up
    // whatever happens next. Published together: both files, or neither.
    base::OutputSet files;
    base::OutputFile* trace =
        outputs.trace_file.empty() ? nullptr : &files.add("--trace", outputs.trace_file);
    base::OutputFile* svg =
        outputs.svg_file.empty() ? nullptr : &files.add("--svg", outputs.svg_file);
    const bool want_trace = trace || svg || outputs.timeline;
    Progress progress("simulating", 0);
    ProgressObserver counter(progress);
    const viz::ChromeTraceOptions trace_options{config::microseconds_per_unit(cfg.time_unit),
                                                cfg.name};
    const viz::TraceFormat& format = viz::trace_format_for(outputs.trace_file);
    // --trace alone streams the events into the file as they happen (memory independent of the
    // run's length); other outputs need the whole recorded timeline.
    const bool stream = trace && !svg && !outputs.timeline;
    std::optional<viz::TraceStream> streamed;
    record::RunRecord a;
    if (stream) {
      const config::Prepared prepared =
          config::prepare(cfg, {common.max_memory, config::Workload::run});
      streamed.emplace(trace->stream(), format);
      streamed->begin_run(*prepared.program, trace_options);
      record::ObserverList sinks;
      sinks.add(&*streamed);
      sinks.add(&counter);
      a = sim::analyze(prepared, {.observer = &sinks});
    } else {
      a = sim::analyze(cfg, {.trace = want_trace,
                             .observer = want_trace ? &counter : nullptr,
                             .max_memory = common.max_memory});
    }
    int code = a.ok() ? kOk : kWrong;
    // A program that cannot run is not simulated: no metrics, and no timeline recorded.
    const bool invalid = want_trace && (stream ? !a.metrics : !a.trace);
    if (invalid) {
      // No picture of a program that cannot run; whatever was at the paths stays.
      streamed.reset();  // its writer thread is done with the file before the file goes
      files.abandon();
      code = kWrong;
    } else {
      if (trace) {
        progress.phase("writing " + outputs.trace_file, 0);
        if (streamed)
          streamed->finish(a);
        else
          viz::write_chrome_trace(trace->stream(), a, trace_options, format);
      }
      if (svg) {
        progress.phase("writing " + outputs.svg_file, 0);
        viz::write_svg_timeline(svg->stream(), a);
      }
      files.commit();
    }
    progress.finish();
    if (outputs.json)
      std::cout << viz::json_text(viz::to_json(a)) << "\n";
    else
      std::cout << viz::summary_text(a);
    if (outputs.timeline && a.trace) {
      const viz::TerminalTimelineOptions tl{.width = terminal_width(1),
                                            .color = color_wanted(1, outputs.no_color)};
      std::cout << "\n" << viz::terminal_timeline(a, tl);
    }
    if (invalid) {
      if (trace)
        std::cerr << fmt::format("ppsim: {}: trace not written: the program is invalid\n",
                                 outputs.trace_file);
      if (svg)
        std::cerr << fmt::format("ppsim: {}: SVG timeline not written: the program is invalid\n",
                                 outputs.svg_file);
      if (outputs.timeline) std::cerr << "ppsim: no timeline: the program is invalid\n";
    }
    return code;
  });
}

std::vector<config::Config> sweep_points(const std::vector<std::string>& paths,
                                         const SweepOptions& sweep, const CommonOptions& common,
                                         config::Workload kept) {
  config::SweepAxes axes{split_list("--schedules", sweep.schedules),
                         parse_positive_list("--microbatches", sweep.microbatches),
                         parse_positive_list("--chunks", sweep.chunks)};
  for (auto& kind : axes.kinds) {
    const schedules::Generator* g = find_schedule(kind);
    if (!g)
      throw UsageError(fmt::format("--schedules: unknown schedule '{}' (see `ppsim list`)",
                                   base::excerpt(kind, 80)));
    kind = g->name;
    // A schedule with one chunk count (zbv, dualpipev: 2; 1f1b: 1) runs with it: say so when
    // --chunks asks for another.
    const schedules::ParamSpec* chunks = schedules::find_param(g->params, "chunks");
    if (chunks && chunks->min == chunks->max)
      for (const int v : axes.chunks)
        if (v != chunks->min && chunks->max > 1)
          std::cerr << fmt::format(
              "ppsim: note: --chunks {}: {} runs with its only chunk count, {}\n", v, g->name,
              chunks->min);
  }
  std::vector<config::Config> points;
  for (const auto& path : paths) {
    config::Config base = load_with_calibration(path, common);
    if (!config::sweep_requested(axes)) {
      points.push_back(std::move(base));
      continue;
    }
    for (auto& one : config::sweep(base, axes)) points.push_back(std::move(one));
  }
  // Every run's record is kept until the table is printed: the points' sum must fit, not only
  // each point (each is checked against --max-memory when it is prepared).
  if (common.max_memory > 0 && points.size() > 1) {
    double sum = config::kBaseBytes;
    for (const auto& p : points)
      sum += config::estimated_bytes(config::estimate_ops(p), kept) - config::kBaseBytes;
    if (sum > static_cast<double>(common.max_memory))
      throw UsageError(fmt::format(
          "the {} runs keep about {} of records in all, above --max-memory {}; run fewer "
          "points (--schedules, --microbatches, --chunks, configs) or raise --max-memory",
          points.size(), base::human_bytes(sum, 1),
          base::human_bytes(static_cast<double>(common.max_memory), 1)));
  }
  return points;
}

int run_guarded(const std::string& source, const std::function<int()>& body) {
  return guarded(source, body);
}

void for_each_point(const std::vector<config::Config>& points, const CommonOptions& common,
                    const std::function<void(std::size_t)>& run) {
  Progress progress("simulating", points.size());
  // Each point is checked against the whole --max-memory: no more run at once than fit in it.
  const unsigned jobs = config::jobs_within_memory(
      points, {common.max_memory, config::Workload::run}, base::default_jobs());
  base::parallel_for(points.size(), jobs, run,
                     [&](std::size_t i) { progress.update(i, points[i].name); });
  progress.finish();
}

int cmd_compare(const std::vector<std::string>& paths, bool json, bool csv,
                const SweepOptions& sweep, const CommonOptions& common) {
  return guarded(fmt::format("{}", fmt::join(paths, ", ")), [&] {
    // All points first, so the progress line knows how many there are.
    std::vector<config::Config> points = sweep_points(paths, sweep, common);
    // --shard I/N: points I, I+N, ... (a Slurm array task), as JSON that `ppsim merge` joins.
    std::vector<std::size_t> index;
    const std::size_t total = points.size();
    if (!sweep.shard.empty()) {
      const auto [shard, count] = parse_shard(sweep.shard);
      if (!json) throw UsageError("--shard writes JSON for `ppsim merge`: add --json");
      // Of every point: `ppsim merge` refuses shards of another compare.
      const std::string digest = search::inputs_digest(points, common.max_memory);
      std::vector<config::Config> mine;
      for (std::size_t i = 0; i < points.size(); ++i)
        if (static_cast<int>(i % static_cast<std::size_t>(count)) == shard) {
          mine.push_back(std::move(points[i]));
          index.push_back(i);
        }
      points = std::move(mine);
      std::vector<record::RunRecord> shard_runs(points.size());
      for_each_point(points, common, [&](std::size_t i) {
        shard_runs[i] = sim::analyze(points[i], {.max_memory = common.max_memory});
      });
      nlohmann::json rows = nlohmann::json::array();
      for (std::size_t i = 0; i < shard_runs.size(); ++i)
        rows.push_back({{"point", index[i]}, {"run", viz::to_json(shard_runs[i])}});
      std::cout
          << viz::json_text(
                 {{"compare_shard",
                   {{"index", shard}, {"count", count}, {"points", total}, {"digest", digest}}},
                  {"rows", rows}})
          << "\n";
      for (const auto& a : shard_runs)
        if (!a.ok()) return kWrong;
      return kOk;
    }
    // Points are independent: simulated on all cores (PPSIM_JOBS), each into its own slot.
    std::vector<record::RunRecord> runs(points.size());
    for_each_point(points, common, [&](std::size_t i) {
      runs[i] = sim::analyze(points[i], {.max_memory = common.max_memory});
    });
    if (json) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& a : runs) arr.push_back(viz::to_json(a));
      std::cout << viz::json_text(arr) << "\n";
    } else if (csv) {
      std::cout << viz::compare_csv(runs);
    } else {
      std::cout << viz::compare_table(runs);
    }
    for (const auto& a : runs)
      if (!a.ok()) return kWrong;
    return kOk;
  });
}

namespace {

std::string verdict_type(record::VerdictKind kind) {
  switch (kind) {
    case record::VerdictKind::ok:
      return "ok";
    case record::VerdictKind::errors:
      return "errors";
    case record::VerdictKind::deadlock:
      return "deadlock";
    case record::VerdictKind::hang:
      return "hang";
    case record::VerdictKind::invalid:
      return "invalid";
    case record::VerdictKind::out_of_memory:
      return "out_of_memory";
  }
  return "wrong";
}

// One line saying why a run is wrong: the verdict and the first thing its report names.
std::string failure_message(const record::RunRecord& a) {
  std::string first;
  if (a.deadlock) {
    first = a.deadlock->describe();
    first = first.substr(0, first.find('\n'));
  } else if (!a.diagnostics.empty()) {
    first = a.diagnostics.front().kind + ": " + a.diagnostics.front().message;
  } else if (!a.out_of_memory.empty()) {
    first = a.out_of_memory.front().describe();
  }
  // A cycle over thousands of ranks is one long line: the message stays short, the text has it.
  return first.empty() ? a.verdict().text() : a.verdict().text() + ": " + base::excerpt(first, 400);
}

}  // namespace

int cmd_check(const std::vector<std::string>& paths, bool json, const std::string& junit_file,
              const CommonOptions& common) {
  // Opened first: a bad --junit path fails before anything is checked, and no partial report is
  // ever left (the file appears whole at the end, or not at all).
  std::optional<base::OutputFile> junit;
  std::vector<JunitCase> cases;
  const std::vector<CheckInput> inputs = expand_check_paths(paths);
  if (!junit_file.empty()) {
    const int opened = guarded(junit_file, [&] {
      // Reading a file and then replacing it with the report would lose it.
      for (const auto& in : inputs) {  // by identity: a link or a hard link to one of them too
        if (in.error.empty() && base::same_file(junit_file, in.path))
          throw UsageError(fmt::format("--junit {}: is one of the files to check", junit_file));
      }
      junit.emplace(junit_file);
      return kOk;
    });
    if (opened != kOk) return opened;
  }
  // Every file is reported in its place, each as soon as it is done (a later crash or kill loses
  // nothing already checked); the exit code is the worst of all.
  int code = kOk;
  bool first = true;
  auto emit_json = [&](nlohmann::json entry) {
    std::cout << (first ? "[\n" : ",\n") << indent_lines(viz::json_text(entry), 2);
    first = false;
  };
  for (const auto& input : inputs) {
    const std::string& path = input.path;
    std::string error = input.error;
    const int one =
        !error.empty()
            ? kBadInput
            : guarded(
                  path,
                  [&] {
                    const config::Config cfg = load_with_calibration(path, common);
                    const record::RunRecord a =
                        sim::analyze(cfg, {.max_memory = common.max_memory});
                    const schedules::OpLocator locate =
                        [&](int rank, int position) -> std::optional<schedules::OpLocation> {
                      if (!a.program) return std::nullopt;
                      return cfg.program->locate(*a.program, rank, position);
                    };
                    const int c = a.ok() ? kOk : kWrong;
                    const std::string text =
                        viz::check_text(a, path, locate, !common.overrides.empty());
                    if (json) {
                      nlohmann::json entry = viz::check_json(a, path, locate);
                      entry["exit_code"] = c;
                      emit_json(std::move(entry));
                    } else {
                      std::cout << text;
                    }
                    if (junit) {
                      JunitCase tc;
                      tc.classname = path;
                      tc.name = a.info.name;
                      if (!a.ok()) {
                        tc.result = JunitCase::Result::failure;
                        tc.type = verdict_type(a.verdict().kind);
                        tc.message = failure_message(a);
                        tc.text = text;
                      }
                      cases.push_back(std::move(tc));
                    }
                    return c;
                  },
                  [&](const std::string& message) { error = message; });
    if (one == kBadInput) {
      // The message usually starts with the path (and line:column) already; say it once.
      const std::string said =
          error.starts_with(path + ":") ? error : fmt::format("{}: {}", path, error);
      if (json) {
        std::cerr << "ppsim: error: " << error << "\n";
        emit_json({{"config", path},
                   {"name", nullptr},
                   {"ok", false},
                   {"verdict", "error"},
                   {"errors", nlohmann::json::array()},
                   {"deadlock", nullptr},
                   {"exit_code", kBadInput},
                   {"error", error}});
      } else {
        std::cout << "ERROR " << said << "\n";
      }
      if (junit) {
        // Named after the file, or the directory, as no schedule name could be read.
        std::string trimmed = path;
        while (trimmed.size() > 1 && trimmed.ends_with('/')) trimmed.pop_back();
        std::string name = std::filesystem::path(trimmed).stem().string();
        cases.push_back({path, name.empty() ? path : name, JunitCase::Result::error, "bad_input",
                         said, said + "\n"});
      }
    }
    code = std::max(code, one);
    std::cout.flush();
    if (!std::cout) return kBadInput;  // stdout is gone: main says why
  }
  if (json) std::cout << (first ? "[" : "") << "\n]\n";
  if (junit) {
    const int written = guarded(junit_file, [&] {
      write_junit(junit->stream(), "ppsim check", cases);
      junit->commit();
      return kOk;
    });
    if (written != kOk) return written;
  }
  return code;
}

int cmd_list() {
  std::cout << "schedules (schedule.kind):\n";
  for (const auto& g : schedules::Registry::instance().all()) {
    std::cout << fmt::format("  {:<18} {}\n", g.name, g.summary);
    if (!g.aliases.empty())
      std::cout << fmt::format("  {:<18} aliases: {}\n", "", fmt::join(g.aliases, ", "));
    // The lowering a config without comm.style gets for it, and why when it is not plain async.
    std::cout << fmt::format("  {:<18} default comm: {}{}\n", "", g.default_comm.text,
                             g.default_comm.why.empty() ? "" : " (" + g.default_comm.why + ")");
    for (const auto& p : g.params)
      std::cout << fmt::format("  {:<18}   {:<22} {}\n", "", p.name, p.description);
  }
  for (const auto& src : config::SourceRegistry::instance().all())
    if (src.name != "generated") std::cout << fmt::format("  {:<18} {}\n", src.name, src.summary);
  std::cout << "comm styles (comm.style):\n";
  for (const auto& st : schedules::LoweringRegistry::instance().all()) {
    std::cout << fmt::format("  {:<18} {}\n", st.name, st.summary);
    for (const auto& p : st.params)
      std::cout << fmt::format("  {:<18}   {:<22} {}\n", "", "comm." + p.name, p.description);
  }
  std::cout << fmt::format("matching (comm.matching): {}, {}\n",
                           config::to_string(model::Matching::tag),
                           config::to_string(model::Matching::fifo));
  return kOk;
}

int cmd_export(const std::string& path, const CommonOptions& common) {
  return guarded(path, [&] {
    const config::Prepared run = config::prepare(config::load_config(path, common.overrides),
                                                 {common.max_memory, config::Workload::program});
    std::cout << run.program->to_text();
    return kOk;
  });
}

}  // namespace ppsim::cli
