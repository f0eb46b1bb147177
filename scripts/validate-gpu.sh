#!/usr/bin/env bash
# Measures the GPU backends against the simulator on this machine's GPU(s) and writes the GPU
# section of docs/VALIDATION.md (the rest of the file is scripts/validate.sh's).
# Usage: bash scripts/validate-gpu.sh   (builds build-gpu/ if PPSIM is not set; needs a GPU,
#        CUDA >= 12.4 and NCCL in /usr/local/cuda, python3)
# What it runs (docs/EXECUTOR.md "GPUs"):
#  - GPipe, 1F1B, interleaved 1F1B (V=2), zb-h1 and DualPipeV (V=2; when `ppsim list` has
#    them) at P=4 on one GPU, M in {8, 16, 32}: `ppsim real --backend cuda --compute cuda
#    --calibrate`, an MLP block of HIDDEN x SEQ tokens per op (each op >= ~1 ms on an H100
#    quarter); targets: makespan within 3%,
#    bubble fraction within 0.02, device stash peaks equal, issue gap median < 20 us;
#  - the all-blocking 1F1B on the GPU: must hang as predicted (watchdog report); with eager
#    sends it must run, as predicted;
#  - cross-schedule: 1F1B at M=8 calibrated (--calibrate) on its own, then GPipe, interleaved
#    1F1B, zb-h1 and DualPipeV at M in {8, 16, 32} predicted from it alone (--calibration), with
#    and without the launch model; every rank runs two MLP blocks per microbatch (one op of 2
#    blocks at V=1, two of 1 at V=2), so that the schedules run the same model; target 5%;
#  - the nccl transport with what the GPUs allow (P = GPUs, at most 4; with one GPU: the message
#    that says to use cuda) and ctest's gpu.* tests (gpu.nccl_mpi needs >= 2 GPUs and MPI).
# Settings: HIDDEN (2048), SEQ (4096), LAYERS (1), ITERATIONS (3), WARMUP (1); RUN_TIMEOUT (300 s,
# a run still going then is killed and reported as failed); LOGS=DIR keeps every run's config,
# JSON and stderr there (they are otherwise removed).
# Exit 0 when every target is met, 1 when one is not, 77 without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "validate-gpu: no GPU visible (nvidia-smi -L): nothing measured, docs unchanged" >&2
  exit 77
fi
if [ -z "${PPSIM:-}" ]; then
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DPPSIM_BUILD_TESTS=ON \
    -DPPSIM_BUILD_BENCH=OFF >/dev/null
  ninja -C build-gpu ppsim ppsim_gpu_tests $(ninja -C build-gpu -t targets all 2>/dev/null |
    grep -o '^ppsim_nccl_mpi_test' | head -1)
  PPSIM=build-gpu/cli/ppsim
fi
hidden=${HIDDEN:-2048}
seq=${SEQ:-4096}
layers=${LAYERS:-1}
iterations=${ITERATIONS:-3}
warmup=${WARMUP:-1}
gpus=$(nvidia-smi -L | grep -c '^GPU')
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)
out=$(mktemp -d)
keep_logs() { if [ -n "${LOGS:-}" ]; then mkdir -p "$LOGS" && cp -r "$out"/. "$LOGS"/; fi; }
trap 'keep_logs; rm -rf "$out"' EXIT
# Stash = the block's activations (X and A, bf16), boundary = one [tokens, hidden] tensor; both
# rounded up to the pool's 2 MiB pages so that the measured peaks compare exactly.
mib=$((1 << 20))
stash=$(( (seq * (hidden + 4 * hidden) * 2 + 2 * mib - 1) / (2 * mib) * (2 * mib) ))
boundary=$((seq * hidden * 2))
write_config() {  # write_config FILE KIND RANKS MICROBATCHES STYLE [LAYERS]
  local chunks=""
  case $2 in interleaved-1f1b | dualpipev) chunks=', "chunks": 2' ;; esac
  cat >"$1" <<JSON
{"name": "gpu-$2-p$3-m$4", "time_unit": "ms",
 "schedule": {"kind": "$2", "ranks": $3, "microbatches": $4$chunks},
 "costs": {"forward": 1.0, "backward_input": 1.0, "backward_weight": 1.0},
 "comm": {"style": "$5", "latency": 0.01, "bandwidth": 1e9, "boundary_bytes": $boundary,
          "eager_limit": 0},
 "memory": {"activation_bytes": $stash, "weight_stash_bytes": 0, "static_bytes": 0},
 "model": {"hidden": $hidden, "sequence_length": $seq, "layers": ${6:-$layers}}}
JSON
}
run() {  # run NAME ARGS...: ppsim real ... --json into $out/NAME.json, exit code into NAME.code
  local name=$1; shift
  echo "validate-gpu: $PPSIM real $*" >&2
  set +e
  timeout -k 10 "${RUN_TIMEOUT:-300}" "$PPSIM" real "$@" >"$out/$name.json" 2>"$out/$name.err"
  echo $? >"$out/$name.code"
  set -e
}
schedules=(gpipe 1f1b interleaved-1f1b)
if "$PPSIM" list 2>/dev/null | grep -qw zb-h1; then schedules+=(zb-h1); fi
# DualPipeV: overlapped F&B pairs (run one part after the other), beyond the targets' four.
if "$PPSIM" list 2>/dev/null | grep -qw dualpipev; then schedules+=(dualpipev); fi
timed="--time-scale 1ms --iterations $iterations --warmup $warmup --calibrate --json"
for s in "${schedules[@]}"; do
  for m in 8 16 32; do
    write_config "$out/$s-m$m.cfg" "$s" 4 "$m" async
    run "cuda-$s-m$m" "$out/$s-m$m.cfg" --backend cuda --compute cuda $timed
  done
done
# Cross-schedule: one calibration on 1F1B, the others predicted from it (scripts/cross_schedule.py).
write_config "$out/x-1f1b.cfg" 1f1b 4 8 async 2
run cross-calibration "$out/x-1f1b.cfg" --backend cuda --compute cuda $timed
: >"$out/cross.jsonl"
if [ "$(cat "$out/cross-calibration.code")" -le 1 ]; then
  python3 scripts/cross_schedule.py no-launch "$out/cross-calibration.json" "$out/x-no-launch.json"
  for s in "${schedules[@]}"; do
    [ "$s" = 1f1b ] && continue
    case $s in interleaved-1f1b | dualpipev) blocks=1 ;; *) blocks=2 ;; esac
    for m in 8 16 32; do
      write_config "$out/x-$s-m$m.cfg" "$s" 4 "$m" async "$blocks"
      run "cross-$s-m$m" "$out/x-$s-m$m.cfg" --backend cuda --compute cuda --time-scale 1ms \
        --iterations "$iterations" --warmup "$warmup" \
        --calibration "$out/cross-calibration.json" --json
      if "$PPSIM" run "$out/x-$s-m$m.cfg" --calibration "$out/x-no-launch.json" --json \
        >"$out/x-plain.json" 2>/dev/null; then
        python3 scripts/cross_schedule.py row "$s" "$m" "$out/cross-$s-m$m.json" \
          "$out/x-plain.json" >>"$out/cross.jsonl" || true
      fi
    done
  done
fi
# The all-blocking 1F1B: predicted to deadlock; on the GPU the watchdog must report the same.
write_config "$out/blocking.cfg" 1f1b 4 8 blocking
run hang-1f1b-blocking "$out/blocking.cfg" --backend cuda --compute cuda --hang-timeout 2 --json
# The same program with eager sends (every message within comm.eager_limit): it runs, as predicted.
run eager-1f1b-blocking "$out/blocking.cfg" --backend cuda --compute cuda --hang-timeout 2 \
  --set comm.eager_limit=$boundary $timed
# NCCL: one GPU per rank.
p=$(( gpus >= 4 ? 4 : gpus ))
if [ "$p" -ge 2 ]; then
  write_config "$out/nccl.cfg" 1f1b "$p" 8 async
  run "nccl-1f1b-p$p" "$out/nccl.cfg" --backend nccl --compute cuda $timed
fi
write_config "$out/nccl-too-many.cfg" 1f1b $((gpus + 1)) 8 async
run nccl-too-few-gpus "$out/nccl-too-many.cfg" --backend nccl --compute cuda --json
set +e
ctest --test-dir "$(dirname "$(dirname "$PPSIM")")" --timeout 120 -R '^gpu\.' --output-on-failure \
  >"$out/ctest.txt" 2>&1
set -e
python3 scripts/validation_gpu_report.py --output docs/VALIDATION.md \
  --cross "$out/cross.jsonl" --calibration "$out/cross-calibration.json" \
  --gpu "$gpu" --gpus "$gpus" --date "$(date -u '+%Y-%m-%d %H:%M UTC')" \
  --command "bash scripts/validate-gpu.sh" \
  --settings "HIDDEN=$hidden SEQ=$seq LAYERS=$layers (ffn 4h, bf16), stash $stash B, boundary $boundary B, $iterations iterations after $warmup warmup, --calibrate" \
  "$out"
