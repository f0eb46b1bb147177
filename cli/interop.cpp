// `ppsim import` and `ppsim export --format torch-csv`: PyTorch pipelining's schedule CSV
// (docs/INTEROP.md).
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>

#include "commands.hpp"
#include "outputs.hpp"
#include "ppsim/base/output_file.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/config/torch_csv_source.hpp"
#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/torch_csv.hpp"
#include "ppsim/viz/json_report.hpp"

namespace ppsim::cli {

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

const std::vector<std::vector<std::int32_t>> kNoSteps;
const std::vector<std::int32_t> kNoCells;

std::string_view line_end_of(const std::string& name) {
  if (name == "crlf") return "\r\n";
  if (name == "lf") return "\n";
  throw UsageError(fmt::format("--line-end: expected crlf or lf, got '{}'", name));
}

}  // namespace

int cmd_import(const std::string& path, const ImportOptions& options, const CommonOptions& common) {
  return run_guarded(path, [&] {
    if (!config::is_torch_csv_path(path))
      throw UsageError(fmt::format("{}: expected a PyTorch schedule CSV (a .csv file)", path));
    refuse_input_as_output("--output", options.output, path);
    const config::Config c = config::load_config(path, common.overrides);
    const schedules::TorchCsv& csv = *config::torch_csv_of(c);
    // Built here so that a CSV that cannot be lowered is refused now, not when it is run.
    const config::Prepared run = config::prepare(c, {common.max_memory, config::Workload::program});
    nlohmann::ordered_json out;  // keys in the order a reader expects
    out["name"] = c.name;
    if (options.custom) {
      // The program as simulated: PyTorch's lowering and runtime waits written out.
      out["schedule"] = {{"kind", "custom"}, {"ops", lines_of(run.program->to_text())}};
    } else {
      out["schedule"] = {{"kind", "torch-csv"},
                         {"rows", lines_of(schedules::write_torch_csv(
                                      csv.program, csv.form, csv.steps, csv.cells, "\n"))}};
    }
    // The defaults, written out so that they can be edited (docs/CONFIG.md).
    out["costs"] = {
        {"forward", 1.0}, {"backward", 2.0}, {"backward_input", 1.0}, {"backward_weight", 1.0}};
    // The semantics it ran under (nccl unless --set), so the custom program runs the same.
    out["comm"] = {{"semantics", config::to_string(c.network.semantics)},
                   {"latency", 0.0},
                   {"bandwidth", 0.0}};
    write_out(viz::json_text(out) + "\n", options.output);
    return kOk;
  });
}

int cmd_export_torch(const std::string& path, const ExportOptions& options,
                     const CommonOptions& common) {
  return run_guarded(path, [&] {
    const std::string_view line_end = line_end_of(options.line_end);
    refuse_input_as_output("--output", options.output, path);
    const auto form = options.compute_only ? schedules::TorchCsvForm::compute_only
                                           : schedules::TorchCsvForm::compute_comms;
    const config::Config c = config::load_config(path, common.overrides);
    refuse_clashes({{"--output", options.output}}, read_files(c));  // the CSV it reads too
    std::string text;
    try {
      const schedules::TorchCsv* csv = config::torch_csv_of(c);
      if (csv && (csv->form == form || form == schedules::TorchCsvForm::compute_only)) {
        // Cell for cell as read, idle steps included (the compute actions of a compute_comms
        // file have no idle steps to keep).
        const bool same = csv->form == form;
        text = schedules::write_torch_csv(csv->program, form, same ? csv->steps : kNoSteps,
                                          same ? csv->cells : kNoCells, line_end);
      } else {
        const config::Prepared run =
            config::prepare(c, {common.max_memory, config::Workload::program});
        text = schedules::write_torch_csv(*run.program, form, {}, {}, line_end);
      }
    } catch (const schedules::ParameterError& e) {
      throw UsageError(fmt::format("{}: cannot write a PyTorch CSV: {}", path, e.what()));
    }
    write_out(text, options.output);
    return kOk;
  });
}

}  // namespace ppsim::cli
