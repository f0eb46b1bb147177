#!/usr/bin/env bash
# The CLI's outputs under hostile conditions (docs/CLI.md, "Exit codes" and "Output files"): trace
# files through symlinks, special files, long names and signals; stdout full or closed; `check`
# reporting every file; list options with empty elements; long tokens cut in messages.
source "$(dirname "$0")/cli_expect.sh"
cfg="$SRC/configs/1f1b.json"

no_leftovers() {  # no_leftovers DIR: no temporary file of ours in DIR
  local left
  left=$(find "$1" -maxdepth 1 -name '.ppsim-*' | head -5)
  if [ -z "$left" ]; then good "no temporary left in $1"; else bad "temporaries left: $left"; fi
}

# --- trace through symlinks: the link stays a link, its target is written
mkdir "$tmp/real"
ln -s real/t.json "$tmp/link"
expect 0 run "$cfg" --trace "$tmp/link"
[ -L "$tmp/link" ] && [ -s "$tmp/real/t.json" ] && good "symlink kept, target written" || bad "symlink replaced or target empty"
jq -e '.traceEvents | length > 0' "$tmp/real/t.json" >/dev/null && good "trace is JSON" || bad "trace through link is not JSON"
expect 0 run "$cfg" --trace "$tmp/link"  # again, now that the target exists
[ -L "$tmp/link" ] && good "symlink still a link" || bad "symlink replaced on rewrite"
no_leftovers "$tmp/real"; no_leftovers "$tmp"

# --- what is not a regular file is refused (2) and left as it was
mkdir "$tmp/dir"
expect 2 run "$cfg" --trace "$tmp/dir"
has "refusing to replace a directory"
[ -d "$tmp/dir" ] && good "directory untouched" || bad "directory replaced"
ln -s dir "$tmp/dirlink"
expect 2 run "$cfg" --trace "$tmp/dirlink"
[ -L "$tmp/dirlink" ] && [ -d "$tmp/dir" ] && good "link to directory untouched" || bad "link to directory replaced"
if python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$tmp/sock" 2>/dev/null; then
  expect 2 run "$cfg" --trace "$tmp/sock"
  has "refusing to replace a socket"
  [ -S "$tmp/sock" ] && good "socket untouched" || bad "socket replaced"
fi
ln -s loop2 "$tmp/loop1"; ln -s loop1 "$tmp/loop2"
expect 2 run "$cfg" --trace "$tmp/loop1"
has "Too many levels of symbolic links"
expect 2 run "$cfg" --trace ""
has "--trace: the file name is empty"
expect 2 run "$cfg" --trace "$tmp/no/such/dir/t.json"
has "No such file or directory"
if [ "$(id -u)" != 0 ]; then  # root may write anything
  echo old >"$tmp/ro.json"; chmod 0444 "$tmp/ro.json"
  expect 2 run "$cfg" --trace "$tmp/ro.json"
  has "Permission denied"
  [ "$(cat "$tmp/ro.json")" = old ] && good "read-only file untouched" || bad "read-only file replaced"
fi
no_leftovers "$tmp"

# --- character devices and FIFOs are written in place
if [ -w /dev/null ]; then
  expect 0 run "$cfg" --trace /dev/null
  [ -c /dev/null ] && good "/dev/null still a character device" || bad "/dev/null replaced!"
fi
if [ -w /dev/full ]; then
  expect 2 run "$cfg" --trace /dev/full
  has "No space left on device"
fi
mkfifo "$tmp/fifo"
# Bounded: if ppsim dies before opening the FIFO, the reader must not hang the suite.
timeout 60 cat "$tmp/fifo" >"$tmp/from-fifo.json" &
reader=$!
expect 0 run "$cfg" --trace "$tmp/fifo"
wait $reader
[ -p "$tmp/fifo" ] && good "FIFO still a FIFO" || bad "FIFO replaced"
jq -e '.traceEvents | length > 0' "$tmp/from-fifo.json" >/dev/null && good "trace read from the FIFO" || bad "FIFO reader got no trace"

# --- a file name at the length limit (255 bytes) works: the temporary has a short name of its own
long=$(printf 'x%.0s' $(seq 1 250)).json
expect 0 run "$cfg" --trace "$tmp/$long"
[ -s "$tmp/$long" ] && good "255-byte name written" || bad "255-byte name not written"
expect 2 run "$cfg" --trace "$tmp/${long}x"  # 256: too long, said so
has "File name too long"
no_leftovers "$tmp"

# --- signals during a large trace write: exit 128+N, no temporary left
mkdir "$tmp/sig"
for sig in INT TERM HUP; do
  set -m  # job control: a background job must not start with SIGINT ignored
  "$PPSIM" run "$cfg" --set schedule.microbatches=30000 --set schedule.ranks=8 \
    --trace "$tmp/sig/big.json" >/dev/null 2>&1 &
  pid=$!
  set +m
  # Wait until the trace is being written (the temporary grows), then signal.
  for _ in $(seq 1 1200); do
    t=$(find "$tmp/sig" -name '.ppsim-*' -size +64k | head -1)
    [ -n "$t" ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.05
  done
  [ -n "$t" ] || bad "SIG$sig: no temporary seen while writing"
  kill -$sig $pid
  wait $pid 2>/dev/null
  rc=$?
  case $sig in INT) want=130 ;; TERM) want=143 ;; HUP) want=129 ;; esac
  [ "$rc" = "$want" ] && good "SIG$sig -> $rc" || bad "SIG$sig: exit $rc, expected $want"
  [ -e "$tmp/sig/big.json" ] && bad "SIG$sig: partial trace left" || good "SIG$sig: no trace"
  no_leftovers "$tmp/sig"
done

# --- stdout that cannot be written: exit 2 with the reason, for every subcommand
if [ -w /dev/full ]; then
  for args in "list" "run $cfg" "run $cfg --json" "compare $cfg" "compare $cfg --csv" \
    "check $cfg" "check $cfg --json" "export $cfg" "--help"; do
    # shellcheck disable=SC2086
    "$PPSIM" $args >/dev/full 2>"$out"
    rc=$?
    [ "$rc" = 2 ] && good "$args >/dev/full -> 2" || bad "$args >/dev/full exited $rc"
    has "ppsim: error: writing to standard output: No space left on device"
  done
  # A trace written fine, then stdout fails: still 2, the trace is complete.
  "$PPSIM" run "$cfg" --trace "$tmp/ok.json" >/dev/full 2>"$out"
  [ $? = 2 ] && jq -e . "$tmp/ok.json" >/dev/null && good "trace kept, stdout error 2" || bad "trace + full stdout"
fi
for args in "list" "run $cfg" "check $cfg" "export $cfg" "compare $cfg"; do
  # shellcheck disable=SC2086
  "$PPSIM" $args >&- 2>"$out"
  rc=$?
  [ "$rc" = 2 ] && good "$args >&- -> 2" || bad "$args >&- exited $rc"
  has "writing to standard output: Bad file descriptor"
done
# A closed stdout must not hand its descriptor to the trace file.
"$PPSIM" run "$cfg" --trace "$tmp/closed.json" >&- 2>"$out"
jq -e '.traceEvents' "$tmp/closed.json" >/dev/null && good "trace intact with stdout closed" || bad "trace corrupted with stdout closed"

# --- run --trace on an invalid program: 1, the diagnostics, no file (an old one stays)
cat >"$tmp/invalid.json" <<'JSON'
{"schedule": {"kind": "custom", "ops": ["0F0,0SEND_F0", "0RECV_F0,1F0"]}}
JSON
expect 1 run "$tmp/invalid.json"
expect 1 run "$tmp/invalid.json" --trace "$tmp/inv-trace.json"
has "trace not written: the program is invalid"
[ -e "$tmp/inv-trace.json" ] && bad "trace written for an invalid program" || good "no trace for an invalid program"
echo keep >"$tmp/inv-old.json"
expect 1 run "$tmp/invalid.json" --json --trace "$tmp/inv-old.json"
[ "$(cat "$tmp/inv-old.json")" = keep ] && good "old file kept" || bad "old file touched"
no_leftovers "$tmp"

# --- check reports every file, in its place; the exit code is the worst
echo '{"schedule": {"kind": "1f1b", "ranks": 4,}}' >"$tmp/malformed.json"
dl="$SRC/configs/1f1b-blocking-deadlock.json"
expect 2 check "$cfg" "$tmp/malformed.json" "$dl" "$tmp/missing.json" "$SRC/configs/gpipe.json"
has "ok    $cfg"
has "ERROR $tmp/malformed.json:1:"
has "FAIL  $dl"
has "ERROR $tmp/missing.json: cannot open file"
has "ok    $SRC/configs/gpipe.json"
order=$(grep -oE '^(ok|FAIL|ERROR) +[^ :]+' "$out" | awk '{print $2}' | tr '\n' ' ')
[ "$order" = "$cfg $tmp/malformed.json $dl $tmp/missing.json $SRC/configs/gpipe.json " ] \
  && good "files reported in order" || bad "order: $order"
expect 1 check "$cfg" "$dl"
"$PPSIM" check --json "$cfg" "$tmp/malformed.json" "$dl" "$tmp/missing.json" >"$out" 2>"$tmp/.err"
rc=$?
[ $rc = 2 ] && good "check --json mix -> 2" || bad "check --json mix exited $rc"
jq -e 'length == 4 and ([.[].exit_code] == [0, 2, 1, 2]) and ([.[].verdict][1] == "error")
       and (.[1].error | contains("malformed JSON")) and (.[3].config | endswith("missing.json"))
       and .[0].ok and (.[2].ok | not)' "$out" >/dev/null \
  && good "check --json: one entry per file" || bad "check --json entries: $(cat "$out")"
grep -qF "malformed JSON" "$tmp/.err" && good "check --json errors also on stderr" || bad "no stderr error"
"$PPSIM" check --json "$cfg" "$SRC/configs/gpipe.json" >"$out" 2>&1
jq -e 'length == 2' "$out" >/dev/null && good "check --json all good is an array" || bad "check --json all good"

# --- --set values are blamed on --set, not on the file
expect 2 run "$cfg" --set schedule.ranks=0
has "ppsim: error: --set schedule.ranks=0: key 'schedule.ranks':"
has "(config $cfg)"
expect 2 run "$cfg" --set comm.bogus=1
has "--set comm.bogus=1:"
expect 2 check "$cfg" --set schedule.microbatches=-4
has "--set schedule.microbatches=-4:"
expect 2 run "$cfg" --set =3
has "--set =3:"

# --- sweep lists: empty, zero, negative or non-numeric elements are errors naming the option
expect 2 compare "$cfg" --microbatches ,8
has "--microbatches ',8': element 1 is empty"
expect 2 compare "$cfg" --schedules gpipe,,1f1b
has "--schedules 'gpipe,,1f1b': element 2 is empty"
expect 2 compare "$cfg" --chunks 2,
has "--chunks '2,': element 2 is empty"
expect 2 compare "$cfg" --microbatches 0
has "--microbatches: '0' must be at least 1"
expect 2 compare "$cfg" --chunks=-2
has "--chunks: '-2' must be at least 1"
expect 2 compare "$cfg" --microbatches 8x
has "--microbatches: '8x' is not an integer"
expect 2 compare "$cfg" --microbatches 99999999999
has "is too large"
expect 2 compare "$cfg" --schedules gpipe,warp-drive
has "--schedules: unknown schedule 'warp-drive'"
expect 0 compare "$cfg" --schedules gpipe --schedules 1f1b --microbatches 8,16

# --- long or binary tokens are cut in messages
huge=$(head -c 100000 /dev/zero | tr '\0' 'k')
expect 2 run "$cfg" --set "schedule.kind=$huge"
has "…"
[ "$(wc -c <"$out")" -lt 2000 ] && good "long --set value cut" || bad "long --set value echoed whole ($(wc -c <"$out") bytes)"
expect 2 "$huge"
[ "$(wc -c <"$out")" -lt 2000 ] && good "long argument cut" || bad "long argument echoed whole"
expect 2 compare "$cfg" --microbatches "$(printf '1\001\002')"
has '\x01\x02'

finish
