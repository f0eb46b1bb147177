#!/usr/bin/env bash
# Install ppsim into a scratch prefix and build a consumer with find_package(ppsim).
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$BUILD" --prefix "$tmp/prefix" >/dev/null
cmake -S "$SRC/tests/install_consumer" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_CXX_FLAGS="${CONSUMER_FLAGS:-}" >/dev/null
cmake --build "$tmp/build" >/dev/null
"$tmp/build/consumer"
echo "1 passed, 0 failed"
