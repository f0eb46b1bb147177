#!/usr/bin/env bash
# One command for the pictures of the HTML report: builds ppsim if needed, writes a report of the
# bundled configs (one of which deadlocks) and one of a microbatch sweep to out/report/ (ignored by
# git), and screenshots both with headless Chromium (no network) into OUT_DIR.
#   scripts/report-screenshot.sh [OUT_DIR]   (default: out/report/; docs/img for the README's)
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
mkdir -p "$out" out/report
out=$(cd "$out" && pwd)
pages=$(cd out/report && pwd)
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
# The deadlocking config makes `report` exit 1 (a schedule is wrong); the page is still written.
"$PPSIM" report configs/{gpipe,1f1b,interleaved-1f1b,1f1b-blocking-deadlock}.json \
  --title "ppsim report: bundled configs" -o "$pages/report.html" || [ $? -eq 1 ]
"$PPSIM" report configs/1f1b.json --schedules gpipe,1f1b --microbatches 8,16,32,64 \
  --title "ppsim report: GPipe and 1F1B, P=4, M=8..64" -o "$pages/sweep.html"
shot() {  # PAGE PNG HEIGHT
  timeout 60 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
    --host-resolver-rules="MAP * ~NOTFOUND" --user-data-dir="$profile" \
    --window-size=1400,"$3" --screenshot="$2" "file://$1" >/dev/null 2>&1
  echo "wrote $2"
}
shot "$pages/report.html" "$out/report.png" 2700
shot "$pages/sweep.html" "$out/report-sweep.png" 1000
