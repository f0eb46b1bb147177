// `ppsim import-profile TRACE...` (docs/PROFILES.md): PyTorch profiler traces of a pipeline run
// → the measured run (order, timeline, makespan) and the costs it measured, as a fragment that
// `ppsim run --calibration` and `ppsim model --calibration` take.
#include <fmt/format.h>

#include <array>
#include <filesystem>
#include <iostream>

#include "commands.hpp"
#include "outputs.hpp"
#include "ppsim/base/excerpt.hpp"
#include "ppsim/base/output_file.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/profile/kineto.hpp"
#include "ppsim/sim/analysis.hpp"
#include "ppsim/viz/chrome_trace.hpp"
#include "ppsim/viz/html_report.hpp"
#include "ppsim/viz/json_report.hpp"
#include "ppsim/viz/svg_timeline.hpp"
#include "ppsim/viz/trace_stream.hpp"

namespace ppsim::cli {

namespace {

using nlohmann::json;

std::string ops_line(const schedules::Program& p, int rank) {
  std::string line;
  for (const auto& op : p.ops(rank)) line += (line.empty() ? "" : ",") + schedules::op_text(op);
  return line;
}

json to_json(const profile::Imported& im) {
  const auto& rec = im.measured;
  const auto& m = *rec.metrics;
  json ranks = json::array();
  for (const auto& r : im.ranks) {
    const auto& rm = m.per_rank[static_cast<std::size_t>(r.rank)];
    ranks.push_back({{"rank", r.rank},
                     {"file", r.file},
                     {"step", r.step},
                     {"offset", r.offset},
                     {"device_timed", r.device},
                     {"kernel_timed", r.launched},
                     {"start", rm.start},
                     {"end", rm.end},
                     {"busy", rm.busy},
                     {"ops", ops_line(*rec.program, r.rank)}});
  }
  return {{"time_unit", rec.info.time_unit},
          {"ranks", rec.program->ranks()},
          {"stages", rec.program->stages()},
          {"microbatches", rec.program->microbatches()},
          {"latency", im.latency},
          {"bandwidth", im.bandwidth},
          {"launch_overhead", im.launch_overhead},
          {"measured",
           {{"makespan", m.makespan},
            {"bubble_fraction", m.bubble_fraction},
            {"per_rank", ranks},
            {"transfers",
             {{"pairs", im.transfers.pairs},
              {"unpaired", im.transfers.unpaired},
              {"median", im.transfers.median},
              {"sizes", im.transfers.sizes}}}}},
          {"calibrated", profile::calibration_fragment(im.calibrated, im.measured.program.get())}};
}

std::string text(const profile::Imported& im) {
  const auto& rec = im.measured;
  const auto& p = *rec.program;
  const auto& m = *rec.metrics;
  const std::string u = rec.info.time_unit;
  std::size_t actions = 0, device = 0;
  for (const auto& r : im.ranks) device += r.device;
  actions = p.total_ops();
  std::string out = fmt::format(
      "import-profile: {} traces, P={} S={} M={}, {} actions ({} timed on the GPU side)\n",
      im.ranks.size(), p.ranks(), p.stages(), p.microbatches(), actions, device);
  out += fmt::format("  {:>4} {:<24} {:>5} {:>7} {:>12} {:>10} {:>10}\n", "rank", "file", "step",
                     "actions", "offset " + u, "busy " + u, "end " + u);
  for (const auto& r : im.ranks) {
    const auto& rm = m.per_rank[static_cast<std::size_t>(r.rank)];
    out += fmt::format("  {:>4} {:<24} {:>5} {:>7} {:>12.4f} {:>10.4f} {:>10.4f}\n", r.rank,
                       base::excerpt(std::filesystem::path(r.file).filename().string(), 24),
                       r.step < 0 ? std::string("-") : std::to_string(r.step), p.ops(r.rank).size(),
                       r.offset, rm.busy, rm.end);
  }
  out += fmt::format("  measured makespan {:.4f} {}, bubble {:.4f}; launch overhead {:.4f} {}\n",
                     m.makespan, u, m.bubble_fraction, im.launch_overhead, u);
  const auto& tr = im.transfers;
  if (tr.pairs > 0)
    out += fmt::format(
        "  transfers: {} paired ({} unpaired), median {:.4f} {}; latency {:.4f} {}, bandwidth {}\n",
        tr.pairs, tr.unpaired, tr.median, u, im.latency, u,
        im.bandwidth > 0 ? fmt::format("{:.4g} bytes/{}", im.bandwidth, u)
                         : std::string("- (one message size: all in the latency)"));
  else
    out += fmt::format(
        "  transfers: none paired ({} sends and receives unpaired); one-way "
        "latency {:.4f} {} (from the actions' pairs)\n",
        tr.unpaired, im.latency, u);
  out += "\n  costs measured (mean per stage, stalls left out):\n";
  out += fmt::format("  {:>5} {:>4} {:>10} {:>10} {:>10} {:>10}\n", "stage", "rank", "F", "I", "W",
                     "B");
  const json frag = profile::calibration_fragment(im.calibrated);
  for (int s = 0; s < p.stages(); ++s) {
    const json& c = frag["costs"]["per_stage"][std::to_string(s)];
    auto cell = [&](const char* k) {
      return c.contains(k) ? fmt::format("{:.4f}", c[k].get<double>()) : std::string("-");
    };
    out +=
        fmt::format("  {:>5} {:>4} {:>10} {:>10} {:>10} {:>10}\n", s, p.rank_of(s), cell("forward"),
                    cell("backward_input"), cell("backward_weight"), cell("backward"));
  }
  return out;
}

// A custom config that replays the imported order with the costs it measured.
json replay_config(const profile::Imported& im) {
  const auto& p = *im.measured.program;
  json ops = json::array();
  for (int r = 0; r < p.ranks(); ++r) ops.push_back(ops_line(p, r));
  json j = profile::calibration_fragment(im.calibrated);
  j["name"] = "imported profile, replayed with its measured costs";
  j["time_unit"] = im.measured.info.time_unit;
  j["schedule"] = {{"kind", "custom"}, {"ops", ops}};
  // As PyTorch runs it (NCCL); receives posted at the start, as its runtime posts them ahead.
  j["comm"]["style"] = "async";
  j["comm"]["prefetch"] = "all";
  return j;
}

}  // namespace

int cmd_import_profile(const std::vector<std::string>& files, const ImportProfileOptions& o) {
  return run_guarded(files.empty() ? std::string("import-profile") : files.front(), [&] {
    // Every output against the others and the files read, then opened, before a trace is read.
    const NamedOutputs named{{"--output", o.output},
                             {"--report", o.report_file},
                             {"--trace", o.trace_file},
                             {"--svg", o.svg_file}};
    std::vector<std::string> inputs = files;
    inputs.push_back(o.map_file);
    refuse_clashes(named, inputs, o.json);
    profile::ImportOptions io;
    if (o.step) {
      if (*o.step < 0) throw UsageError("--step: expected a profiler step number >= 0");
      io.step = o.step;
    }
    base::OutputSet set;
    std::array<base::OutputFile*, 4> out{};  // in the order of `named`
    for (std::size_t i = 0; i < named.size(); ++i)
      if (!named[i].second.empty()) out[i] = &set.add(named[i].first, named[i].second);
    std::vector<profile::ActionPattern> patterns = profile::default_patterns();
    if (!o.map_file.empty())
      for (auto& p : profile::read_map(o.map_file)) patterns.push_back(std::move(p));
    std::vector<profile::RankTrace> traces;
    for (const auto& f : files) traces.push_back(profile::read_trace(f, patterns));
    const profile::Imported im = profile::import_traces(traces, io, patterns);
    if (out[0])
      out[0]->stream() << viz::json_text(profile::calibration_fragment(im.calibrated,
                                                                       im.measured.program.get()))
                       << "\n";
    // The imported order replayed with the costs it measured, beside the measured run.
    std::optional<record::RunRecord> predicted;
    if (out[1] || out[2])
      predicted = sim::analyze(config::parse_config(replay_config(im), "the imported profile"),
                               {.trace = true});
    if (out[2]) {
      std::vector<viz::LabelledRun> runs;
      if (predicted->trace) runs.push_back({&*predicted, "replayed"});
      runs.push_back({&im.measured, "measured"});
      viz::write_chrome_trace(
          out[2]->stream(), runs,
          {config::microseconds_per_unit(im.measured.info.time_unit), "imported profile"},
          viz::trace_format_for(o.trace_file));
    }
    if (out[3]) viz::write_svg_timeline(out[3]->stream(), im.measured);
    if (out[1]) {
      viz::HtmlReportOptions ho;
      ho.title = "ppsim import-profile";
      viz::write_html_report(out[1]->stream(), {*predicted, im.measured}, ho);
    }
    set.commit();  // all four, or none
    if (o.json)
      std::cout << viz::json_text(to_json(im)) << "\n";
    else
      std::cout << text(im);
    return kOk;
  });
}

}  // namespace ppsim::cli
