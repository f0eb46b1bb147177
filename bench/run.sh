#!/usr/bin/env bash
# Runs the benchmarks and regenerates docs/BENCHMARKS.md from bench/BENCHMARKS.md.in: every
# @@NAME@@ line of the template is replaced by the output of the command of that name below, so
# the figures in the document are what the benchmarks printed, never typed by hand.
# Usage: [E2E_ARGS="--skip TEXT ..."] [RENDER_ONLY=1] [ONLY="NAME..."] bench/run.sh [BUILD_DIR] [REPS]
#        (default build-rel, 3; a Release build with ppsim and the ppsim_bench_* programs built).
#        Prints the tables too. Two builds against each other: bench/ab.py.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build-rel}" && pwd)
REPS=${2:-3}
grep -q 'CMAKE_BUILD_TYPE:STRING=Release' "$BUILD/CMakeCache.txt" ||
  echo "bench/run.sh: warning: $BUILD is not a Release build" >&2
# Each benchmark's output is kept in BUILD_DIR/bench-output; RENDER_ONLY=1 rewrites the document
# from the outputs kept there (after editing the template) without running anything; ONLY="NAME..."
# runs just those benchmarks and renders with the others' kept outputs.
TMP=$BUILD/bench-output
mkdir -p "$TMP"

run() {  # NAME, then the command; its stdout becomes @@NAME@@
  local name=$1
  shift
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return 0; fi
  echo "+ $*" >&2
  { echo "\$ ${*/#$BUILD/build-rel}"; "$@"; } | tee "$TMP/$name"
}
cd "$SRC"
P64="configs/1f1b.json --set schedule.ranks=64 --set schedule.microbatches=1024"
P256="configs/interleaved-1f1b.json --set schedule.ranks=256 --set schedule.microbatches=4096"
if [ "${RENDER_ONLY:-0}" != 1 ]; then
run E2E python3 bench/e2e.py --build "$BUILD" --reps "$REPS" ${E2E_ARGS:-}
run SIM "$BUILD/bench/ppsim_bench_sim" --reps "$REPS"
# Time per rank on wide pipelines (P = 50k..300k): flat when every pass is linear.
run WIDE python3 bench/wide_pipelines.py --build "$BUILD" --reps "$REPS"
# Phase by phase, on all cores and on one (lowering and validation use the cores).
run PHASES64 "$BUILD/bench/ppsim_bench_phases" $P64 --reps $((REPS + 2))
run PHASES256 "$BUILD/bench/ppsim_bench_phases" $P256 --reps "$REPS"
run LOOP256 "$BUILD/bench/ppsim_bench_event_loop" --ranks 256 --ops 65536 --reps "$REPS"
run LOOP64 "$BUILD/bench/ppsim_bench_event_loop" --ranks 64 --ops 8192 --reps "$REPS"
# The floor of a `--json` run: its parts before the engine, and a minimal loop for the engine.
run FLOOR64 python3 bench/floor.py --build "$BUILD" --reps $((REPS + 2)) --target 0.025 $P64
run FLOOR256 python3 bench/floor.py --build "$BUILD" --reps "$REPS" --target 1.5 $P256
run FIRSTTOUCH "$BUILD/bench/ppsim_bench_first_touch"
# One whole layout (GPT-3 175B, t 8, p 16, d 8, M 64) beyond the process's start.
run LAYOUT python3 bench/layout_eval.py --build "$BUILD" --reps $((REPS * 7))
# `ppsim search` on the zero-bubble paper's largest setting (docs/SEARCH.md).
run SEARCH "$BUILD/bench/ppsim_bench_search" --repeat "$REPS"
if [ -z "${ONLY:-}" ]; then
{
  echo "$(date -u +%Y-%m-%d), $(nproc) cpus, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1),"
  echo "load average $(cut -d' ' -f1-3 /proc/loadavg) when the run ended"
} >"$TMP/MACHINE"
fi
fi

python3 - "$SRC/bench/BENCHMARKS.md.in" "$TMP" "$SRC/docs/BENCHMARKS.md" <<'PY'
import os, re, sys
template, outputs, target = sys.argv[1:]
def sub(m):
    with open(os.path.join(outputs, m.group(1))) as f:
        return f.read().rstrip("\n")
text = re.sub(r"^@@([A-Z0-9]+)@@$", sub, open(template).read(), flags=re.M)
open(target, "w").write(text)
PY
echo "bench/run.sh: wrote docs/BENCHMARKS.md" >&2
