#pragma once
// The subcommands of `ppsim`, each declared by one function: its options, what it does, and what
// run_cli checks before it runs (a misuse of its options, the files it writes against each other
// and against the files it reads).
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "commands.hpp"

namespace ppsim::cli {

struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
  // A usage error CLI11 cannot express (an empty file name, two options together); "" if none.
  std::function<std::string()> misuse = [] { return std::string(); };
  // (option, path) of the files it writes (empty: not written), and the files it reads.
  std::function<std::vector<std::pair<std::string, std::string>>()> outputs = [] {
    return std::vector<std::pair<std::string, std::string>>();
  };
  std::function<std::vector<std::string>()> inputs = [] { return std::vector<std::string>(); };
};

// Every subcommand, in the order `ppsim --help` lists them. `common` (--set, --max-memory,
// --calibration) must outlive them.
std::vector<Subcommand> add_subcommands(CLI::App& app, CommonOptions& common);

}  // namespace ppsim::cli
