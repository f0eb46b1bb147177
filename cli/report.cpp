// `ppsim report CONFIG... -o FILE`: the configs (or a sweep over each) simulated with their
// timelines recorded, written as one self-contained HTML page (viz/html_report.hpp).
#include <fmt/format.h>

#include <iostream>

#include "commands.hpp"
#include "outputs.hpp"
#include "ppsim/base/excerpt.hpp"
#include "ppsim/base/output_file.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/sim/analysis.hpp"
#include "ppsim/viz/html_report.hpp"
#include "progress.hpp"

namespace ppsim::cli {

int cmd_report(const std::vector<std::string>& paths, const std::string& output,
               const std::string& title, const SweepOptions& sweep, const CommonOptions& common) {
  return run_guarded(fmt::format("{}", fmt::join(paths, ", ")), [&] {
    if (output.empty()) throw UsageError("-o: the file name is empty");
    refuse_clashes({{"-o", output}}, paths);  // replacing a config with its own report: a typo
    // Every config is read before the output is opened or anything runs: a bad file fails fast
    // and leaves no file behind.
    const std::vector<config::Config> configs =
        sweep_points(paths, sweep, common, config::Workload::trace);
    for (const auto& cfg : configs) refuse_clashes({{"-o", output}}, read_files(cfg));
    base::OutputFile out(output);
    std::vector<record::RunRecord> runs;
    runs.reserve(configs.size());
    Progress progress("simulating", configs.size());
    for (const auto& cfg : configs) {
      progress.update(runs.size(), cfg.name);
      runs.push_back(sim::analyze(cfg, {.trace = true, .max_memory = common.max_memory}));
    }
    progress.phase("writing the report", 1);
    viz::HtmlReportOptions options;
    if (!title.empty()) options.title = title;
    viz::write_html_report(out.stream(), runs, options);
    out.commit();
    progress.finish();
    int code = kOk;
    for (const auto& run : runs) {
      std::cout << fmt::format("{:<7} {}\n", run.ok() ? "ok" : "FAIL",
                               base::excerpt(run.info.name, std::string::npos));
      if (!run.ok()) code = kWrong;
    }
    std::cout << fmt::format("wrote {} ({} run{}, Chart.js {})\n", output, runs.size(),
                             runs.size() == 1 ? "" : "s", viz::chart_js_version());
    return code;
  });
}

}  // namespace ppsim::cli
