// ppsim: generate, simulate and check pipeline-parallel schedules.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>

#include "commands.hpp"
#include "messages.hpp"
#include "ppsim/base/output_file.hpp"
#include "ppsim/config/reader.hpp"
#include "ppsim/real/mlp_model.hpp"
#include "ppsim/real/mpi_backend.hpp"
#include "ppsim/real/settings.hpp"
#include "subcommands.hpp"
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

// `ppsim serach`: CLI11 would take the word as a stray argument and say only that a subcommand is
// required. A first word that is no subcommand is named, with the nearest one.
std::string unknown_subcommand(const std::vector<ppsim::cli::Subcommand>& subcommands,
                               const std::string& word) {
  if (word.empty() || word[0] == '-') return "";
  std::vector<std::string> names;
  for (const auto& s : subcommands) {
    if (s.app->check_name(word)) return "";
    names.push_back(s.app->get_name());
  }
  const std::string near = ppsim::config::nearest(word, names);
  return "unknown subcommand '" + ppsim::cli::shorten_long_words(word) + "'" +
         (near.empty() ? "" : "; did you mean '" + near + "'?") + " (`ppsim --help` lists them)";
}

// For an option CLI11 did not expect (`--schedule` for `--schedules`), the nearest option of the
// subcommand given; "" when none is near.
std::string option_suggestions(const CLI::App& app, int argc, char** argv) {
  const CLI::App* sub = nullptr;
  for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; }))
    if (s->parsed()) sub = s;
  if (!sub) return "";
  std::vector<std::string> names;
  for (const CLI::Option* o : sub->get_options())
    for (const auto& n : o->get_lnames()) names.push_back("--" + n);
  std::string out;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || a.size() == 2) continue;
    a = a.substr(0, a.find('='));
    if (std::find(names.begin(), names.end(), a) != names.end()) continue;
    if (const std::string near = ppsim::config::nearest(a, names); !near.empty())
      out += "ppsim: " + ppsim::cli::shorten_long_words(a) + ": did you mean " + near + "?\n";
  }
  return out;
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
  const std::vector<Subcommand> subcommands = add_subcommands(app, common);
  app.set_version_flag("--version", version_text(), "print the version and the commit built");
  if (argc <= 1) {  // `ppsim` alone: what it can do
    std::cout << app.help();
    return kOk;
  }
  if (const std::string unknown = unknown_subcommand(subcommands, argv[1]); !unknown.empty()) {
    std::cerr << "ppsim: error: " << unknown << "\n";
    return kBadInput;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    if (code != 0) std::cerr << option_suggestions(app, argc, argv);
    return code == 0 ? kOk : kBadInput;
  }
  const auto chosen = std::find_if(subcommands.begin(), subcommands.end(),
                                   [](const Subcommand& s) { return s.app->parsed(); });
  if (chosen == subcommands.end()) return kBadInput;
  if (const std::string misuse = chosen->misuse(); !misuse.empty()) {
    std::cerr << "ppsim: error: " << misuse << "\n";
    return kBadInput;
  }
  // Outputs that name one file (`o.svg`, `./o.svg`, a link to it), or an input: one would be
  // lost, or the input replaced. Compared by identity, refused before anything runs.
  if (const std::string clash = colliding_outputs(chosen->outputs(), chosen->inputs());
      !clash.empty()) {
    std::cerr << "ppsim: error: " << clash << "\n";
    return kBadInput;
  }
  // Configs may carry the executor's `real` and `model` sections whatever the subcommand.
#ifdef PPSIM_WITH_GPU
  ppsim::real::gpu::register_backends();  // before the `real` section checks backend names
#endif
  ppsim::real::register_mpi_backend();  // (a plugin, loaded only when a run asks for it)
  ppsim::real::register_settings_section();
  return chosen->run();
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
