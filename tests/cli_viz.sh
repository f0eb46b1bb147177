#!/usr/bin/env bash
# `ppsim run --svg / --timeline / --no-color` as a user sees them: well-formed SVG for a good and a
# deadlocked run, no file for an invalid program or a bad path, exit 2 for misused options, a plain
# timeline when stdout is not a terminal. Env: PPSIM, SRC.
source "$(dirname "$0")/cli_expect.sh"
well_formed() {
  if command -v xmllint >/dev/null; then
    xmllint --noout --nonet "$1" && good "$1 is well-formed XML" || bad "$1 is not well-formed"
  fi
}

expect 0 run "$SRC/configs/1f1b.json" --svg "$tmp/a.svg"
[ -s "$tmp/a.svg" ] || bad "no SVG"
well_formed "$tmp/a.svg"
n=$(grep -c 'class="op"' "$tmp/a.svg")
[ "$n" = 64 ] && good "64 boxes (4 ranks x 8 microbatches x F, B)" || bad "$n boxes, expected 64"

# A deadlocked run is drawn up to the hang: exit 1, the file written.
expect 1 run "$SRC/configs/1f1b-blocking-deadlock.json" --svg "$tmp/d.svg" --trace "$tmp/d.json"
well_formed "$tmp/d.svg"
grep -q 'class="stuck cycle"' "$tmp/d.svg" && good "cycle marked" || bad "no cycle mark"
grep -q '"cat":"deadlock"' "$tmp/d.json" && good "deadlock instants in the trace" || bad "no deadlock instants"

# An invalid program: exit 1, no file, an old one stays.
cat >"$tmp/invalid.json" <<'JSON'
{"name": "invalid", "schedule": {"kind": "custom", "ops": ["0F0,0SEND_F0", "0RECV_F0,1F0"]}}
JSON
echo old >"$tmp/old.svg"
expect 1 run "$tmp/invalid.json" --svg "$tmp/old.svg" --timeline
has "SVG timeline not written: the program is invalid"
has "no timeline: the program is invalid"
[ "$(cat "$tmp/old.svg")" = old ] && good "old file kept" || bad "old file replaced"

# Misuse: exit 2, nothing written.
expect 2 run "$SRC/configs/1f1b.json" --svg ""
has "--svg: the file name is empty"
expect 2 run "$SRC/configs/1f1b.json" --svg "$tmp/same" --trace "$tmp/same"
has "name the same file"
[ -e "$tmp/same" ] && bad "file written"
expect 2 run "$SRC/configs/1f1b.json" --svg "$tmp/no/such/dir/a.svg"
expect 2 run "$SRC/configs/1f1b.json" --timeline --json

# The terminal timeline: plain when stdout is not a terminal, one line per rank at $COLUMNS.
COLUMNS=60 expect 0 run "$SRC/configs/1f1b.json" --timeline
grep -q $'\x1b' "$out" && bad "colour codes in a pipe" || echo "ok: plain in a pipe"
lines=$(grep -c '^rank [0-3] |' "$out")
[ "$lines" = 4 ] && good "4 timeline rows" || bad "$lines timeline rows"
w=$(grep '^rank 0 |' "$out" | awk '{print length($0)}')
[ "$w" = 60 ] && good "60 columns" || bad "width $w, expected 60"
expect 0 run "$SRC/configs/1f1b.json" --timeline --no-color

leftovers=$(ls -A "$tmp" | grep -c '^\.ppsim-' || true)
[ "$leftovers" = 0 ] || { echo "FAIL: temporary files left: $(ls -A "$tmp")"; fail=$((fail + 1)); }
finish
