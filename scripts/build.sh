#!/usr/bin/env bash
# Configure and build into BUILD_DIR (default build/); BUILD_TARGET (default: all) names what to
# build. Extra arguments go to cmake's configure step. Compiles through ccache where it is
# installed, with paths relative to the source tree, so another clone reuses the cache.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
fi
# -g1: line tables and function names (backtraces, perf) at three quarters of -g's compile time;
# an argument -DCMAKE_CXX_FLAGS_RELWITHDEBINFO=... after it wins.
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" "${launcher[@]}" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" "$@" >/dev/null
cmake --build "$build_dir" -j"$(nproc)" ${BUILD_TARGET:+--target "$BUILD_TARGET"}
