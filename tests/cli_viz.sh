#!/usr/bin/env bash
# `ppsim run --svg / --timeline / --no-color` as a user sees them: well-formed SVG for a good and a
# deadlocked run, no file for an invalid program or a bad path, exit 2 for misused options, a plain
# timeline when stdout is not a terminal. Env: PPSIM, SRC.
set -u
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
expect() {  # expect CODE ARGS...: runs ppsim, output in $tmp/out
  local want=$1; shift
  "$PPSIM" "$@" >"$tmp/out" 2>&1
  local got=$?
  if [ "$got" != "$want" ]; then
    echo "FAIL: ppsim $* exited $got, expected $want"; cat "$tmp/out"; fail=1
  else
    echo "ok: ppsim $* -> $got"
  fi
}
has() { grep -qF -- "$1" "$tmp/out" && echo "ok: output has '$1'" || { echo "FAIL: output lacks '$1'"; cat "$tmp/out"; fail=1; }; }
well_formed() {
  if command -v xmllint >/dev/null; then
    xmllint --noout --nonet "$1" && echo "ok: $1 is well-formed XML" || { echo "FAIL: $1 is not well-formed"; fail=1; }
  fi
}

expect 0 run "$SRC/configs/1f1b.json" --svg "$tmp/a.svg"
[ -s "$tmp/a.svg" ] || { echo "FAIL: no SVG"; fail=1; }
well_formed "$tmp/a.svg"
n=$(grep -c 'class="op"' "$tmp/a.svg")
[ "$n" = 64 ] && echo "ok: 64 boxes (4 ranks x 8 microbatches x F, B)" || { echo "FAIL: $n boxes, expected 64"; fail=1; }

# A deadlocked run is drawn up to the hang: exit 1, the file written.
expect 1 run "$SRC/configs/1f1b-blocking-deadlock.json" --svg "$tmp/d.svg" --trace "$tmp/d.json"
well_formed "$tmp/d.svg"
grep -q 'class="stuck cycle"' "$tmp/d.svg" && echo "ok: cycle marked" || { echo "FAIL: no cycle mark"; fail=1; }
grep -q '"cat":"deadlock"' "$tmp/d.json" && echo "ok: deadlock instants in the trace" || { echo "FAIL: no deadlock instants"; fail=1; }

# An invalid program: exit 1, no file, an old one stays.
cat >"$tmp/invalid.json" <<'JSON'
{"name": "invalid", "schedule": {"kind": "custom", "ops": ["0F0,0SEND_F0", "0RECV_F0,1F0"]}}
JSON
echo old >"$tmp/old.svg"
expect 1 run "$tmp/invalid.json" --svg "$tmp/old.svg" --timeline
has "SVG timeline not written: the program is invalid"
has "no timeline: the program is invalid"
[ "$(cat "$tmp/old.svg")" = old ] && echo "ok: old file kept" || { echo "FAIL: old file replaced"; fail=1; }

# Misuse: exit 2, nothing written.
expect 2 run "$SRC/configs/1f1b.json" --svg ""
has "--svg: the file name is empty"
expect 2 run "$SRC/configs/1f1b.json" --svg "$tmp/same" --trace "$tmp/same"
has "name the same file"
[ -e "$tmp/same" ] && { echo "FAIL: file written"; fail=1; }
expect 2 run "$SRC/configs/1f1b.json" --svg "$tmp/no/such/dir/a.svg"
expect 2 run "$SRC/configs/1f1b.json" --timeline --json

# The terminal timeline: plain when stdout is not a terminal, one line per rank at $COLUMNS.
COLUMNS=60 expect 0 run "$SRC/configs/1f1b.json" --timeline
grep -q $'\x1b' "$tmp/out" && { echo "FAIL: colour codes in a pipe"; fail=1; } || echo "ok: plain in a pipe"
lines=$(grep -c '^rank [0-3] |' "$tmp/out")
[ "$lines" = 4 ] && echo "ok: 4 timeline rows" || { echo "FAIL: $lines timeline rows"; fail=1; }
w=$(grep '^rank 0 |' "$tmp/out" | awk '{print length($0)}')
[ "$w" = 60 ] && echo "ok: 60 columns" || { echo "FAIL: width $w, expected 60"; fail=1; }
expect 0 run "$SRC/configs/1f1b.json" --timeline --no-color

leftovers=$(ls -A "$tmp" | grep -c '^\.ppsim-' || true)
[ "$leftovers" = 0 ] || { echo "FAIL: temporary files left: $(ls -A "$tmp")"; fail=1; }
exit $fail
