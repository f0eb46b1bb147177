#!/usr/bin/env bash
# PyTorch schedule CSVs on the command line: import, export --format torch-csv, a .csv path as a
# config; bad CSVs exit 2 naming file, row and cell, and leave no output file.
set -u
fail=0
D="$SRC/tests/data/torch"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
expect() {  # expect CODE ARGS...
  local want=$1; shift
  "$PPSIM" "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  if [ "$got" != "$want" ]; then
    echo "FAIL: ppsim $* exited $got, expected $want"; cat "$tmp/out" "$tmp/err"; fail=1
  else
    echo "ok: ppsim $* -> $got"
  fi
}
expect_error() {  # expect_error 'MESSAGE' ARGS...: exit 2 and MESSAGE on stderr
  local want=$1; shift
  expect 2 "$@"
  # check reports on stdout ("ERROR FILE: ..."), the others on stderr
  cat "$tmp/out" "$tmp/err" | grep -qF -- "$want" || { echo "FAIL: no '$want' in:"; cat "$tmp/out" "$tmp/err"; fail=1; }
}
same() {  # same FILE_A FILE_B WHAT
  cmp -s "$1" "$2" || { echo "FAIL: $3 differs"; diff <(od -c "$1") <(od -c "$2") | head; fail=1; }
}

# export(import(artifact)) is the artifact, byte for byte (PyTorch's files end lines with \n;
# its csv.writer, and our default, with \r\n).
for f in zb1p_2rank_2stagep_compute zb1p_2rank_2stagep_comms dualpipev_4rank_10mb; do
  expect 0 import "$D/$f.csv" -o "$tmp/$f.json"
  compute_only=""
  [ "$f" = zb1p_2rank_2stagep_comms ] || compute_only=--compute-only
  expect 0 export "$tmp/$f.json" --format torch-csv $compute_only --line-end lf -o "$tmp/$f.csv"
  same "$tmp/$f.csv" "$D/$f.csv" "export(import($f))"
  expect 0 export "$D/$f.csv" --format torch-csv $compute_only
  sed 's/$/\r/' "$D/$f.csv" > "$tmp/$f.crlf"
  same "$tmp/out" "$tmp/$f.crlf" "export($f.csv) with CRLF"
done
# The torch lowering of the compute artifact (with PyTorch's _merge_bw) is the comms artifact.
expect 0 export "$D/zb1p_2rank_2stagep_compute.csv" --format torch-csv --line-end lf \
  --set schedule.merge_bw=1
same "$tmp/out" "$D/zb1p_2rank_2stagep_comms.csv" "torch lowering of zb1p compute"
# A .csv path works wherever a config does.
# PyTorch runs on NCCL, which keeps a sent tensor alive: a CSV defaults to comm.semantics nccl and
# runs clean; under mpi (Gloo) the runtime's late send waits free buffers still in flight.
expect 0 check "$D/zb1p_2rank_2stagep_compute.csv"
expect 1 check "$D/zb1p_2rank_2stagep_compute.csv" --set comm.semantics=mpi
grep -q "buffer_released_before_wait" "$tmp/out" || { echo "FAIL: check output"; fail=1; }
expect 0 run "$D/dualpipev_4rank_10mb.csv" --json
grep -q '"semantics": "nccl"' "$tmp/out" || { echo "FAIL: csv not under nccl"; fail=1; }
expect 1 run "$D/dualpipev_4rank_10mb.csv" --json --set comm.semantics=mpi
expect 0 export "$D/dualpipev_4rank_10mb.csv"
expect 0 compare "$D/zb1p_2rank_2stagep_compute.csv" "$D/zb1p_2rank_2stagep_comms.csv"
# import --custom: the lowered program as op lists, with the semantics it ran under; it runs the
# same as the CSV.
expect 0 import "$D/zb1p_2rank_2stagep_comms.csv" --custom -o "$tmp/custom.json"
grep -q '"semantics": "nccl"' "$tmp/custom.json" || { echo "FAIL: import --custom semantics"; fail=1; }
expect 0 run "$tmp/custom.json" --json
grep -o '"makespan": [0-9.]*' "$tmp/out" > "$tmp/m1"
expect 0 run "$D/zb1p_2rank_2stagep_comms.csv" --json
grep -o '"makespan": [0-9.]*' "$tmp/out" > "$tmp/m2"
same "$tmp/m1" "$tmp/m2" "makespan of import --custom"
# The compute actions of a compute_comms file: no padding, no SEND/RECV.
expect 0 export "$D/zb1p_2rank_2stagep_comms.csv" --format torch-csv --compute-only --line-end lf
awk -F, -v OFS=, '{ n = 0; row = ""; for (i = 1; i <= NF; i++) if ($i !~ /SEND|RECV/) row = row (n++ ? "," : "") $i; print row }' "$D/zb1p_2rank_2stagep_comms.csv" > "$tmp/only.csv"
same "$tmp/out" "$tmp/only.csv" "compute-only export of the comms artifact"
# A generated config exports in both forms, and reads back.
expect 0 export "$SRC/configs/1f1b.json" --format torch-csv -o "$tmp/1f1b.csv"
expect 0 export "$tmp/1f1b.csv" --format torch-csv
same "$tmp/out" "$tmp/1f1b.csv" "import(export(1f1b))"
expect 0 export "$SRC/configs/1f1b.json" --format torch-csv --compute-only
grep -q SEND "$tmp/out" && { echo "FAIL: SEND in compute_only"; fail=1; }

# Bad CSVs: exit 2, naming the file, the row (rank) and the cell; no output file left.
bad() {  # bad NAME CONTENT(printf format) 'MESSAGE'
  printf "$2" > "$tmp/$1.csv"
  expect_error "$3" import "$tmp/$1.csv" -o "$tmp/$1.json"
  [ -e "$tmp/$1.json" ] && { echo "FAIL: $1.json written"; fail=1; }
  expect_error "$3" check "$tmp/$1.csv"
}
bad kind '0F0,0X1\r\n1F0\r\n' "$tmp/kind.csv: row 1 (rank 0), cell 2: bad action '0X1': unknown action type 'X'"
bad stage 'F0\n' "row 1 (rank 0), cell 1: bad action 'F0': expected a stage number first"
bad huge "0F0,$(head -c 300 /dev/zero | tr '\0' 'F')\n" "row 1 (rank 0), cell 2: a cell of 300 characters"
bad quote '"0F0,0B0\n' "row 1 (rank 0), cell 1: unterminated quoted cell"
bad empty '' "the file is empty"
bad norank '0F0\n\n1F0\n' "row 2 (rank 1), cell 1: no actions in this row"
bad blanks '0F0,0SEND_F0,0B0\n1RECV_F0,,1F0,1B0\n' "row 2 (rank 1), cell 2: a blank cell in a compute_comms schedule"
bad stuck '0B0,0F0\n1F0,1B0\n' "cannot place the sends and receives"
bad twice '0F0,1B0\n1F0\n' "row 2 (rank 1), cell 1: stage 1 has compute ops on rank 0 and on rank 1"
expect_error "cannot open file" import "$tmp/missing.csv"
expect_error "expected a PyTorch schedule CSV" import "$SRC/configs/1f1b.json"
expect_error "--compute-only and -o go with --format torch-csv" export "$SRC/configs/1f1b.json" --compute-only
printf '0F0,0B0\n' > "$tmp/one.csv"
expect 0 export "$tmp/one.csv" --format torch-csv
printf '{"schedule": {"kind": "custom", "ops": ["0F0,0B0", "IDLE"]}}' > "$tmp/idle.json"
expect_error "rank 1 has no op to write" export "$tmp/idle.json" --format torch-csv
# Megabytes of blank lines after a row: refused at the first (row 2) without reading the rest
# into memory (it took 1.7 GB for 15 MB of them); peak memory checked where GNU time is.
python3 -c "import sys; sys.stdout.write('0F0,0B0\\n' + '\\n' * 15000000 + 'junk\\n')" >"$tmp/blank.csv"
expect_error "row 2 (rank 1), cell 1: no actions in this row" check "$tmp/blank.csv"
if [ -x /usr/bin/time ]; then
  /usr/bin/time -f "%M" -o "$tmp/rss" "$PPSIM" check "$tmp/blank.csv" >/dev/null 2>&1
  kb=$(tail -1 "$tmp/rss")
  if [ "$kb" -lt 400000 ]; then echo "ok: blank lines: $kb KB"; else echo "FAIL: blank lines took $kb KB"; fail=1; fi
fi
# A file name with a NUL is refused, not cut at the NUL and read.
cp "$D/zb1p_2rank_2stagep_compute.csv" "$tmp/zb.csv"
printf '{"schedule": {"kind": "torch-csv", "file": "zb.csv\\u0000junk"}}' > "$tmp/nul.json"
expect_error "key 'schedule.file': a file name holds no NUL character" check "$tmp/nul.json"
leftovers=$(ls -A "$tmp" | grep -c '^\.ppsim-' || true)
[ "$leftovers" = 0 ] || { echo "FAIL: temporary files left"; fail=1; }
exit $fail
