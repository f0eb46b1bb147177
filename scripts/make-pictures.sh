#!/usr/bin/env bash
# Regenerate the timeline pictures in docs/img/ that README.md shows, from the bundled configs:
#   scripts/make-pictures.sh
# Env: PPSIM (a built ppsim; default: build it in BUILD_DIR, default build/).
# Each picture is one `ppsim run CONFIG --svg FILE`; the commands are echoed as they run.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PPSIM:-}" ]; then
  BUILD_DIR=${BUILD_DIR:-build} bash scripts/build.sh -DPPSIM_BUILD_BENCH=OFF >/dev/null
  PPSIM=${BUILD_DIR:-build}/cli/ppsim
fi
mkdir -p docs/img

# ppsim run ARGS...: exit 1 (the schedule is wrong) is expected for the deadlocking config.
picture() {
  echo "ppsim run $*"
  local code=0
  "$PPSIM" run "$@" >/dev/null || code=$?
  [ "$code" -le 1 ] || { echo "ppsim exited $code" >&2; exit "$code"; }
}

picture configs/gpipe.json --svg docs/img/gpipe.svg
picture configs/1f1b.json --svg docs/img/1f1b.svg
picture configs/interleaved-1f1b.json --svg docs/img/interleaved-1f1b.svg
picture configs/1f1b-blocking-deadlock.json --svg docs/img/1f1b-blocking-deadlock.svg
# docs/SCHEDULES.md's V-shaped schedules.
picture configs/zbv.json --svg docs/img/zbv.svg
picture configs/dualpipev.json --svg docs/img/dualpipev.svg
# A hang only NCCL's stream order causes (docs/SEMANTICS.md).
picture configs/hangs/pytorch-172668.json --svg docs/img/hang-nccl-pytorch-172668.svg
# Large: 32 ranks x 256 microbatches, boxes merge and the shape stays.
picture configs/1f1b.json --set name=1f1b-p32-m256 --set schedule.ranks=32 \
  --set schedule.microbatches=256 --svg docs/img/1f1b-p32-m256.svg
# The terminal timeline, as text.
echo "ppsim run configs/1f1b.json --timeline --no-color"
COLUMNS=100 "$PPSIM" run configs/1f1b.json --timeline --no-color |
  sed -n '/ — /,$p' >docs/img/1f1b-timeline.txt
ls -l docs/img/*.svg docs/img/*.txt
