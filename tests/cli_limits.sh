#!/usr/bin/env bash
# Resource limits and overflowing numbers at the command line (docs/LIMITS.md): exit 2 with the
# file and the key named, quickly and before any memory is taken; nothing left behind.
set -u
fail=0
out=$(mktemp)
tmp=$(mktemp -d)
trap 'rm -rf "$out" "$tmp"' EXIT
cfg="$SRC/configs/1f1b.json"
expect() {  # expect CODE TEXT ARGS...: exit code and a text the output must contain
  local want=$1 text=$2; shift 2
  "$PPSIM" "$@" >"$out" 2>&1
  local got=$?
  if [ "$got" != "$want" ] || ! grep -qF -- "$text" "$out"; then
    echo "FAIL: ppsim $* exited $got (expected $want) or lacks '$text':"; head -c 2000 "$out"
    fail=1
  else
    echo "ok: ppsim $* -> $got"
  fi
}

# A value given with --set is blamed on the flag, and the file is named beside it.
expect 2 "ppsim: error: --set memory.static_bytes=9e18: key 'memory.static_bytes': expected a whole number of bytes in [0, 2^53 = 9007199254740992], got 9000000000000000000 (config $cfg)" \
  run "$cfg" --set memory.static_bytes=9e18
# Too many ops for 32-bit ids: refused before anything is built, whatever the memory limit.
expect 2 "key 'schedule.microbatches': too large to index" \
  check "$cfg" --set schedule.microbatches=100000000
expect 2 "key 'schedule.microbatches'" check "$cfg" --set schedule.microbatches=100000000 --max-memory 0
expect 2 "key 'schedule.ranks'" export "$cfg" --set schedule.ranks=100000000
# A sweep keeps every run's record: the sum of its points must fit, not only each one.
expect 2 "the 30 runs keep about 924.5 MiB of records in all, above --max-memory 100.0 MiB" \
  compare "$cfg" --microbatches "$(seq -s, 1000 1000 30000)" --max-memory 100M
expect 0 "1f1b-p4-m8/1f1b/M30000" compare "$cfg" --microbatches "$(seq -s, 1000 1000 30000)" \
  --max-memory 2G
# Above --max-memory: the message names the key, the need and the limit.
expect 2 "key 'schedule.microbatches': too large for memory: the run needs about 9.6 GiB" \
  run "$cfg" --set schedule.ranks=8 --set schedule.microbatches=2000000 --max-memory 1G
expect 2 "above --max-memory 1.0 GiB; lower schedule.microbatches or raise --max-memory" \
  check "$cfg" --set schedule.ranks=8 --set schedule.microbatches=2000000 --max-memory 1G
# A mid-size config (~120 MiB estimated): refused under 100M, accepted by the default and 1G.
mid=(--set schedule.ranks=8 --set schedule.microbatches=20000)
expect 2 "above --max-memory 100.0 MiB" check "$cfg" "${mid[@]}" --max-memory 100M
# A recorded timeline (--svg) costs more per op than the run; a --trace alone is streamed and
# costs what the run does.
expect 2 "the run --trace needs about" run "$cfg" "${mid[@]}" --max-memory 200M --svg "$tmp/t.svg"
[ -e "$tmp/t.svg" ] && { echo "FAIL: a refused run left an SVG"; fail=1; }
expect 0 "makespan" run "$cfg" "${mid[@]}" --max-memory 200M --trace "$tmp/t.json"
[ -s "$tmp/t.json" ] || { echo "FAIL: the streamed trace is missing"; fail=1; }
rm -f "$tmp/t.json"
expect 0 "ok" check "$cfg" "${mid[@]}"
expect 0 "ok" check "$cfg" "${mid[@]}" --max-memory 1G
expect 0 "makespan" run "$cfg" "${mid[@]}" --max-memory 200M
expect 0 "ok" compare "$cfg" --microbatches 8,16 --max-memory 64M
expect 2 "--max-memory" compare "$cfg" --microbatches 8,20000 --max-memory 64M
# Bad --max-memory values are usage errors.
expect 2 "--max-memory" check "$cfg" --max-memory 12X
expect 2 "--max-memory" check "$cfg" --max-memory -1G
expect 2 "--max-memory" check "$cfg" --max-memory lots

# Numbers whose sums would overflow (the examples), and their largest accepted values.
expect 2 "key 'comm.boundary_bytes': expected a whole number of bytes in [0, 2^53" \
  run "$cfg" --set comm.boundary_bytes=1e18
expect 2 "key 'memory.static_bytes'" run "$cfg" --set memory.static_bytes=9e18
expect 2 "key 'costs.forward': the run could last up to" run "$cfg" --set costs.forward=1e308
expect 2 "key 'comm.latency'" check "$cfg" --set comm.latency=1e308
expect 2 "key 'costs.forward'" run "$cfg" --set costs.forward=1e308 --trace "$tmp/t.json"
[ -e "$tmp/t.json" ] && { echo "FAIL: a refused run left a trace"; fail=1; }
big=(--set comm.boundary_bytes=9007199254740992 --set memory.static_bytes=9007199254740992
  --set costs.forward=1e13 --set costs.backward_input=1e13 --set costs.backward_weight=1e13)
expect 0 '"comm_bytes": 432345564227567616' run "$cfg" "${big[@]}" --json
expect 0 "ok" run "$cfg" "${big[@]}" --trace "$tmp/t.json"
if grep -qE ':[[:space:]]*-?(inf|nan|null)' "$tmp/t.json" || ! grep -q '"ts"' "$tmp/t.json"; then
  echo "FAIL: the trace holds inf/nan or no events"; fail=1
fi
"$PPSIM" run "$cfg" "${big[@]}" --json >"$out" 2>&1
if grep -v '"deadlock": null' "$out" | grep -qE ':[[:space:]]*-?(inf|nan|null)'; then
  echo "FAIL: the report holds inf/nan"; fail=1
fi
exit $fail
