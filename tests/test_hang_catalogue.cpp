// configs/hangs/: published pipeline hangs, each with its fix. Every config is checked as
// `ppsim check` does, against tests/golden/hangs.json: the exit code (1 for a bug ppsim catches,
// 0 for a fix), the cycle lines ("lines") and, for a bug that crosses messages instead of hanging,
// the hazard lines ("hazards"), word for word.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "paths.hpp"
#include "ppsim/sim/analysis.hpp"

using namespace ppsim;
namespace fs = std::filesystem;

TEST_CASE("hang_catalogue.bug_caught_cycle_fix_passes", "[golden][nccl]") {
  // Hang catalogue: every bug is caught with its cycle, every fix passes
  const fs::path root = PPSIM_SOURCE_DIR;
  std::ifstream in(root / "tests" / "golden" / "hangs.json");
  const auto want = nlohmann::json::parse(in);
  // Every config of the catalogue has an expectation, and every expectation a config.
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(root / "configs" / "hangs"))
    if (e.path().extension() == ".json") files.insert(e.path().filename().string());
  std::set<std::string> expected;
  for (auto it = want.begin(); it != want.end(); ++it) expected.insert(it.key());
  CHECK(files == expected);
  int bugs = 0;
  for (const auto& name : files) {
    if (!want.contains(name)) continue;
    const auto& w = want[name];
    INFO(name);
    config::Config c = config::load_config((root / "configs" / "hangs" / name).string());
    const record::RunRecord rec = sim::analyze(c);
    CHECK((rec.ok() ? 0 : 1) == w["exit"].get<int>());
    CHECK(rec.info.semantics == "nccl");  // every entry ran on NCCL (or RCCL)
    if (w.contains("hazards")) {
      ++bugs;
      CHECK_FALSE(rec.deadlock);
      std::vector<std::string> got;
      for (const auto& d : rec.diagnostics) got.push_back(d.kind + ": " + d.message);
      const auto hazards = w["hazards"].get<std::vector<std::string>>();
      REQUIRE(got.size() == hazards.size());
      for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i].starts_with(hazards[i]));
      continue;
    }
    if (!w.contains("lines")) {
      CHECK_FALSE(rec.deadlock);
      CHECK(rec.diagnostics.empty());
      continue;
    }
    ++bugs;
    REQUIRE(rec.deadlock);
    const std::string text = rec.deadlock->describe();
    for (const auto& line : w["lines"])
      CHECK(text.find(line.get<std::string>()) != std::string::npos);
  }
  CHECK(bugs >= 7);
}
