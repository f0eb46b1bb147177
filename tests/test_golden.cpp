// Each configs/*.json and configs/models/*.json is a golden test: its `ppsim run --json` summary
// must match tests/golden/[models/]<name>.json. After a deliberate change, regenerate with
// scripts/update-golden.sh.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "paths.hpp"
#include "ppsim/sim/analysis.hpp"
#include "ppsim/viz/json_report.hpp"

using namespace ppsim;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Paths where `got` and `want` differ; numbers compare with a 1e-9 relative tolerance.
void diff(const json& got, const json& want, const std::string& path,
          std::vector<std::string>& out) {
  if (got.is_number() && want.is_number()) {
    const double a = got.get<double>(), b = want.get<double>();
    if (std::abs(a - b) > 1e-9 * std::max({1.0, std::abs(a), std::abs(b)}))
      out.push_back(path + ": got " + got.dump() + ", golden " + want.dump());
    return;
  }
  if (got.type() != want.type()) {
    out.push_back(path + ": got " + got.dump() + ", golden " + want.dump());
    return;
  }
  if (got.is_object()) {
    for (auto it = want.begin(); it != want.end(); ++it) {
      if (!got.contains(it.key()))
        out.push_back(path + "." + it.key() + ": missing");
      else
        diff(got[it.key()], it.value(), path + "." + it.key(), out);
    }
    for (auto it = got.begin(); it != got.end(); ++it)
      if (!want.contains(it.key())) out.push_back(path + "." + it.key() + ": not in golden");
  } else if (got.is_array()) {
    if (got.size() != want.size()) {
      out.push_back(path + ": " + std::to_string(got.size()) + " elements, golden has " +
                    std::to_string(want.size()));
      return;
    }
    for (std::size_t i = 0; i < got.size(); ++i)
      diff(got[i], want[i], path + "[" + std::to_string(i) + "]", out);
  } else if (got != want) {
    out.push_back(path + ": got " + got.dump() + ", golden " + want.dump());
  }
}

}  // namespace

TEST_CASE("golden.example_config_reproduces_golden_summary", "[golden]") {
  // Every example config reproduces its golden summary
  const fs::path root = PPSIM_SOURCE_DIR;
  std::vector<fs::path> configs;
  for (const char* dir : {"configs", "configs/models"})
    for (const auto& e : fs::directory_iterator(root / dir))
      if (e.path().extension() == ".json") configs.push_back(e.path());
  std::sort(configs.begin(), configs.end());
  REQUIRE(configs.size() >= 10);
  for (const auto& path : configs) {
    // Configs name themselves relative to the repository, as the CLI run from its root does.
    const std::string rel = fs::relative(path, root).string();
    const fs::path sub = path.parent_path().filename() == "models" ? "models" : "";
    const fs::path golden = root / "tests" / "golden" / sub / (path.stem().string() + ".json");
    INFO(rel << " vs " << golden.string());
    REQUIRE(fs::exists(golden));
    config::Config config = config::load_config(path.string());
    config.source = rel;
    const json got = viz::to_json(sim::analyze(config));
    std::ifstream in(golden);
    const json want = json::parse(in);
    std::vector<std::string> diffs;
    diff(got, want, "$", diffs);
    for (const auto& d : diffs) UNSCOPED_INFO(d);
    CHECK(diffs.empty());
  }
}
