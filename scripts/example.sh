#!/usr/bin/env bash
# Quick start 1: install what is missing, build, and simulate a bundled example config.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh -DPPSIM_BUILD_TESTS=OFF -DPPSIM_BUILD_BENCH=OFF
./build/cli/ppsim run "${1:-configs/1f1b.json}"
