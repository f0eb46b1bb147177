#pragma once
// `ppsim --version`: "ppsim 0.1.0 (commit 06ab720c1d2e)", the commit read at build time.
#include <string>

namespace ppsim::cli {

std::string version_text();

}  // namespace ppsim::cli
