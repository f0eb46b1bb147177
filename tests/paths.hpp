#pragma once
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
