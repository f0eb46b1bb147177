#!/usr/bin/env bash
# Quick start 1: install what is missing, build the ppsim binary, and simulate a bundled config.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
BUILD_TARGET=ppsim bash scripts/build.sh  # only the binary; scripts/test.sh reuses it
./build/cli/ppsim run "${1:-configs/1f1b.json}"
