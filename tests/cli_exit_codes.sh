#!/usr/bin/env bash
# Exit codes of the CLI: 0 ok, 1 schedule wrong, 2 bad input; no partial output files.
set -u
fail=0
expect() {  # expect CODE ARGS...
  local want=$1; shift
  "$PPSIM" "$@" >/tmp/ppsim_cli_out.$$ 2>&1
  local got=$?
  if [ "$got" != "$want" ]; then
    echo "FAIL: ppsim $* exited $got, expected $want"; cat /tmp/ppsim_cli_out.$$; fail=1
  else
    echo "ok: ppsim $* -> $got"
  fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" /tmp/ppsim_cli_out.$$' EXIT

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
grep -q "^Usage: ppsim \[OPTIONS\] SUBCOMMAND" /tmp/ppsim_cli_out.$$ &&
  grep -q "^  run " /tmp/ppsim_cli_out.$$ || { echo "FAIL: ppsim alone: no help"; fail=1; }
expect 0 --version
grep -Eq "^ppsim [0-9]+\.[0-9]+\.[0-9]+ \(commit [0-9a-f]+(-dirty)?\)$|^ppsim [0-9.]+ \(commit unknown\)$" \
  /tmp/ppsim_cli_out.$$ || { echo "FAIL: --version: $(cat /tmp/ppsim_cli_out.$$)"; fail=1; }
# run --help: each option's description in its column (CLI11's "Excludes:" went there).
expect 0 run --help
grep -q "Excludes" /tmp/ppsim_cli_out.$$ && { echo "FAIL: run --help shows Excludes"; fail=1; }
expect 2 run "$SRC/configs/1f1b.json" --json --timeline
grep -q "^ppsim: error: --json excludes --timeline" /tmp/ppsim_cli_out.$$ ||
  { echo "FAIL: --json --timeline not refused by name"; fail=1; }
# --schedules takes aliases in any case, as schedule.kind does; a fixed chunk count is said.
expect 0 compare "$SRC/configs/1f1b.json" --schedules GPIPE,zb-v --microbatches 8 --chunks 3
grep -q "^1f1b-p4-m8/gpipe/M8 " /tmp/ppsim_cli_out.$$ && grep -q "^1f1b-p4-m8/zbv/M8/V2 " /tmp/ppsim_cli_out.$$ ||
  { echo "FAIL: --schedules aliases not resolved"; fail=1; }
grep -q "^ppsim: note: --chunks 3: zbv runs with its only chunk count, 2$" /tmp/ppsim_cli_out.$$ ||
  { echo "FAIL: --chunks 3 for zbv not said"; fail=1; }
# An empty output name is refused, as for the other outputs; a limit below a byte is refused (it
# rounded to 0, which switches the limit off).
expect 2 export "$SRC/configs/1f1b.json" -o ''
expect 2 check "$SRC/configs/1f1b.json" --max-memory 0.5
grep -q "expected at least 1 byte (0 = no limit), got '0.5'" /tmp/ppsim_cli_out.$$ ||
  { echo "FAIL: --max-memory 0.5 not refused"; fail=1; }
expect 0 check "$SRC/configs/1f1b.json" --max-memory 0

# A trace is written whole or not at all.
expect 0 run "$SRC/configs/1f1b.json" --trace "$tmp/t.json"
[ -s "$tmp/t.json" ] || { echo "FAIL: trace not written"; fail=1; }
echo '{"schedule": {"kind": "1f1b", "ranks": 4,}}' > "$tmp/bad.json"
expect 2 run "$tmp/bad.json" --trace "$tmp/bad-trace.json"
[ -e "$tmp/bad-trace.json" ] && { echo "FAIL: partial trace left behind"; fail=1; }
expect 2 run "$SRC/configs/1f1b.json" --trace "$tmp/no/such/dir/t.json"
leftovers=$(ls -A "$tmp" | grep -c '^\.ppsim-' || true)
[ "$leftovers" = 0 ] || { echo "FAIL: temporary files left: $(ls "$tmp")"; fail=1; }

if [ $fail = 0 ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $fail
