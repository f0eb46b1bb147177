// `ppsim search CONFIG` and `ppsim merge RESULTS...` (docs/SEARCH.md): the fastest schedule within
// a memory limit, as a table, JSON, a runnable config or a PyTorch CSV, and the shards of one
// search joined again.
#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <iostream>

#include "commands.hpp"
#include "outputs.hpp"
#include "ppsim/base/excerpt.hpp"
#include "ppsim/base/human_bytes.hpp"
#include "ppsim/base/output_file.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/config/reader.hpp"
#include "ppsim/real/backend_error.hpp"
#include "ppsim/real/mpi_backend.hpp"
#include "ppsim/schedules/torch_csv.hpp"
#include "ppsim/search/search.hpp"
#include "ppsim/sim/analysis.hpp"
#include "ppsim/viz/html_report.hpp"
#include "ppsim/viz/json_report.hpp"
#include "progress.hpp"

namespace ppsim::cli {

namespace {

using nlohmann::json;

std::string gb(std::int64_t bytes) {
  return base::human_bytes(static_cast<double>(bytes));
}

// Text from a result (a shard's file may hold anything) made safe for a terminal: C1 controls
// (valid UTF-8, so excerpt keeps them) as \u00NN, then excerpt's escapes for the rest.
std::string printable(const std::string& text, std::size_t max = 200) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (c == 0xc2 && next >= 0x80 && next <= 0x9f) {
      out += fmt::format("\\u{:04x}", next);
      ++i;
    } else {
      out += text[i];
    }
  }
  return base::excerpt(out, max);
}

// JSON text with no raw control character: nlohmann escapes U+0000-U+001F; DEL and the C1
// controls (inside strings, the only place they can be) as \u escapes too.
std::string json_out(const json& j) {
  const std::string text = viz::json_text(j);
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (c == 0x7f) {
      out += "\\u007f";
    } else if (c == 0xc2 && next >= 0x80 && next <= 0x9f) {
      out += fmt::format("\\u{:04x}", next);
      ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string text_report(const search::SearchResult& r) {
  std::size_t finished = 0, fit = 0;
  for (const auto& c : r.candidates) {
    finished += c.finished;
    fit += r.within_limit(c);
  }
  const std::string u = printable(r.time_unit, 20);
  std::string out = fmt::format(
      "search {}: P={} M={}, memory limit {} per rank ({}), {} semantics\n"
      "  {} candidates: {} finished, {} within the limit{}\n\n",
      printable(r.name, 120), r.ranks, r.microbatches, gb(r.memory_limit), printable(r.limit_from),
      printable(r.semantics), r.candidates.size(), finished, fit,
      r.shard.count > 1 ? fmt::format(" (shard {}/{})", r.shard.index, r.shard.count) : "");
  if (r.best) {
    const auto& b = r.candidates[*r.best];
    int rank = 0;
    for (std::size_t i = 0; i < b.peak_memory_bytes.size(); ++i)
      if (b.peak_memory_bytes[i] == b.peak()) {
        rank = static_cast<int>(i);
        break;
      }
    out += fmt::format("best: {}\n", printable(b.schedule));
    out += fmt::format(
        "  makespan {:.6g} {}, bubble {:.4f}, peak {} (rank {}); lower bound {:.6g} {} (gap "
        "{:.1f}%)\n\n",
        b.makespan, u, b.bubble_fraction, gb(b.peak()), rank, r.lower_bound, u,
        r.lower_bound > 0 ? std::max(0.0, b.makespan / r.lower_bound - 1) * 100 : 0.0);
    if (r.written != r.best)
      out += fmt::format(
          "  not expressible in the format: {}\n  written (-o): {}\n\n", printable(b.inexpressible),
          r.written ? printable(r.candidates[*r.written].schedule) : "none within the limit");
  } else {
    out += "best: none finished within the limit\n\n";
  }
  out += "best per family:\n";
  out += fmt::format("  {:<16} {:>12} {:>7} {:>10}  {}\n", "family", "makespan", "bubble", "peak",
                     "schedule / verdict");
  for (const std::size_t i : search::best_per_family(r)) {
    const auto& c = r.candidates[i];
    const std::string f = printable(c.family, 40);
    if (!c.finished) {
      out += fmt::format("  {:<16} {:>12} {:>7} {:>10}  {}\n", f, "-", "-", "-",
                         printable(c.verdict, 70));
      continue;
    }
    out += fmt::format("  {:<16} {:>12.6g} {:>7.4f} {:>10}  {}{}\n", f, c.makespan,
                       c.bubble_fraction, gb(c.peak()), printable(c.schedule),
                       r.within_limit(c) ? "" : "  (over the limit)");
  }
  if (r.cut_short) out += "\n(cut short by --time-limit: some candidates were not run)\n";
  out += "\npareto front (peak memory against makespan):\n";
  for (std::size_t i : r.pareto) {
    const auto& c = r.candidates[i];
    out += fmt::format("  {:>10} {:>12.6g} {}  {}{}\n", gb(c.peak()), c.makespan, u,
                       printable(c.schedule), r.within_limit(c) ? "" : "  (over the limit)");
  }
  return out;
}

// `-o -`: stdout, as an empty name.
std::string output_of(const std::string& path) {
  return path == "-" ? std::string() : path;
}

// The winner's files: opened before the search (a bad path fails at once), published together.
struct SearchFiles {
  base::OutputSet set;
  base::OutputFile *output = nullptr, *report = nullptr;
};

void open_files(const SearchCliOptions& o, SearchFiles& files) {
  if (!output_of(o.output).empty()) files.output = &files.set.add("--output", o.output);
  if (!o.report_file.empty()) files.report = &files.set.add("--report", o.report_file);
}

// `text` to -o's file, or to stdout for `-o -`.
void put(SearchFiles& files, const std::string& text) {
  if (files.output)
    files.output->stream() << text;
  else
    std::cout << text;
}

void write_outputs(const search::SearchResult& r, const SearchCliOptions& o,
                   const CommonOptions& common, SearchFiles& files) {
  if (o.output.empty() && o.report_file.empty()) return;
  if (!r.best)
    throw UsageError(fmt::format("{}: nothing finished within the limit: no winner to write",
                                 o.output.empty() ? "--report" : "-o"));
  const auto& best = r.candidates[*r.best];
  const config::ResourceLimits limits{common.max_memory, config::Workload::run};
  // Each form checked to run to the candidate's makespan and peaks (search::winner_config).
  const json runnable = search::winner_config(r, best, limits);
  const config::Config winner = config::parse_config(runnable, r.source + " (winner)");
  if (!o.output.empty()) {
    if (o.format == "torch-csv") {
      // A CSV cannot hold every schedule (DualPipe's two routes): the fastest one it can.
      if (!r.written)
        throw UsageError(
            fmt::format("-o: no candidate within the limit can be written as a "
                        "PyTorch CSV (the best: {})",
                        printable(best.inexpressible)));
      const auto& w = r.candidates[*r.written];
      if (r.written != r.best)
        std::cerr << fmt::format(
            "ppsim: note: -o: the best, {} ({:.6g} {}), cannot be a PyTorch CSV: {}; writing {} "
            "({:.6g} {}), the fastest that can\n",
            printable(best.schedule), best.makespan, printable(r.time_unit, 20),
            printable(best.inexpressible), printable(w.schedule), w.makespan,
            printable(r.time_unit, 20));
      put(files, search::winner_csv(w, limits));
    } else {
      put(files, json_out(runnable) + "\n");
    }
  }
  if (!o.report_file.empty()) {
    std::vector<record::RunRecord> runs;
    runs.push_back(sim::analyze(winner, {.trace = true, .max_memory = common.max_memory}));
    viz::HtmlReportOptions ho;
    ho.title = fmt::format("ppsim search: {}", r.name);
    for (std::size_t i = 0; i < r.candidates.size(); ++i) {
      const auto& c = r.candidates[i];
      if (!c.finished) continue;
      const bool front = std::find(r.pareto.begin(), r.pareto.end(), i) != r.pareto.end();
      ho.pareto.push_back(
          {c.schedule, c.peak(), c.makespan, r.within_limit(c), front, r.best && *r.best == i});
    }
    ho.memory_limit = r.memory_limit;
    viz::write_html_report(files.report->stream(), runs, ho);
  }
  files.set.commit();  // both, or neither
}

// `compare --shard` outputs joined: each shard once, every point once, rows in point order.
json merge_compare(const std::vector<json>& docs, const std::vector<std::string>& files) {
  int count = -1;
  int points = -1;
  std::vector<json> rows;
  std::vector<bool> shard_seen, point_seen;
  std::string first_digest;
  for (std::size_t f = 0; f < docs.size(); ++f) {
    config::Reader r(docs[f], files[f], "");
    const json* shard = r.get("compare_shard");
    if (!shard || !shard->is_object())
      r.fail("compare_shard",
             "expected every file to be `ppsim compare --shard I/N --json` output");
    config::Reader sr(*shard, files[f], "compare_shard.");
    const int index = sr.integer("index", 0, 0, true);
    const int n = sr.integer("count", 0, 1, true);
    const int p = sr.integer("points", 0, 0, true);
    const json* digest_value = sr.get("digest");
    if (!digest_value || !digest_value->is_string())
      sr.fail("digest",
              "is required: the digest of the compare's input, as `compare --shard` "
              "writes it");
    const std::string digest = digest_value->get<std::string>();
    sr.reject_unknown();
    if (n > search::kMaxShards) sr.fail("count", "expected at most 1000000 shards");
    if (p > 1'000'000) sr.fail("points", "expected at most 1000000 points");
    if (count < 0) {
      count = n;
      points = p;
      shard_seen.assign(static_cast<std::size_t>(n), false);
      point_seen.assign(static_cast<std::size_t>(p), false);
      rows.assign(static_cast<std::size_t>(p), json());
    }
    if (f == 0) first_digest = digest;
    // Another config, --set or sweep is another compare, whatever its shape.
    if (digest != first_digest)
      sr.fail("digest", fmt::format("is not a shard of the same compare as {}: its input differs "
                                    "(digest {}, not {})",
                                    files.front(), base::excerpt(digest, 20),
                                    base::excerpt(first_digest, 20)));
    if (n != count || p != points || index >= n)
      sr.fail("count",
              fmt::format("is not a shard of the same compare as {} ({} points in {} shards)",
                          files.front(), points, count));
    if (shard_seen[static_cast<std::size_t>(index)])
      sr.fail("index", fmt::format("shard {} is given twice", index));
    shard_seen[static_cast<std::size_t>(index)] = true;
    const json* list = r.get("rows");
    if (!list || !list->is_array()) r.fail("rows", "expected an array of {\"point\", \"run\"}");
    for (std::size_t k = 0; k < list->size(); ++k) {
      config::Reader row((*list)[k], files[f], fmt::format("rows[{}].", k));
      const auto at = static_cast<std::size_t>(row.integer("point", 0, 0, true));
      if (at >= point_seen.size())
        row.fail("point", fmt::format("expected a point below {}", points));
      const json* run = row.get("run");
      if (!run || !run->is_object() || !run->contains("ok") || !(*run)["ok"].is_boolean())
        row.fail("run", "expected the run's JSON object, as `compare --json` prints it");
      row.reject_unknown();
      if (point_seen[at] || static_cast<int>(at % static_cast<std::size_t>(count)) != index)
        row.fail("point", fmt::format("point {} does not belong to shard {}/{} or is given twice",
                                      at, index, count));
      point_seen[at] = true;
      rows[at] = *run;
    }
    r.reject_unknown();
  }
  for (std::size_t i = 0; i < shard_seen.size(); ++i)
    if (!shard_seen[i])
      throw config::ConfigError(files.front(), "compare_shard",
                                fmt::format("shard {} of {} is missing", i, count));
  for (std::size_t i = 0; i < point_seen.size(); ++i)
    if (!point_seen[i])
      throw config::ConfigError(files.front(), "rows", fmt::format("point {} is missing", i));
  return json(rows);
}

void print(const search::SearchResult& r, bool as_json) {
  if (as_json)
    std::cout << json_out(search::to_json(r)) << "\n";
  else
    std::cout << text_report(r);
}

}  // namespace

std::int64_t parse_bytes(const std::string& option, const std::string& text) {
  const auto bad = [&] {
    return UsageError(fmt::format(
        "{}: expected bytes, a number with an optional unit (80GB, 74.5GiB, 8e10), got '{}'",
        option, base::excerpt(text, 40)));
  };
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::logic_error&) {
    throw bad();
  }
  std::string unit = text.substr(used);
  double scale = 1;
  static const std::pair<const char*, double> units[] = {{"", 1},
                                                         {"B", 1},
                                                         {"KB", 1e3},
                                                         {"MB", 1e6},
                                                         {"GB", 1e9},
                                                         {"TB", 1e12},
                                                         {"KiB", 1024.0},
                                                         {"MiB", 1048576.0},
                                                         {"GiB", 1073741824.0},
                                                         {"TiB", 1099511627776.0}};
  bool known = false;
  for (const auto& [name, s] : units)
    if (unit == name) {
      scale = s;
      known = true;
    }
  const double bytes = value * scale;
  if (!known || !std::isfinite(bytes) || bytes < 1 || bytes > 9.0e18) throw bad();
  return static_cast<std::int64_t>(bytes);
}

int cmd_search(const std::string& path, const SearchCliOptions& o, const CommonOptions& common) {
  return run_guarded(path, [&] {
    search::SearchOptions so;
    if (!o.memory_limit.empty()) so.memory_limit = parse_bytes("--memory-limit", o.memory_limit);
    if (!(o.time_limit >= 0) || o.time_limit > 1e6)
      throw UsageError("--time-limit: expected seconds >= 0");
    if (o.format != "config" && o.format != "torch-csv")
      throw UsageError(fmt::format("--format: expected config or torch-csv, got '{}'",
                                   base::excerpt(o.format, 40)));
    if (o.format != "config" && o.output.empty())
      throw UsageError("--format goes with -o FILE (the winner's file)");
    // `-o -` is stdout: refused with --json, which prints its own document there.
    const NamedOutputs named{{"--output", o.output == "-" ? "/dev/stdout" : o.output},
                             {"--report", o.report_file}};
    refuse_clashes(named, {path}, o.json);
    if (!o.shard.empty()) {
      const auto [index, count] = parse_shard(o.shard);
      so.shard = {index, count};
    }
    if (o.mpi && !o.shard.empty())
      throw UsageError("--mpi and --shard: the processes are the shards");
    so.time_limit = o.time_limit;
    so.seed = o.seed;
    so.format = o.format == "torch-csv" ? search::Format::torch_csv : search::Format::config;
    so.limits = {common.max_memory, config::Workload::run};
    // A PyTorch CSV runs under PyTorch's runtime, on NCCL: the winner is chosen as it will run
    // there (and as `ppsim import` of the CSV runs it).
    std::vector<std::string> overrides = common.overrides;
    if (o.format == "torch-csv") {
      overrides.push_back("comm.style=torch");
      overrides.push_back("comm.semantics=nccl");
    }
    CommonOptions with = common;
    with.overrides = overrides;
    const config::Config cfg = load_with_calibration(path, with);
    refuse_clashes(named, read_files(cfg));  // and the CSV the config reads
    SearchFiles files;
    if (!o.mpi) open_files(o, files);
    Progress progress("searching", 1);
    so.progress = [&](std::size_t i, std::size_t n, const std::string& label) {
      progress.phase("searching", n);
      progress.update(i, label);
    };
    if (!o.mpi) {
      const search::SearchResult r = search::search(cfg, so);
      progress.finish();
      write_outputs(r, o, common, files);
      print(r, o.json);
      return kOk;
    }
    // Under mpirun (real/mpi's plugin): process p runs shard p of the processes, process 0
    // gathers the shards' JSON, merges and writes; the others print nothing.
    std::unique_ptr<real::World> world;
    try {
      world = real::make_mpi_world();
    } catch (const real::BackendUnavailable& e) {
      throw UsageError(fmt::format("--mpi: {}", e.what()));
    }
    so.shard = {world->process(), world->processes()};
    if (world->process() == 0) try {  // process 0 writes: its paths are checked before the search
        open_files(o, files);
      } catch (const base::OutputError& e) {
        std::cerr << "ppsim: error: " << e.what() << "\n";
        world->abort(kBadInput);  // the others would wait in the gather
      }
    std::string mine;
    try {
      mine = search::to_json(search::search(cfg, so)).dump();
    } catch (const std::exception& e) {
      // The others would wait in the gather: say why and end the job.
      std::cerr << "ppsim: error: " << path << ": process " << world->process() << ": " << e.what()
                << "\n";
      world->abort(kBadInput);
    }
    progress.finish();
    const std::vector<std::string> parts = world->gather(mine);
    if (world->process() != 0) return kOk;
    std::vector<search::SearchResult> results;
    for (std::size_t i = 0; i < parts.size(); ++i)
      results.push_back(search::from_json(json::parse(parts[i]), fmt::format("process {}", i)));
    const search::SearchResult r = search::merge(results);
    write_outputs(r, o, common, files);
    print(r, o.json);
    return kOk;
  });
}

std::pair<int, int> parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  const auto bad = [&] {
    return UsageError(fmt::format("--shard: expected I/N with 0 <= I < N (e.g. 0/4), got '{}'",
                                  base::excerpt(text, 40)));
  };
  if (slash == std::string::npos) throw bad();
  auto number = [&](const std::string& digits) {
    if (digits.empty() || digits.size() > 7 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      throw bad();
    return std::stoi(digits);
  };
  const int index = number(text.substr(0, slash)), count = number(text.substr(slash + 1));
  if (count < 1 || count > search::kMaxShards || index >= count) throw bad();
  return {index, count};
}

int cmd_merge(const std::vector<std::string>& files, bool as_json, const std::string& output) {
  return run_guarded(files.empty() ? std::string("merge") : files.front(), [&] {
    std::vector<json> docs;
    for (const auto& f : files)
      docs.push_back(config::parse_json_text(config::read_config_file(f), f));
    // Shards of `compare --shard`: their rows in point order, as one `compare --json` prints.
    if (!docs.empty() && docs.front().is_object() && docs.front().contains("compare_shard")) {
      const json merged = merge_compare(docs, files);
      bool all_ok = true;
      for (const auto& row : merged) all_ok = all_ok && row["ok"].get<bool>();
      write_out(json_out(merged) + "\n", output_of(output));
      return all_ok ? kOk : kWrong;
    }
    std::vector<search::SearchResult> parts;
    for (std::size_t i = 0; i < files.size(); ++i)
      parts.push_back(search::from_json(docs[i], files[i]));
    const search::SearchResult r = search::merge(parts);
    if (!output.empty()) {
      write_out(json_out(search::to_json(r)) + "\n", output_of(output));
      return kOk;
    }
    print(r, as_json);
    return kOk;
  });
}

}  // namespace ppsim::cli
