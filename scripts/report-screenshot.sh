#!/usr/bin/env bash
# One command for the picture of an HTML report: builds ppsim if needed, writes a report of the
# bundled configs (one of which deadlocks) and a microbatch sweep, and screenshots both with
# headless Chromium (no network).
#   scripts/report-screenshot.sh [OUT_DIR]   (default: out/report/, ignored by git)
# Env: PPSIM (a built ppsim; default: build it in BUILD_DIR, default build/), CHROMIUM.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out/report}
browser=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -z "$browser" ]; then
  echo "no chromium found: scripts/install-deps.sh --browser installs it" >&2
  exit 2
fi
if [ -z "${PPSIM:-}" ]; then
  bash scripts/install-deps.sh
  BUILD_DIR=${BUILD_DIR:-build} bash scripts/build.sh -DPPSIM_BUILD_BENCH=OFF >/dev/null
  PPSIM=${BUILD_DIR:-build}/cli/ppsim
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
# The deadlocking config makes `report` exit 1 (a schedule is wrong); the page is still written.
"$PPSIM" report configs/{gpipe,1f1b,interleaved-1f1b,1f1b-blocking-deadlock}.json \
  --title "ppsim report: bundled configs" -o "$out/report.html" || [ $? -eq 1 ]
"$PPSIM" report configs/gpipe.json --schedules gpipe,1f1b --microbatches 4,8,16,32 \
  --title "ppsim report: GPipe and 1F1B, P=4, M=4..32" -o "$out/sweep.html"
shot() {  # PAGE PNG HEIGHT
  timeout 60 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
    --host-resolver-rules="MAP * ~NOTFOUND" --user-data-dir="$profile" \
    --window-size=1400,"$3" --screenshot="$2" "file://$1" >/dev/null 2>&1
  echo "wrote $2"
}
shot "$out/report.html" "$out/report.png" 2600
shot "$out/sweep.html" "$out/sweep.png" 1400
