// Replays the fuzzers' seed corpus (fuzz/corpus/<target>/) and every saved crash
// (fuzz/regressions/<target>/) through the same entry functions the libFuzzer targets call
// (fuzz/fuzz_entry.hpp): each input must end accepted, skipped or rejected with one of the errors
// the CLI reports as bad input (exit 2), never with another exception.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz_entry.hpp"
#include "paths.hpp"

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> files_under(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string()[0] != '.') out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void replay(const std::string& target, const std::string& kind) {
  const fs::path dir = fs::path(PPSIM_FUZZ_DIR) / kind / target;
  for (const auto& file : files_under(dir)) {
    INFO(file.string());
    const std::string bytes = read_bytes(file);
    CHECK_NOTHROW(ppsim::fuzz::run_entry(target, bytes));
  }
}

}  // namespace

TEST_CASE("fuzz_regressions.config_reader_inputs_end_accepted", "[fuzz]") {
  // fuzz regressions: config reader inputs end accepted or in a documented error
  replay("config", "regressions");
  replay("config", "corpus");
}

TEST_CASE("fuzz_regressions.op_list_parser_inputs_end", "[fuzz]") {
  // fuzz regressions: op-list parser inputs end accepted or in a ParseError
  replay("oplist", "regressions");
  replay("oplist", "corpus");
}

TEST_CASE("fuzz_regressions.pytorch_csv_reader_inputs_end", "[fuzz][torch-csv]") {
  // fuzz regressions: PyTorch CSV reader inputs end accepted or in a ParseError
  replay("torch_csv", "regressions");
  replay("torch_csv", "corpus");
}

TEST_CASE("fuzz_regressions.prepare_validate_simulate_inputs_end", "[fuzz]") {
  // fuzz regressions: prepare/validate/simulate inputs end accepted or in a documented error
  replay("pipeline", "regressions");
  replay("pipeline", "corpus");
}

TEST_CASE("fuzz_regressions.search_result_reader_inputs_end", "[fuzz][search]") {
  // fuzz regressions: `ppsim merge`'s reader of search results ends accepted or in a ConfigError
  replay("search_result", "regressions");
  replay("search_result", "corpus");
}

TEST_CASE("fuzz_regressions.profile_reader_inputs_end", "[fuzz][profile]") {
  // fuzz regressions: the Kineto trace reader and importer end accepted or in a ProfileError
  replay("profile", "regressions");
  replay("profile", "corpus");
}

TEST_CASE("fuzz_regressions.hf_config_reader_inputs_end", "[fuzz][hf-config]") {
  // fuzz regressions: the Hugging Face config.json reader ends accepted or in a ConfigError
  replay("hf_config", "regressions");
  replay("hf_config", "corpus");
}

TEST_CASE("fuzz_regressions.target_has_seeds_valid_seeds", "[fuzz]") {
  // fuzz corpus: every target has seeds, and valid seeds are accepted
  using ppsim::fuzz::Outcome;
  for (const char* t :
       {"config", "oplist", "torch_csv", "pipeline", "search_result", "profile", "hf_config"})
    CHECK(files_under(fs::path(PPSIM_FUZZ_DIR) / "corpus" / t).size() >= 5);
  const std::string cfg = read_bytes(fs::path(PPSIM_FUZZ_DIR) / ".." / "configs" / "1f1b.json");
  CHECK(ppsim::fuzz::config_entry(cfg) == Outcome::accepted);
  CHECK(ppsim::fuzz::pipeline_entry(cfg) == Outcome::accepted);
  CHECK(ppsim::fuzz::config_entry(cfg + std::string(1, '\0') + "schedule.ranks=x") ==
        Outcome::rejected);
  CHECK(ppsim::fuzz::pipeline_entry(cfg + std::string(1, '\0') + "schedule.ranks=100000") ==
        Outcome::skipped);
  CHECK(ppsim::fuzz::oplist_entry("0F0,0SEND_F0\n1RECV_F0,1F0\n") == Outcome::accepted);
  CHECK(ppsim::fuzz::oplist_entry("0F0,,0B0\n") == Outcome::rejected);
}
