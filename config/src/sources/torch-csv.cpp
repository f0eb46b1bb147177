// `torch-csv`: a PyTorch pipelining schedule CSV (schedules/torch_csv.hpp), from a file
// (`schedule.file`, relative to the config's directory) or inline (`schedule.rows`, one string per
// rank). A compute_only CSV is lowered with comm style torch, a compute_comms one run with
// PyTorch's runtime waits (torch_runtime).
#include <fmt/format.h>

#include <filesystem>

#include "ppsim/base/excerpt.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/config/torch_csv_source.hpp"
#include "ppsim/schedules/error.hpp"

namespace ppsim::config {

namespace sources {
namespace {

class TorchCsvSpec : public ProgramSpec {
 public:
  // `path`: the CSV file, or "" for inline rows.
  TorchCsvSpec(schedules::TorchCsv csv, std::int64_t merge_bw, std::int64_t runtime,
               std::string path)
      : csv_(std::move(csv)), merge_bw_(merge_bw), runtime_(runtime), path_(std::move(path)) {}
  schedules::Program build(const schedules::LoweringOptions&,
                           const std::string& source) const override {
    try {
      if (csv_.form == schedules::TorchCsvForm::compute_comms)
        return schedules::torch_runtime(csv_.program);
      schedules::LoweringOptions torch{
          "torch", {{"merge_bw", merge_bw_}, {"runtime", runtime_}}, csv_.steps};
      return schedules::lower(csv_.program, torch);
    } catch (const schedules::ParameterError& e) {
      if (!path_.empty()) throw ConfigError(path_, "", e.what());
      throw ConfigError(source, "schedule.rows", e.what());
    }
  }
  std::string comm_style(const schedules::LoweringOptions&) const override {
    return csv_.form == schedules::TorchCsvForm::compute_only ? "torch" : "custom";
  }
  bool sweepable() const override { return false; }
  bool nccl_by_default() const override { return true; }
  const schedules::TorchCsv& csv() const { return csv_; }

 private:
  schedules::TorchCsv csv_;
  std::int64_t merge_bw_, runtime_;
  std::string path_;
};

// "row 2 (rank 1), cell 5: ..." for a file; "cell 5: ..." under schedule.rows[1].
schedules::TorchCsv parse_or_fail(const std::string& text, const std::string& source,
                                  const std::string& key, bool inline_rows) {
  try {
    return schedules::parse_torch_csv(text);
  } catch (const schedules::ParseError& e) {
    if (e.line() <= 0) throw ConfigError(source, key, e.what());
    if (inline_rows)
      throw ConfigError(source, fmt::format("schedule.rows[{}]", e.line() - 1),
                        fmt::format("cell {}: {}", e.column(), e.what()));
    throw ConfigError(
        source, key,
        fmt::format("row {} (rank {}), cell {}: {}", e.line(), e.line() - 1, e.column(), e.what()));
  }
}

std::shared_ptr<const ProgramSpec> read(Reader& s, const std::string&) {
  const nlohmann::json* file = s.get("file");
  const nlohmann::json* rows = s.get("rows");
  const std::int64_t merge_bw = s.integer("merge_bw", 0, 0);
  if (merge_bw > 1) s.fail("merge_bw", "expected 0 or 1");
  const std::int64_t runtime = s.integer("runtime", 0, 0);
  if (runtime > 1) s.fail("runtime", "expected 0 or 1");
  if ((file == nullptr) == (rows == nullptr))
    s.fail(file ? "rows" : "file",
           "kind \"torch-csv\" takes either file (a PyTorch schedule CSV) or rows (its rows, one "
           "string per rank)");
  s.reject_unknown();
  schedules::TorchCsv csv;
  std::string path;
  if (file) {
    if (!file->is_string() || file->get<std::string>().empty())
      s.fail("file", fmt::format("expected a file name, got {}", Reader::describe(*file)));
    // A NUL would end the name the system sees: "a.csv\u0000x" must not read a.csv.
    if (file->get_ref<const std::string&>().find('\0') != std::string::npos)
      s.fail("file", fmt::format("a file name holds no NUL character, got '{}'",
                                 base::excerpt(file->get<std::string>(), 60)));
    std::filesystem::path p = file->get<std::string>();
    if (p.is_relative()) p = std::filesystem::path(s.source()).parent_path() / p;
    path = p.string();
    csv = parse_or_fail(read_config_file(path), path, "", false);
  } else {
    if (!rows->is_array() || rows->empty())
      s.fail("rows", fmt::format("expected an array with one string per rank, got {}",
                                 Reader::describe(*rows)));
    std::string text;
    for (std::size_t i = 0; i < rows->size(); ++i) {
      const auto& row = (*rows)[i];
      if (!row.is_string())
        s.fail(fmt::format("rows[{}]", i),
               fmt::format("expected a string of cells, got {}", Reader::describe(row)));
      if (row.get_ref<const std::string&>().find_first_of("\r\n") != std::string::npos)
        s.fail(fmt::format("rows[{}]", i), "one element is one rank's row and holds no line break");
      text += row.get<std::string>() + "\n";
    }
    csv = parse_or_fail(text, s.source(), "schedule.rows", true);
  }
  for (const auto& [key, value] : {std::pair{"merge_bw", merge_bw}, std::pair{"runtime", runtime}})
    if (value && csv.form == schedules::TorchCsvForm::compute_comms)
      s.fail(key, "only a compute_only CSV is lowered; this one has its SEND/RECV written out");
  return std::make_shared<TorchCsvSpec>(std::move(csv), merge_bw, runtime, std::move(path));
}

}  // namespace

void register_torch_csv(SourceRegistry& registry) {
  registry.add({"torch-csv",
                "a PyTorch pipelining schedule CSV: schedule.file, or schedule.rows inline",
                [](std::string_view kind) { return kind == "torch-csv"; }, read});
}

}  // namespace sources

const schedules::TorchCsv* torch_csv_of(const Config& config) {
  const auto* spec = dynamic_cast<const sources::TorchCsvSpec*>(config.program.get());
  return spec ? &spec->csv() : nullptr;
}

bool is_torch_csv_path(const std::string& path) {
  return path.size() > 4 && path.ends_with(".csv");
}

nlohmann::json torch_csv_config(const std::string& path) {
  const std::filesystem::path p(path);
  return {{"name", p.stem().string()},
          {"schedule", {{"kind", "torch-csv"}, {"file", p.filename().string()}}}};
}

}  // namespace ppsim::config
