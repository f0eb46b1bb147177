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
