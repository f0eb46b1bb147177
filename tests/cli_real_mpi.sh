#!/usr/bin/env bash
# `ppsim real --backend mpi` under mpirun, one process per rank (docs/EXECUTOR.md "Several
# processes"): the verdicts, hazards and deadlock reports equal the host backend's on the same
# programs (rendezvous, eager, tag and fifo matching, a hang); process 0 alone writes; what one
# process cannot do stops the job with exit 2, never a hang.
set -u
: "${PPSIM:?}" "${SRC:?}" "${MPIRUN:?}"
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Open MPI's own allocations outlive MPI_Finalize: not ours to report under ASan.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export OMPI_MCA_rmaps_base_oversubscribe=1  # 4 ranks on a 2-core machine
mpi() {  # mpi N ARGS...: ppsim ARGS under mpirun -np N, stdout in $tmp/out, stderr in $tmp/err
  local n=$1; shift
  timeout -k 5 120 "$MPIRUN" --allow-run-as-root -np "$n" "$PPSIM" "$@" >"$tmp/out" 2>"$tmp/err"
}
check_code() {  # check_code WANT GOT WHAT
  if [ "$2" != "$1" ]; then
    echo "FAIL: $3 exited $2, expected $1"; cat "$tmp/err" | head -20; fail=1
  else
    echo "ok: $3 -> $2"
  fi
}
contains() {  # contains FILE TEXT
  grep -qF -- "$2" "$1" || { echo "FAIL: $(basename "$1") lacks '$2'"; head -20 "$1"; fail=1; }
}

# Host and mpi agree: outcome, exit code, hazards (kind, rank, op), the deadlock's cycles.
agree() {  # agree CONFIG ARGS...
  local cfg=$1; shift
  local n sets=() a prev=
  for a in "$@"; do [ "$prev" = --set ] && sets+=(--set "$a"); prev=$a; done
  n=$("$PPSIM" run "$SRC/configs/$cfg" "${sets[@]}" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["ranks"])')
  local args=(real "$SRC/configs/$cfg" --json --hang-timeout 0.5 --memory-scale 0.001 "$@")
  "$PPSIM" "${args[@]}" >"$tmp/host.json" 2>/dev/null
  local host=$?
  mpi "$n" "${args[@]}" --backend mpi
  local got=$?
  cp "$tmp/out" "$tmp/mpi.json"
  check_code "$host" "$got" "mpi $cfg $* (the host backend's code)"
  python3 - "$tmp/host.json" "$tmp/mpi.json" "$cfg $*" <<'PY' || fail=1
import json, sys
def facts(path):
    j = json.load(open(path))  # one JSON document: only process 0 wrote to stdout
    m = j["measured"]
    return {"outcome": j["outcome"], "ok": m["ok"], "exit": j["exit_code"],
            "hazards": sorted((e["kind"], e.get("rank"), e.get("op")) for e in m.get("errors", [])),
            "deadlock": m.get("deadlock"), "disagreement": j["disagreement"],
            "compute ops": sum(r.get("busy", 0) > 0 for r in m.get("per_rank", []))}
h, m = facts(sys.argv[1]), facts(sys.argv[2])
if h != m:
    print(f"FAIL: {sys.argv[3]}: host {h}\n      mpi  {m}")
    sys.exit(1)
print(f"ok: {sys.argv[3]}: {m['outcome']}, hazards {sorted(set(k for k, _, _ in m['hazards']))}")
PY
}
agree 1f1b.json
agree 1f1b.json --iterations 3 --warmup 1
agree 1f1b.json --set comm.matching=fifo
agree 1f1b-async-send.json
agree 1f1b-blocking-deadlock.json                             # a hang: rendezvous sends
agree 1f1b-blocking-deadlock.json --set comm.eager_limit=1e12  # eager: it runs
agree dualpipe.json --set comm.matching=fifo                  # message_order_mismatch
agree hangs/pytorch-172668.json --set comm.semantics=mpi         # buffer_released_before_wait
agree interleaved-1f1b.json

# The hang in the words of `ppsim check`, from process 0 only.
mpi 4 real "$SRC/configs/1f1b-blocking-deadlock.json" --backend mpi --hang-timeout 0.5
check_code 1 $? "mpi hang (text)"
contains "$tmp/out" "cycle: rank 2 blocked in 2SEND_F1 -> rank 3; rank 3 blocked in 3SEND_B0 -> rank 2"
[ "$(grep -c "observed hang" "$tmp/out")" = 1 ] || { echo "FAIL: the report is not written once"; fail=1; }

# Process 0 writes the trace and the report, with every rank's ops.
mpi 4 real "$SRC/configs/1f1b.json" --backend mpi --memory-scale 0.001 --trace "$tmp/t.json" \
  --report "$tmp/r.html"
check_code 0 $? "mpi --trace --report"
python3 - "$tmp/t.json" <<'PY' || fail=1
import json, sys, collections
ev = json.load(open(sys.argv[1]))["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"}
count = collections.Counter(names.get(e["pid"], "?").split()[0] for e in ev
                            if e.get("ph") == "X" and e.get("cat") == "compute")
# 4 ranks x 8 microbatches x (F, B): both runs whole.
if sorted(count.values()) != [64, 64]:
    print(f"FAIL: compute spans per run: {dict(count)}"); sys.exit(1)
print(f"ok: trace holds both runs' 64 compute ops: {dict(count)}")
PY
[ -s "$tmp/r.html" ] || { echo "FAIL: no report written"; fail=1; }

# What cannot run: exit 2 with the reason, every process stopped.
mpi 2 real "$SRC/configs/1f1b.json" --backend mpi
check_code 2 $? "mpi -np 2 on a 4-rank config"
contains "$tmp/err" "the config has 4 ranks and MPI"
mpi 4 real "$SRC/configs/1f1b.json"
check_code 2 $? "the host backend under mpirun"
contains "$tmp/err" "under mpirun use --backend mpi"
mpi 2 real "$SRC/configs/hangs/nccl-479.json" --backend mpi
check_code 2 $? "nccl semantics on mpi"
contains "$tmp/err" "key 'comm.semantics': the mpi backend has MPI's point-to-point semantics"
mpi 4 real "$SRC/configs/1f1b.json" --backend mpi --trace "$tmp/no/such/dir/t.json"
check_code 2 $? "an unwritable trace (process 0 only)"
contains "$tmp/err" "cannot create a temporary file in $tmp/no/such/dir"
"$PPSIM" real "$SRC/configs/1f1b.json" --backend mpi >"$tmp/out" 2>"$tmp/err"
check_code 2 $? "mpi without mpirun"
contains "$tmp/err" "(mpirun -np 4)"
# `ppsim search --mpi`: each process a shard, process 0 prints the merged result, the same bytes
# as one process searching alone (docs/SEARCH.md).
mpi 2 search "$SRC/configs/zb-h1.json" --memory-limit 4GB --mpi --json
check_code 0 $? "search --mpi under mpirun -np 2"
"$PPSIM" search "$SRC/configs/zb-h1.json" --memory-limit 4GB --json >"$tmp/one.json" 2>"$tmp/err"
if cmp -s "$tmp/out" "$tmp/one.json"; then echo "ok: search --mpi == one process"; else
  echo "FAIL: search --mpi differs from one process"; fail=1; fi
mpi 2 search "$SRC/configs/zb-h1.json" --mpi --json
check_code 2 $? "search --mpi without a memory limit"
contains "$tmp/err" "hardware.memory_bytes"
exit $fail
