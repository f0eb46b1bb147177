#!/usr/bin/env bash
# Time and peak memory of `ppsim` on inputs that grow in one dimension, to see that every pass is
# linear (or n log n) in ops + ranks: 1F1B with one microbatch over 25k..200k ranks (each comm
# style, and the blocking deadlock), a PyTorch CSV chain of 4k..32k ranks, a 2-op custom program
# with microbatch id 10^4..10^8, and a WAIT on 1k..65k request ids (valid: the WAIT completes;
# invalid: every id unknown).
# Usage: tests/scale_check.sh [PPSIM] (default: build/cli/ppsim). Needs GNU time.
set -euo pipefail
PPSIM=${1:-build/cli/ppsim}
SRC=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

measure() {  # label, then the command; prints elapsed seconds, max RSS and the exit code
  local label=$1 rc=0
  shift
  /usr/bin/time -f "%e %M" -o "$TMP/time" "$@" >/dev/null 2>&1 || rc=$?
  read -r secs kb < <(tail -n 1 "$TMP/time") || true  # after "Command exited with ..."
  printf '%-44s %8s s %9s KB  exit %s\n' "$label" "${secs:-?}" "${kb:-?}" "$rc"
}

echo "# 1F1B, one microbatch (2 compute ops per rank)"
for style in async blocking; do
  for P in 25000 50000 100000 200000; do
    measure "run 1f1b M=1 $style ranks=$P" "$PPSIM" run "$SRC/configs/1f1b.json" --json \
      --set schedule.ranks=$P --set schedule.microbatches=1 --set comm.style=$style
  done
done
echo "# 1F1B blocking deadlock (the cycle search walks a chain as long as the ranks)"
for P in 25000 50000 100000 200000; do
  measure "check 1f1b-blocking-deadlock ranks=$P" "$PPSIM" check \
    "$SRC/configs/1f1b-blocking-deadlock.json" --set schedule.ranks=$P
done

echo "# PyTorch compute-only CSV, one stage per rank (rF0,rB0): the torch lowering's rounds"
for P in 4000 8000 16000 32000; do
  python3 -c "import sys; sys.stdout.write(''.join(f'{r}F0,{r}B0\\n' for r in range($P)))" \
    >"$TMP/chain$P.csv"
  measure "check chain CSV ranks=$P" "$PPSIM" check "$TMP/chain$P.csv"
done

echo "# custom 0F<id>,0B<id>: tables sized by the ops, not by the largest id"
for id in 10000 100000 1000000 10000000 100000000; do
  printf '{"schedule": {"kind": "custom", "ops": ["0F%s,0B%s"]}}\n' $id $id >"$TMP/mb$id.json"
  measure "run custom microbatch id $id" "$PPSIM" run "$TMP/mb$id.json" --json
done

echo "# WAIT on n ids: valid (2 ranks, n async sends waited at once) and all unknown"
for n in 1000 4000 16000 65535; do
  python3 - "$n" >"$TMP/wait$n.json" <<'PY'
import json, sys
n = int(sys.argv[1])
ids = ";".join(str(i) for i in range(n))
back = ";".join(str(n + i) for i in range(n))
r0 = [f"0F{m}" for m in range(n)] + [f"0SEND_F{m}#{m}" for m in range(n)] + [f"WAIT({ids})"]
r0 += [f"0RECV_B{m}#{n + m}" for m in range(n)] + [f"WAIT({back})"] + [f"0B{m}" for m in range(n)]
r1 = [f"1RECV_F{m}#{m}" for m in range(n)] + [f"WAIT({ids})"] + [f"1F{m}" for m in range(n)]
r1 += [f"1B{m}" for m in range(n)] + [f"1SEND_B{m}#{n + m}" for m in range(n)] + [f"WAIT({back})"]
json.dump({"schedule": {"kind": "custom", "ops": [",".join(r0), ",".join(r1)]},
           "comm": {"style": "async", "latency": 0.5}}, sys.stdout)
PY
  measure "run WAIT of $n ids (valid)" "$PPSIM" run "$TMP/wait$n.json" --json
  python3 -c "import json,sys; n=int(sys.argv[1]); json.dump({'schedule': {'kind': 'custom', 'ops': ['0F0,0B0,WAIT(' + ';'.join(map(str, range(n))) + ')']}}, sys.stdout)" "$n" >"$TMP/unknown$n.json"
  measure "check WAIT of $n unknown ids" "$PPSIM" check "$TMP/unknown$n.json"
done
