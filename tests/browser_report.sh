#!/usr/bin/env bash
# Browser test of `ppsim report`: renders generated reports in headless Chromium with the network
# shut off and checks that the page ran its scripts without a console error or a blocked request,
# and that it shows the expected timelines, timeline rows and charts. Writes a screenshot.
#   PPSIM=build/cli/ppsim SRC=. bash tests/browser_report.sh
# Env: CHROMIUM (browser binary; default chromium), KEEP (a folder to keep the pages and the
# screenshot in). Exits 77 (ctest: skipped) when no Chromium is installed; CI installs it
# (.ci/run: scripts/install-deps.sh --browser).
set -euo pipefail
: "${PPSIM:?set PPSIM to the ppsim binary}" "${SRC:?set SRC to the source folder}"
browser=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -z "$browser" ]; then
  echo "SKIPPED: no chromium found (install it with scripts/install-deps.sh --browser)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# One headless run: no GPU, no sandbox (containers), no network (every host unresolvable), a
# profile of its own; bounded so a stuck browser fails the test instead of hanging it.
chromium_run() {
  timeout 60 "$browser" --headless --no-sandbox --disable-gpu --no-first-run \
    --disable-extensions --disable-background-networking --disable-sync \
    --host-resolver-rules="MAP * ~NOTFOUND" --user-data-dir="$work/profile" \
    --enable-logging=stderr --v=0 "$@"
}

# check PAGE TIMELINES RANK_ROWS CHARTS: dump the DOM after the scripts ran and count. The page's
# #selftest hovers the first timeline box and sorts the table by makespan (left in $work/dom.html).
check() {
  local page=$1 timelines=$2 rows=$3 charts=$4 dom=$work/dom.html log=$work/console.log
  chromium_run --dump-dom "file://$page#selftest" >"$dom" 2>"$log" || fail "$page: chromium exited $?"
  # Console messages: the page logs nothing when all is well; CSP refusals and exceptions land here.
  if grep -E 'CONSOLE|Uncaught|Refused to' "$log"; then fail "$page: console messages above"; fi
  grep -q '<body[^>]* data-ready="yes"' "$dom" || fail "$page: the page script did not finish"
  if grep -o 'data-errors="[^"]*"' "$dom"; then fail "$page: the page recorded errors"; fi
  local n
  n=$(grep -o '<div class="timeline">' "$dom" | wc -l)
  [ "$n" -eq "$timelines" ] || fail "$page: $n timelines, expected $timelines"
  n=$(grep -o '<g class="rank" data-rank=' "$dom" | wc -l)
  [ "$n" -eq "$rows" ] || fail "$page: $n timeline rows, expected $rows"
  n=$(grep -o '<canvas ' "$dom" | wc -l)
  [ "$n" -eq "$charts" ] || fail "$page: $n canvases, expected $charts"
  grep -q "<body[^>]* data-charts=\"$charts\"" "$dom" || fail "$page: Chart.js drew no $charts charts"
  echo "ok: $(basename "$page"): $timelines timelines, $rows rows, $charts charts, no console error"
}

# Four configs, one of which deadlocks (exit 1 by design): 4 ranks each, 4 memory charts.
code=0
"$PPSIM" report "$SRC"/configs/{gpipe,1f1b,interleaved-1f1b,1f1b-blocking-deadlock}.json \
  -o "$work/report.html" >/dev/null || code=$?
[ "$code" -eq 1 ] || fail "report with a deadlocking config exited $code, expected 1"
check "$work/report.html" 4 16 4
grep -q '<div class="deadlock">' "$work/report.html" || fail "no deadlock explanation"
# Hovering the first box of the first timeline (GPipe, rank 0) shows its op; sorting by makespan
# puts the deadlocked run (6 ms, it hung early) first, then interleaved, GPipe, 1F1B.
grep -Eq 'data-hover="rank 0: 0F0( [^"]*)?"' "$work/dom.html" || fail "hover: $(grep -o 'data-hover="[^"]*"' "$work/dom.html")"
grep -q 'data-sorted="row-3 row-2 row-0 row-1"' "$work/dom.html" ||
  fail "sort by makespan: $(grep -o 'data-sorted="[^"]*"' "$work/dom.html")"

# A sweep: 2 schedules x 3 microbatch counts, 6 memory charts and the bubble chart.
"$PPSIM" report "$SRC/configs/gpipe.json" --schedules gpipe,1f1b --microbatches 4,8,16 \
  -o "$work/sweep.html" >/dev/null
check "$work/sweep.html" 6 24 7

chromium_run --screenshot="$work/report.png" --window-size=1400,2400 --hide-scrollbars \
  "file://$work/report.html" >/dev/null 2>&1 || fail "screenshot: chromium exited $?"
[ -s "$work/report.png" ] || fail "no screenshot written"
if [ -n "${KEEP:-}" ]; then
  mkdir -p "$KEEP"
  cp "$work"/report.html "$work"/sweep.html "$work"/report.png "$KEEP"/
  echo "kept in $KEEP"
fi
echo "PASS"
