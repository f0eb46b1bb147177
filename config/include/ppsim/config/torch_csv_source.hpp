#pragma once
// The `torch-csv` program source (config/src/sources/torch-csv.cpp): a PyTorch pipelining schedule
// CSV as a config's schedule, from a file or inline. docs/INTEROP.md.
#include <string>

#include "ppsim/config/config.hpp"
#include "ppsim/schedules/torch_csv.hpp"

namespace ppsim::config {

// The CSV a config's schedule was read from, cell for cell; nullptr when its schedule is not
// `torch-csv`.
const schedules::TorchCsv* torch_csv_of(const Config& config);

// Whether `path` names a PyTorch schedule CSV rather than a JSON config (it ends in ".csv").
bool is_torch_csv_path(const std::string& path);

// The config a bare CSV path stands for: {"schedule": {"kind": "torch-csv", "file": NAME}} with
// the default costs, NAME being the file's own name (files are found beside the config).
nlohmann::json torch_csv_config(const std::string& path);

}  // namespace ppsim::config
