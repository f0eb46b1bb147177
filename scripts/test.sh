#!/usr/bin/env bash
# Quick start 2: install what is missing, build, and run the whole test suite with ctest.
#   scripts/test.sh             release build in build/
#   scripts/test.sh --sanitize  AddressSanitizer + UndefinedBehaviorSanitizer build in build-asan/
#   scripts/test.sh --tsan      ThreadSanitizer build in build-tsan/, the tests tagged [threads]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
if [ "${1:-}" = "--tsan" ]; then
  export BUILD_DIR=build-tsan BUILD_TYPE=RelWithDebInfo
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1}
  bash scripts/build.sh -DPPSIM_SANITIZE_THREAD=ON -DPPSIM_BUILD_BENCH=OFF
  "$BUILD_DIR/tests/ppsim_tests" "[threads]"
  exit 0
elif [ "${1:-}" = "--sanitize" ]; then
  export BUILD_DIR=build-asan BUILD_TYPE=Debug
  # halt_on_error: any report fails the test that triggered it
  export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
  bash scripts/build.sh -DPPSIM_SANITIZE=ON -DPPSIM_BUILD_BENCH=OFF
else
  export BUILD_DIR=build
  bash scripts/build.sh -DPPSIM_BUILD_TESTS=ON -DPPSIM_BUILD_BENCH=ON
fi
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)"
