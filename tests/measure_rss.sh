#!/usr/bin/env bash
# Peak RSS of export / check / run / run --trace against the lowered op count, for the table in
# docs/LIMITS.md. Usage: PPSIM=build/cli/ppsim tests/measure_rss.sh  (minutes; not a ctest)
set -eu
PPSIM=${PPSIM:-build/cli/ppsim}
SRC=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rss() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }  # KiB
printf "%-34s %10s %10s %9s %9s %9s %9s\n" config ops est_ops export_K check_K run_K trace_K
while read -r kind P V M style; do
  args=("$SRC/configs/1f1b.json" --set schedule.kind="$kind" --set schedule.ranks="$P"
    --set schedule.chunks="$V" --set schedule.microbatches="$M" --set comm.style="$style"
    --max-memory 0)
  ops=$("$PPSIM" run "${args[@]}" --json | sed -n 's/^  "ops": \([0-9]*\),/\1/p')
  printf "%-34s %10s %10s %9s %9s %9s %9s\n" "$kind P=$P V=$V M=$M $style" "$ops" \
    $((P * V * M * 8)) "$(rss "$PPSIM" export "${args[@]}")" "$(rss "$PPSIM" check "${args[@]}")" \
    "$(rss "$PPSIM" run "${args[@]}")" "$(rss "$PPSIM" run "${args[@]}" --trace "$tmp/t.json")"
done <<'LIST'
1f1b 8 1 20000 async
1f1b 8 1 80000 async
1f1b 8 1 160000 async
interleaved-1f1b 8 2 20000 async
interleaved-1f1b 8 2 80000 async
gpipe 8 1 20000 async
gpipe 8 1 80000 async
1f1b 64 1 2500 batched
1f1b 64 1 10000 batched
1f1b 8 1 20000 async-send
1f1b 8 1 80000 async-send
LIST
