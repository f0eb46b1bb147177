#!/usr/bin/env bash
# Quick start 2: install what is missing, build, and run the whole test suite with ctest.
#   scripts/test.sh             release build in build/ (reuses scripts/example.sh's build)
#   scripts/test.sh --sanitize  AddressSanitizer + UndefinedBehaviorSanitizer build in build-asan/
#                               (clang, -O1, instrumented for libFuzzer too, so scripts/fuzz.sh
#                               builds its targets from the same objects; no GPU or MPI code)
#   scripts/test.sh --tsan      ThreadSanitizer build in build-tsan/ of the test files that hold a
#                               [threads] case, and those cases run
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
if [ "${1:-}" = "--tsan" ]; then
  export BUILD_DIR=build-tsan BUILD_TYPE=RelWithDebInfo BUILD_TARGET=ppsim_thread_tests
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1}
  bash scripts/build.sh -DPPSIM_SANITIZE_THREAD=ON -DPPSIM_BUILD_BENCH=OFF -DPPSIM_GPU=OFF \
    -DPPSIM_MPI=OFF
  "$BUILD_DIR/tests/ppsim_thread_tests" "[threads]"
  exit 0
elif [ "${1:-}" = "--sanitize" ]; then
  export BUILD_DIR=build-asan BUILD_TYPE=RelWithDebInfo
  # halt_on_error: any report fails the test that triggered it
  export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
  # PPSIM_FUZZ: ASan + UBSan + coverage for libFuzzer (CMakeLists.txt); -O1 keeps it quick to
  # build and to run, with line tables for the reports.
  bash scripts/build.sh -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DPPSIM_FUZZ=ON \
    -DPPSIM_BUILD_TESTS=ON -DPPSIM_BUILD_BENCH=OFF -DPPSIM_GPU=OFF -DPPSIM_MPI=OFF
else
  export BUILD_DIR=build
  bash scripts/build.sh -DPPSIM_BUILD_TESTS=ON -DPPSIM_BUILD_BENCH=ON
fi
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)"
