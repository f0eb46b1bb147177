#!/usr/bin/env bash
# Exit codes of the CLI: 0 ok, 1 schedule wrong, 2 bad input; no partial output files.
source "$(dirname "$0")/cli_expect.sh"

expect 0 list
expect 0 run "$SRC/configs/1f1b.json"
expect 0 run "$SRC/configs/1f1b.json" --json
expect 1 run "$SRC/configs/1f1b-blocking-deadlock.json"
expect 0 check "$SRC/configs/1f1b-async-send.json" "$SRC/configs/1f1b-batched.json"
expect 1 check "$SRC/configs/1f1b.json" "$SRC/configs/1f1b-blocking-deadlock.json"
expect 0 check "$SRC/configs/1f1b-blocking-deadlock.json" --set comm.style=batched
expect 2 check "$SRC/configs/does-not-exist.json"
expect 2 run "$SRC/configs/1f1b.json" --set comm.style=telepathy
expect 2 bogus-subcommand
expect 2 run
expect 0 compare "$SRC/configs/1f1b.json" --schedules gpipe,1f1b,interleaved-1f1b --microbatches 8,16 --chunks 2
expect 0 compare "$SRC/configs/gpipe.json" "$SRC/configs/1f1b.json" --csv

# `ppsim` alone prints the help; --version names the version and the commit.
expect 0
grep -q "^Usage: ppsim \[OPTIONS\] SUBCOMMAND" "$out" &&
  grep -q "^  run " "$out" || bad "ppsim alone: no help"
expect 0 --version
grep -Eq "^ppsim [0-9]+\.[0-9]+\.[0-9]+ \(commit [0-9a-f]+(-dirty)?\)$|^ppsim [0-9.]+ \(commit unknown\)$" \
  "$out" || { echo "FAIL: --version: $(cat "$out")"; fail=$((fail + 1)); }
# run --help: each option's description in its column (CLI11's "Excludes:" went there).
expect 0 run --help
grep -q "Excludes" "$out" && bad "run --help shows Excludes"
expect 2 run "$SRC/configs/1f1b.json" --json --timeline
grep -q "^ppsim: error: --json excludes --timeline" "$out" ||
  bad "--json --timeline not refused by name"
# --schedules takes aliases in any case, as schedule.kind does; a fixed chunk count is said.
expect 0 compare "$SRC/configs/1f1b.json" --schedules GPIPE,zb-v --microbatches 8 --chunks 3
grep -q "^1f1b-p4-m8/gpipe/M8 " "$out" && grep -q "^1f1b-p4-m8/zbv/M8/V2 " "$out" ||
  bad "--schedules aliases not resolved"
grep -q "^ppsim: note: --chunks 3: zbv runs with its only chunk count, 2$" "$out" ||
  bad "--chunks 3 for zbv not said"
# An empty output name is refused, as for the other outputs; a limit below a byte is refused (it
# rounded to 0, which switches the limit off).
expect 2 export "$SRC/configs/1f1b.json" -o ''
expect 2 check "$SRC/configs/1f1b.json" --max-memory 0.5
grep -q "expected at least 1 byte (0 = no limit), got '0.5'" "$out" ||
  bad "--max-memory 0.5 not refused"
expect 0 check "$SRC/configs/1f1b.json" --max-memory 0

# A trace is written whole or not at all.
expect 0 run "$SRC/configs/1f1b.json" --trace "$tmp/t.json"
[ -s "$tmp/t.json" ] || bad "trace not written"
echo '{"schedule": {"kind": "1f1b", "ranks": 4,}}' > "$tmp/bad.json"
expect 2 run "$tmp/bad.json" --trace "$tmp/bad-trace.json"
[ -e "$tmp/bad-trace.json" ] && bad "partial trace left behind"
expect 2 run "$SRC/configs/1f1b.json" --trace "$tmp/no/such/dir/t.json"
leftovers=$(ls -A "$tmp" | grep -c '^\.ppsim-' || true)
[ "$leftovers" = 0 ] || { echo "FAIL: temporary files left: $(ls "$tmp")"; fail=$((fail + 1)); }

finish
