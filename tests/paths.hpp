#pragma once
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>
// Where the tests find the checkout, the ppsim binary and the fuzz corpora. The paths come from
// one generated file (CMake's paths.cpp), not from -D flags on every test file, so that a build
// of another clone compiles the same command lines and ccache serves them (scripts/build.sh).
namespace ppsim::test {
const char* source_dir();
const char* ppsim_binary();
const char* fuzz_dir();
}  // namespace ppsim::test

#define PPSIM_SOURCE_DIR (::ppsim::test::source_dir())
#define PPSIM_BINARY (::ppsim::test::ppsim_binary())
#define PPSIM_FUZZ_DIR (::ppsim::test::fuzz_dir())

namespace ppsim::test {
// configs/*.json of the checkout, sorted (the bundled configs).
inline std::vector<std::string> bundled_configs() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(std::string(source_dir()) + "/configs"))
    if (e.path().extension() == ".json") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace ppsim::test
