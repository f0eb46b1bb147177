#!/usr/bin/env bash
# Install the Debian 12 packages ppsim builds with, only those that are missing.
#   scripts/install-deps.sh            what the build and the tests need
#   scripts/install-deps.sh --browser  also Chromium, for the browser test of the HTML report
#                                      (tests/browser_report.sh; large, so CI only by default)
set -euo pipefail
packages=(g++ make cmake libboost-graph-dev libfmt-dev nlohmann-json3-dev libcli11-dev catch2
  ccache                    # compiles of one file reused across builds and clones
  ninja-build               # cmake -G Ninja (docs/BENCHMARKS.md)
  clang libclang-rt-14-dev  # clang + its runtimes (libFuzzer, ASan): test.sh --sanitize, fuzz.sh
  python3                   # scripts/validate.sh writes docs/VALIDATION.md; tests/cli_real.sh
  libjs-chart.js            # Chart.js, embedded into `ppsim report` pages at build time
  zlib1g-dev                # gzip-compressed traces (.json.gz), and the tests that read them
  libisal-dev               # ISA-L's igzip: .json.gz written several times faster than with zlib
  libxml2-dev               # tests read the SVG timelines back with libxml2
  libglpk-dev               # GLPK: `ppsim search`'s exact model of small instances
  libre2-dev                # RE2: `import-profile --map` patterns, matched in linear time
  libopenmpi-dev openmpi-bin)  # the mpi backend (several processes under mpirun) and its test
[ "${1:-}" = "--browser" ] && packages+=(chromium)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
