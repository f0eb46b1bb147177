#!/usr/bin/env bash
# What a command writes (docs/CLI.md, "Output files"): no output replaces an input or another
# output (refused before anything runs), the outputs of one command are published all or none,
# `real --profile-trace DIR` owns its directory's rank traces, and an empty or doubled stdout
# output is a usage error naming the option.
source "$(dirname "$0")/cli_expect.sh"
run_timeout=120
cfg="$SRC/configs/1f1b.json"
lim=(--memory-limit 80GB)  # search: 1f1b.json has no hardware section
same() {  # same FILE COPY: FILE is unchanged
  if cmp -s "$1" "$2"; then good "$1 unchanged"; else bad "$1 was overwritten"; fi
}
absent() {  # absent PATH...: none of them exists
  local p
  for p in "$@"; do
    if [ -e "$p" ]; then bad "$p was written"; else good "$p not written"; fi
  done
}
no_leftovers() {  # no_leftovers DIR: no temporary file of ours in DIR
  local left
  left=$(find "$1" -maxdepth 1 -name '.ppsim-*' | head -5)
  if [ -z "$left" ]; then good "no temporary left in $1"; else bad "temporaries left: $left"; fi
}
ms() { echo $(($(date +%s%N) / 1000000)); }

# Inputs: traces of a real run, the fragment imported from them, a config reading a CSV.
expect 0 real "$cfg" --time-scale 0 --profile-trace "$tmp/kt"
expect 0 import-profile "$tmp"/kt/rank*.json -o "$tmp/frag.json"
cp "$tmp/frag.json" "$tmp/frag.orig"
cp "$cfg" "$tmp/c.json"; cp "$cfg" "$tmp/c.orig"
printf '0F0,0B0\r\n' >"$tmp/s.csv"; cp "$tmp/s.csv" "$tmp/s.orig"
echo '{"schedule": {"kind": "torch-csv", "file": "s.csv"}}' >"$tmp/t.json"
ln "$tmp/frag.json" "$tmp/frag.hard"
echo '{"actions": [{"pattern": "fwd-(\\d+)", "kind": "F", "microbatch": 1}]}' >"$tmp/map.json"
cp "$tmp/map.json" "$tmp/map.orig"

# --- item 3: every output against every input, refused before running
for opt in --trace --svg; do
  expect 2 run "$cfg" --calibration "$tmp/frag.json" $opt "$tmp/frag.json"
  has "$opt $tmp/frag.json: is the input file $tmp/frag.json"
  same "$tmp/frag.json" "$tmp/frag.orig"
done
expect 2 run "$cfg" --calibration "$tmp/frag.json" --trace "$tmp/./frag.hard"  # a hard link
same "$tmp/frag.json" "$tmp/frag.orig"
for opt in --report --trace; do
  expect 2 real "$cfg" --time-scale 0 --calibration "$tmp/frag.json" $opt "$tmp/frag.json"
  has "is the input file"
  same "$tmp/frag.json" "$tmp/frag.orig"
done
expect 2 run "$tmp/t.json" --svg "$tmp/s.csv"  # the CSV a config reads
same "$tmp/s.csv" "$tmp/s.orig"
expect 2 real "$tmp/t.json" --time-scale 0 --report "$tmp/s.csv"
same "$tmp/s.csv" "$tmp/s.orig"
expect 2 report "$tmp/t.json" -o "$tmp/s.csv"
has "-o $tmp/s.csv: is the input file"
same "$tmp/s.csv" "$tmp/s.orig"
expect 2 report "$tmp/c.json" -o "$tmp/c.json"
same "$tmp/c.json" "$tmp/c.orig"
expect 2 export "$tmp/t.json" --format torch-csv -o "$tmp/s.csv"
same "$tmp/s.csv" "$tmp/s.orig"
expect 2 search "$tmp/c.json" "${lim[@]}" -o "$tmp/w.json" --report "$tmp/./w.json"
has "name the same file"
absent "$tmp/w.json"
# import-profile: its traces and map are inputs, its four outputs must differ
cp "$tmp/kt/rank0.json" "$tmp/r0.orig"
for opt in -o --report --trace --svg; do
  expect 2 import-profile "$tmp"/kt/rank*.json $opt "$tmp/kt/rank0.json"
  same "$tmp/kt/rank0.json" "$tmp/r0.orig"
  expect 2 import-profile "$tmp"/kt/rank*.json --map "$tmp/map.json" $opt "$tmp/map.json"
  same "$tmp/map.json" "$tmp/map.orig"
done
expect 2 import-profile "$tmp"/kt/rank*.json -o "$tmp/x.json" --trace "$tmp/x.json"
has "--output and --trace name the same file"
absent "$tmp/x.json"
expect 2 import-profile "$tmp"/kt/rank*.json --svg "$tmp/x.svg" --report "$tmp/./x.svg"
absent "$tmp/x.svg"
# --profile-trace DIR: no input, no other output in it
mkdir "$tmp/pd"; cp "$cfg" "$tmp/pd/rank0.json"; cp "$cfg" "$tmp/pd.orig"
expect 2 real "$tmp/pd/rank0.json" --time-scale 0 --profile-trace "$tmp/pd"
has "--profile-trace $tmp/pd: holds the input file $tmp/pd/rank0.json"
same "$tmp/pd/rank0.json" "$tmp/pd.orig"
expect 2 real "$cfg" --time-scale 0 --profile-trace "$tmp/kt" --trace "$tmp/kt/rank0.json"
has "--trace $tmp/kt/rank0.json: is in --profile-trace $tmp/kt"
same "$tmp/kt/rank0.json" "$tmp/r0.orig"
expect 2 real "$cfg" --time-scale 0 --profile-trace "$tmp/new" --report "$tmp/new/r.html"
absent "$tmp/new"
expect 2 real "$cfg" --time-scale 0 --profile-trace "$tmp/kt" --calibration "$tmp/kt/rank0.json"
has "holds the input file $tmp/kt/rank0.json"
same "$tmp/kt/rank0.json" "$tmp/r0.orig"
no_leftovers "$tmp"

# --- item 8: every output opened first, all published or none
echo old >"$tmp/w.json"; cp "$tmp/w.json" "$tmp/w.orig"
big="$SRC/configs/models/llama3-8b.json"
t0=$(ms)
expect 2 search "$big" -o "$tmp/w.json" --report "$tmp/nonexistent/r.html"
has "--report $tmp/nonexistent/r.html"
same "$tmp/w.json" "$tmp/w.orig"
expect 2 search "$big" -o "$tmp/nonexistent/w.json"
has "--output $tmp/nonexistent/w.json"
t1=$(ms)
[ $((t1 - t0)) -lt 4000 ] && good "bad search outputs fail before the search ($((t1 - t0)) ms)" ||
  bad "bad search outputs took $((t1 - t0)) ms: the search ran first"
rm "$tmp/w.json"
expect 2 search "$cfg" "${lim[@]}" -o "$tmp/w.json" --report "$tmp/nonexistent/r.html"
absent "$tmp/w.json"
if [ -w /dev/full ]; then
  expect 2 search "$cfg" "${lim[@]}" -o "$tmp/w.json" --report /dev/full
  absent "$tmp/w.json"
fi
expect 2 import-profile "$tmp"/kt/rank*.json -o "$tmp/f.json" --svg "$tmp/nonexistent/x.svg"
has "--svg $tmp/nonexistent/x.svg"
absent "$tmp/f.json"
if [ -w /dev/full ]; then
  expect 2 import-profile "$tmp"/kt/rank*.json -o "$tmp/f.json" --trace "$tmp/f.trace.json" --report /dev/full
  has "--report /dev/full"
  has "No space left on device"
  absent "$tmp/f.json" "$tmp/f.trace.json"
  expect 2 run "$cfg" --trace "$tmp/r.json" --svg /dev/full
  absent "$tmp/r.json"
  expect 2 real "$cfg" --time-scale 0 --trace "$tmp/r.json" --profile-trace "$tmp/rp" --report /dev/full
  absent "$tmp/r.json" "$tmp/rp"
  cp "$tmp/kt/rank1.json" "$tmp/r1.orig"
  expect 2 real "$cfg" --time-scale 0 --set schedule.microbatches=4 --profile-trace "$tmp/kt" --report /dev/full
  same "$tmp/kt/rank1.json" "$tmp/r1.orig"  # the earlier traces stay whole
fi
expect 0 import-profile "$tmp"/kt/rank*.json -o "$tmp/f.json" --svg "$tmp/f.svg" --report "$tmp/f.html"
[ -s "$tmp/f.json" ] && [ -s "$tmp/f.svg" ] && [ -s "$tmp/f.html" ] && good "all three written" ||
  bad "import-profile outputs missing"
no_leftovers "$tmp"; no_leftovers "$tmp/kt"

# --- item 9: --profile-trace DIR holds this run's rank traces alone
expect 0 real "$cfg" --time-scale 0 --set schedule.ranks=8 --profile-trace "$tmp/p8"
[ "$(ls "$tmp/p8" | wc -l)" = 8 ] && good "8 traces" || bad "expected 8 traces: $(ls "$tmp/p8")"
expect 0 real "$cfg" --time-scale 0 --profile-trace "$tmp/p8"
[ "$(ls "$tmp/p8" | sort | tr '\n' ' ')" = "rank0.json rank1.json rank2.json rank3.json " ] &&
  good "the earlier run's rank4-7 removed" || bad "left in the directory: $(ls "$tmp/p8")"
expect 0 import-profile "$tmp"/p8/rank*.json
has "import-profile: 4 traces, P=4"
mkdir "$tmp/mine"; echo notes >"$tmp/mine/notes.txt"
expect 2 real "$cfg" --time-scale 0 --profile-trace "$tmp/mine"
has "--profile-trace $tmp/mine: holds a file that ppsim did not write as a rank trace (notes.txt)"
[ "$(ls "$tmp/mine")" = notes.txt ] && good "a foreign directory untouched" || bad "wrote into $tmp/mine"
rm "$tmp/mine/notes.txt"
printf '{\n  "schemaVersion": 1, "traceEvents": []}\n' >"$tmp/mine/rank0.json"  # PyTorch's own
expect 2 real "$cfg" --time-scale 0 --profile-trace "$tmp/mine"
has "did not write as a rank trace (rank0.json)"
echo x >"$tmp/afile"
expect 2 real "$cfg" --time-scale 0 --profile-trace "$tmp/afile"
has "--profile-trace $tmp/afile: not a directory"

# --- item 15: empty names and two documents on stdout
for args in "search $cfg -o" "search $cfg --report" "merge $tmp/w.json -o" \
  "import-profile $tmp/kt/rank0.json -o" "import-profile $tmp/kt/rank0.json --svg" \
  "import-profile $tmp/kt/rank0.json --map" "import $tmp/s.csv -o" "run $cfg --calibration" \
  "real $cfg --profile-trace" "real $cfg --calibration" "model $cfg --calibration"; do
  # shellcheck disable=SC2086
  expect 2 $args ""
  has ": the file name is empty"
done
expect 2 search "$cfg" -o - --json
has "--output - and --json"
expect 2 search "$cfg" -o /dev/stdout --json
has "is standard output"
expect 2 run "$cfg" --json --trace /dev/stdout
has "--trace /dev/stdout: is standard output"
expect 0 search "$cfg" "${lim[@]}" -o -
has '"schedule"'
expect 0 run "$cfg" --json --trace /dev/null  # nothing mixes in /dev/null
finish
