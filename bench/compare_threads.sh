#!/usr/bin/env bash
# `ppsim compare` of a 9-point sweep (1F1B, GPipe, interleaved at P=64, M=512..2048) on 1 thread
# and on 2: wall, CPU and peak RSS of each, and whether the two outputs are byte-identical.
# Usage: bench/compare_threads.sh PPSIM
set -euo pipefail
PPSIM=$1
cd "$(dirname "$0")/.."
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for j in 1 2; do
  PPSIM_JOBS=$j /usr/bin/time -o "$TMP/time$j" \
    -f "PPSIM_JOBS=$j: %e s wall, %U s user, %S s sys, %M KB peak RSS" \
    "$PPSIM" compare configs/1f1b.json --set schedule.ranks=64 --schedules 1f1b,gpipe,interleaved-1f1b \
    --microbatches 512,1024,2048 --chunks 2 --json >"$TMP/out$j"
  cat "$TMP/time$j"
done
cmp -s "$TMP/out1" "$TMP/out2" && echo "outputs identical" || echo "OUTPUTS DIFFER"
