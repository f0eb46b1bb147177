#!/usr/bin/env bash
# Regenerates docs/VALIDATION.md: runs `ppsim real --json` on GPipe, 1F1B and interleaved 1F1B at
# P = 4 on the host executor with emulated compute and writes measured against predicted; then
# calibrates on 1F1B at M = 8 alone (`--calibrate`) and predicts GPipe, interleaved 1F1B, ZB-H1
# and DualPipeV at M = 8, 16, 32 from it (`--calibration`), with and without the launch model.
# Usage: bash scripts/validate.sh   (builds build/ if needed; PPSIM=path/to/ppsim uses that binary)
# Settings: TIME_SCALE (default 5ms per time unit), ITERATIONS (3), WARMUP (1).
# Exit 0 when every case agrees with the simulator and meets the 5% makespan target, else 1.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PPSIM:-}" ]; then
  BUILD_DIR=build bash scripts/build.sh
  PPSIM=build/cli/ppsim
fi
time_scale=${TIME_SCALE:-5ms}
iterations=${ITERATIONS:-3}
warmup=${WARMUP:-1}
load=$(cut -d' ' -f1-3 /proc/loadavg)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
configs=(configs/gpipe.json configs/1f1b.json configs/interleaved-1f1b.json)
for c in "${configs[@]}"; do
  name=$(basename "$c" .json)
  echo "validate: $PPSIM real $c --set schedule.ranks=4 --time-scale $time_scale" \
    "--iterations $iterations --warmup $warmup --json" >&2
  # Exit 1 (a disagreement) is reported in the document, not fatal here; 2 and up are.
  set +e
  "$PPSIM" real "$c" --set schedule.ranks=4 --time-scale "$time_scale" \
    --iterations "$iterations" --warmup "$warmup" --json >"$out/$name.json"
  code=$?
  set -e
  if [ "$code" -gt 1 ]; then
    echo "validate: $c: ppsim real exited $code" >&2
    exit "$code"
  fi
done
# Cross-schedule: one calibration, the other schedules predicted from it.
"$PPSIM" real configs/1f1b.json --set schedule.ranks=4 --time-scale "$time_scale" \
  --iterations "$iterations" --warmup "$warmup" --calibrate --json >"$out/calibration.json" || true
python3 scripts/cross_schedule.py no-launch "$out/calibration.json" "$out/no-launch.json"
: >"$out/cross.jsonl"
for c in gpipe interleaved-1f1b zb-h1 dualpipev; do
  for m in 8 16 32; do
    echo "validate: $PPSIM real configs/$c.json --set schedule.microbatches=$m --calibration ..." >&2
    set +e
    "$PPSIM" real "configs/$c.json" --set schedule.ranks=4 --set schedule.microbatches=$m \
      --time-scale "$time_scale" --iterations "$iterations" --warmup "$warmup" \
      --calibration "$out/calibration.json" --json >"$out/cross.json"
    code=$?
    set -e
    [ "$code" -le 1 ] || { echo "validate: configs/$c.json M=$m: exit $code" >&2; exit "$code"; }
    "$PPSIM" run "configs/$c.json" --set schedule.ranks=4 --set schedule.microbatches=$m \
      --calibration "$out/no-launch.json" --json >"$out/plain.json"
    python3 scripts/cross_schedule.py row "$c" "$m" "$out/cross.json" "$out/plain.json" \
      >>"$out/cross.jsonl"
  done
done
python3 scripts/validation_report.py --cross "$out/cross.jsonl" \
  --calibration "$out/calibration.json" \
  --command "bash scripts/validate.sh" \
  --settings "time scale $time_scale per time unit, $iterations iterations after $warmup warmup" \
  --machine "$(nproc) CPUs, $(uname -m), $(uname -sr), load average $load before the runs" \
  --output docs/VALIDATION.md "$out"/gpipe.json "$out"/1f1b.json "$out"/interleaved-1f1b.json
