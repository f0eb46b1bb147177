#!/usr/bin/env bash
# `ppsim check` as a CI job runs it (docs/CI.md, docs/CLI.md "Checking directories"): directories
# walked in order, --junit reports that are valid, complete and byte-for-byte repeatable, exit codes
# (2 wins over 1), bad paths, and no partial report.
source "$(dirname "$0")/cli_expect.sh"
# junit FILE TESTS FAILURES ERRORS: well-formed, the shape CI reads, and these counts.
junit() {
  if python3 - "$@" <<'EOF'
import sys, xml.etree.ElementTree as ET
path, tests, failures, errors = sys.argv[1], *map(int, sys.argv[2:5])
root = ET.parse(path).getroot()
assert root.tag == "testsuites", root.tag
suites = root.findall("testsuite")
assert len(suites) == 1, suites
cases = suites[0].findall("testcase")
got = (len(cases), sum(1 for c in cases if c.find("failure") is not None),
       sum(1 for c in cases if c.find("error") is not None))
assert got == (tests, failures, errors), got
for n in (root, suites[0]):
    assert (int(n.get("tests")), int(n.get("failures")), int(n.get("errors"))) == got, n.attrib
for c in cases:
    assert c.get("classname") and c.get("name") is not None, c.attrib
    for p in list(c):
        assert p.tag in ("failure", "error") and p.get("message") and p.text, (p.tag, p.attrib)
EOF
  then good "junit $1: $2 tests, $3 failures, $4 errors"; else bad "junit $1 is not as expected"; fi
}

# A repository of schedules: two good ones, a deadlock in a subdirectory, notes that are skipped.
repo="$tmp/schedules"
mkdir -p "$repo/pipelines/blocking" "$repo/.git"
cp "$SRC/configs/1f1b.json" "$repo/pipelines/1f1b.json"
cp "$SRC/configs/gpipe.json" "$repo/gpipe.json"
cp "$SRC/configs/1f1b-blocking-deadlock.json" "$repo/pipelines/blocking/deadlock.json"
echo "not a schedule" >"$repo/README.md"
echo '{"this": "is skipped"}' >"$repo/.git/config.json"

expect 1 check "$repo"
# Sorted by name at every level: gpipe.json < pipelines/ ; 1f1b.json < blocking/.
[ "$(grep -oE '^(ok|FAIL|ERROR) +[^ ]+' "$out" | awk '{print $2}' | tr '\n' ' ')" = \
  "$repo/gpipe.json $repo/pipelines/1f1b.json $repo/pipelines/blocking/deadlock.json " ] \
  && good "files in sorted order" || bad "order: $(cat "$out")"
has "stuck: rank 2 op 5 (2SEND_F1), needs rank 3"
lacks "is skipped"
lacks "README"

# --junit: one testcase per file, the failure's message and full text; repeatable bytes.
expect 1 check "$repo/" --junit "$tmp/report.xml"
junit "$tmp/report.xml" 3 1 0
grep -qF "classname=\"$repo/pipelines/blocking/deadlock.json\" name=\"1f1b-all-blocking (deadlocks)\"" "$tmp/report.xml" \
  && good "classname is the file, name the schedule" || bad "testcase names: $(cat "$tmp/report.xml")"
grep -qF 'message="DEADLOCK (1 cycle): cycle: rank 2 blocked in 2SEND_F1 -&gt; rank 3; rank 3 blocked in 3SEND_B0 -&gt; rank 2"' "$tmp/report.xml" \
  && good "failure message" || bad "failure message: $(cat "$tmp/report.xml")"
"$PPSIM" check "$repo/" --junit "$tmp/again.xml" >/dev/null 2>&1
cmp -s "$tmp/report.xml" "$tmp/again.xml" && good "same report bytes twice" || bad "reports differ"

# A bad file: ERROR in place, <error> in the report, and exit 2 even beside a wrong schedule.
echo '{"schedule": {"kind": "1f1b", "ranks": 4,}}' >"$repo/pipelines/broken.json"
expect 2 check "$repo" --junit "$tmp/report.xml"
has "ERROR $repo/pipelines/broken.json:1:"
has "FAIL  $repo/pipelines/blocking/deadlock.json"
junit "$tmp/report.xml" 4 1 1
rm "$repo/pipelines/broken.json"

# A PyTorch schedule (.csv) is picked up and given to the config loader: checked, or a clear
# error naming it (until the loader reads CSV).
printf '0F0,0B0\n' >"$repo/pytorch.csv"
"$PPSIM" check "$repo" --junit "$tmp/csv.xml" >"$out" 2>&1
grep -qE "^(ok|FAIL|ERROR) +$repo/pytorch.csv" "$out" && good "the .csv file is checked" || bad "no line for the .csv file"
grep -qF "classname=\"$repo/pytorch.csv\"" "$tmp/csv.xml" && good ".csv in the report" || bad ".csv not in the report"
rm "$repo/pytorch.csv"

# Only good schedules: 0, and the report says so.
expect 0 check "$repo/gpipe.json" "$repo/pipelines/1f1b.json" --junit "$tmp/ok.xml"
junit "$tmp/ok.xml" 2 0 0

# --json and --junit together; --json over a directory lists every file.
expect 1 check "$repo" --json --junit "$tmp/both.xml"
python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); assert [e["exit_code"] for e in a]==[0,0,1], a' "$out" \
  && good "--json over a directory" || bad "--json over a directory"
junit "$tmp/both.xml" 3 1 0

# Bad paths.
expect 2 check "$tmp/no-such-dir"
has "ERROR $tmp/no-such-dir"
mkdir "$tmp/empty"
expect 2 check "$tmp/empty" "$repo/gpipe.json"
has "ERROR $tmp/empty: no *.json or *.csv file in this directory or below it"
has "ok    $repo/gpipe.json"
ln -s .. "$repo/pipelines/up"
expect 2 check "$repo"
has "ERROR $repo/pipelines/up: symbolic link loop: this is the directory $repo again"
has "FAIL  $repo/pipelines/blocking/deadlock.json"
rm "$repo/pipelines/up"
ln -s missing.json "$repo/dangling.json"
expect 2 check "$repo"
has "ERROR $repo/dangling.json: a symbolic link to nothing"
rm "$repo/dangling.json"
if [ "$(id -u)" != 0 ]; then
  mkdir "$repo/locked"; chmod 000 "$repo/locked"
  expect 2 check "$repo"
  has "ERROR $repo/locked: cannot read the directory: Permission denied"
  chmod 755 "$repo/locked"; rmdir "$repo/locked"
fi

# --junit paths: refused before anything is checked, never a partial file.
expect 2 check "$repo" --junit "$tmp/no/such/dir/r.xml"
has "No such file or directory"
lacks "ok    "
expect 2 check "$repo" --junit ""
has "--junit: the file name is empty"
expect 2 check "$repo/gpipe.json" --junit "$repo/gpipe.json"
has "is one of the files to check"
cmp -s "$repo/gpipe.json" "$SRC/configs/gpipe.json" && good "input untouched" || bad "input overwritten"
if [ -w /dev/full ]; then
  rm -f "$tmp/full.xml"
  "$PPSIM" check "$repo" --junit "$tmp/full.xml" >/dev/full 2>"$out"
  [ $? = 2 ] && good "stdout full -> 2" || bad "stdout full: not 2"
  [ -e "$tmp/full.xml" ] && bad "a report was written although stdout failed" || good "no report when stdout failed"
fi
# After --set, the name (which describes the file as written) is followed by what ran.
expect 0 check "$SRC/configs/1f1b-blocking-deadlock.json" --set comm.style=batched
has "(1f1b-all-blocking (deadlocks); ran: 1f1b, batched/tag)"
expect 1 check "$SRC/configs/1f1b-blocking-deadlock.json"
lacks "; ran:"

# Symbolic links in a diamond (each directory linking twice to the next, 18 levels: 2^18 paths
# to the last one) are walked once per directory: the config below is checked once.
mkdir -p "$tmp/diamond/d18"
cp "$SRC/configs/1f1b.json" "$tmp/diamond/d18/deep.json"
for i in $(seq 0 17); do
  mkdir -p "$tmp/diamond/d$i"
  ln -s "../d$((i + 1))" "$tmp/diamond/d$i/a"
  ln -s "../d$((i + 1))" "$tmp/diamond/d$i/b"
done
expect 0 check "$tmp/diamond/d0"
n=$(grep -c '^ok ' "$out")
[ "$n" = 1 ] && good "diamond: the config checked once" || bad "diamond: $n lines for one config"

# A file name that is not UTF-8: --json replaces the byte with U+FFFD (it aborted), the text
# output and the JUnit report show it escaped or replaced; no temporary is left.
mkdir -p "$tmp/u8"
cp "$SRC/configs/1f1b.json" "$tmp/u8/bad$(printf '\xff')name.json"
expect 0 check --json "$tmp/u8"
if python3 -c 'import json,sys; d=json.load(open(sys.argv[1], encoding="utf-8")); assert d[0]["config"].endswith("bad\ufffdname.json"), d' "$out" 2>/dev/null
then good "check --json: invalid UTF-8 file name as U+FFFD"; else bad "check --json: not valid JSON/UTF-8"; fi
expect 0 check "$tmp/u8" --junit "$tmp/u8.xml"
has 'bad\xffname.json'
junit "$tmp/u8.xml" 1 0 0
expect 0 run --json "$tmp/u8/bad$(printf '\xff')name.json"
expect 0 compare --json "$tmp/u8/bad$(printf '\xff')name.json"
# Control characters in a config's name are shown as \xNN: a name holding ESC or CR cannot
# redraw a FAIL line as "ok".
printf '{"name": "evil\\u001b[2K\\rok  fake", "schedule": {"kind": "1f1b", "ranks": 2, "microbatches": 2}, "comm": {"style": "blocking"}}' >"$tmp/ctl.json"
expect 1 check "$tmp/ctl.json"
has '(evil\x1b[2K\rok  fake): DEADLOCK'
if grep -q "$(printf '\033')" "$out"; then bad "an ESC byte reached the terminal"; else good "no ESC byte printed"; fi

left=$(find "$tmp" -name '.ppsim-*' | head -3)
[ -z "$left" ] && good "no temporary left" || bad "temporaries left: $left"

finish
