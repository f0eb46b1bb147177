#!/usr/bin/env bash
# Hostile inputs to the surfaces added in round 2 (docs/CLI.md, "Exit codes"): an output option
# naming the input it is made from, and a FIFO that no process writes to given as a config or CSV.
source "$(dirname "$0")/cli_expect.sh"
run_timeout=60  # a FIFO that no process writes to must end in an error, not a hung suite
same() {  # same FILE COPY: FILE is unchanged
  if cmp -s "$1" "$2"; then good "$1 unchanged"; else bad "$1 was overwritten"; fi
}

cp "$SRC/configs/1f1b.json" "$tmp/c.json"; cp "$tmp/c.json" "$tmp/c.orig"
printf '0F0,0B0\r\n' >"$tmp/s.csv"; cp "$tmp/s.csv" "$tmp/s.orig"
ln -s c.json "$tmp/link.json"

# --- an output naming its own input (directly or through a symlink) is refused, input kept
for fmt in json.gz pftrace; do
  cp "$tmp/c.json" "$tmp/c.$fmt"
  expect 2 run "$tmp/c.$fmt" --trace "$tmp/c.$fmt"
  rm -f "$tmp/c.$fmt"
done
expect 2 run "$tmp/c.json" --trace "$tmp/c.json"
has "--trace $tmp/c.json: is the input file"
same "$tmp/c.json" "$tmp/c.orig"
expect 2 run "$tmp/c.json" --trace "$tmp/link.json"
same "$tmp/c.json" "$tmp/c.orig"
expect 2 run "$tmp/c.json" --svg "$tmp/c.json"
has "--svg"
same "$tmp/c.json" "$tmp/c.orig"
expect 2 real "$tmp/c.json" --trace "$tmp/c.json"
same "$tmp/c.json" "$tmp/c.orig"
expect 2 import "$tmp/s.csv" -o "$tmp/s.csv"
has "--output $tmp/s.csv: is the input file"
same "$tmp/s.csv" "$tmp/s.orig"
expect 2 export "$tmp/s.csv" --format torch-csv -o "$tmp/s.csv"
same "$tmp/s.csv" "$tmp/s.orig"
expect 2 export "$tmp/c.json" --format torch-csv -o "$tmp/c.json"
same "$tmp/c.json" "$tmp/c.orig"
expect 0 import "$tmp/s.csv" -o "$tmp/s2.json"  # another name still works
expect 0 run "$tmp/s2.json"

# --- a FIFO with no writer: an error, not a wait for ever
mkfifo "$tmp/f.csv" "$tmp/f.json"
expect 2 import "$tmp/f.csv"
has "f.csv: is a FIFO that no process wrote to"
expect 2 run "$tmp/f.json"
has "f.json: is a FIFO"
expect 2 check "$tmp/f.json"
# a FIFO with a writer is read to its end
(cat "$tmp/c.json" >"$tmp/f.json") &
writer=$!
sleep 0.2
expect 0 run "$tmp/f.json"
wait $writer

# --- two outputs naming one file through different paths, and the CSV a config reads, by
# identity (device and inode, or the same name in the same directory before it exists)
expect 2 run "$tmp/c.json" --svg "$tmp/o.svg" --trace "$tmp/./o.svg"
has "--svg and --trace name the same file"
ln -s o2.svg "$tmp/to-o2.svg"
expect 2 run "$tmp/c.json" --svg "$tmp/o2.svg" --trace "$tmp/to-o2.svg"
has "--svg and --trace name the same file"
[ -e "$tmp/o2.svg" ] && bad "an output was written" || good "nothing written"
cp "$SRC/tests/data/torch/zb1p_2rank_2stagep_comms.csv" "$tmp/z.csv"; cp "$tmp/z.csv" "$tmp/z.orig"
printf '{"schedule": {"kind": "torch-csv", "file": "z.csv"}}' >"$tmp/zc.json"
expect 2 run "$tmp/zc.json" --trace "$tmp/z.csv"
has "is the input file $tmp/z.csv"
same "$tmp/z.csv" "$tmp/z.orig"
ln "$tmp/z.csv" "$tmp/z-hard.csv"
expect 2 run "$tmp/zc.json" --svg "$tmp/z-hard.csv"
same "$tmp/z.csv" "$tmp/z.orig"
expect 2 report "$tmp/c.json" -o "$tmp/./c.json"
same "$tmp/c.json" "$tmp/c.orig"
ln "$tmp/c.json" "$tmp/c-hard.json"
expect 2 check "$tmp/c.json" --junit "$tmp/c-hard.json"
has "is one of the files to check"
same "$tmp/c.json" "$tmp/c.orig"
expect 2 export "$tmp/c.json" -o "$tmp/link.json"
same "$tmp/c.json" "$tmp/c.orig"

# --- a descriptor path is written in place: through a pipe, appended with >>, not replaced
"$PPSIM" run "$tmp/c.json" --trace /dev/stdout 2>"$tmp/err" | cat >"$tmp/piped"
[ "${PIPESTATUS[0]}" = 0 ] && grep -q '"traceEvents"' "$tmp/piped" && good "--trace /dev/stdout | cat" ||
  bad "--trace /dev/stdout | cat: $(head -c 300 "$tmp/err")"
echo KEEP >"$tmp/appended"
"$PPSIM" run "$tmp/c.json" --svg /dev/stdout >>"$tmp/appended" 2>"$tmp/err"
head -1 "$tmp/appended" | grep -qx KEEP && grep -q '<svg' "$tmp/appended" &&
  good "--svg /dev/stdout >> file appends" || bad ">> file lost its content: $(head -c 300 "$tmp/err")"
echo KEEP >"$tmp/appended2"
"$PPSIM" export "$tmp/c.json" --format torch-csv -o /proc/self/fd/3 3>>"$tmp/appended2" 2>"$tmp/err"
head -1 "$tmp/appended2" | grep -qx KEEP && grep -q '0F0' "$tmp/appended2" &&
  good "-o /proc/self/fd/3 3>> file appends" || bad "fd 3 append: $(head -c 300 "$tmp/err")"
expect 2 run "$tmp/c.json" --trace /dev/fd/9
has "/dev/fd/9: cannot write"
expect 2 run "$tmp/c.json" --trace /dev/stdin </dev/null
ls -a "$tmp" | grep -q '^\.ppsim-' && bad "a temporary was left" || good "no temporary left"

finish
