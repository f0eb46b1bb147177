#!/usr/bin/env bash
# The GPU backends from the command line where no GPU is needed (docs/EXECUTOR.md "GPUs"): the
# `model` section read strictly by every command (exit 2 naming the key), and a GPU backend asked
# for where it cannot run: exit 4 with a message saying why and what to use instead, not a crash.
source "$(dirname "$0")/cli_expect.sh"
config() {  # config NAME MODEL-JSON: 1f1b P=4 M=8 with that model section
  cat >"$tmp/$1.json" <<JSON
{"name": "$1", "schedule": {"kind": "1f1b", "ranks": 4, "microbatches": 8},
 "costs": {"forward": 1, "backward": 2}, "comm": {"boundary_bytes": 1048576},
 "memory": {"activation_bytes": 4194304}, "model": $2}
JSON
}

config good '{"hidden": 1024, "sequence_length": 2048, "layers": 2}'
expect 0 run "$tmp/good.json"
config typo '{"hidden": 1024, "sequence_length": 2048, "micro_batchsize": 2}'
expect 2 run "$tmp/typo.json"
has "key 'model.micro_batchsize'"
config noseq '{"hidden": 1024}'
expect 2 run "$tmp/noseq.json"
has "key 'model.sequence_length': is required"
config nohidden '{"sequence_length": 2048}'
expect 2 check "$tmp/nohidden.json"
has "key 'model.hidden'"
config dtype '{"hidden": 64, "sequence_length": 64, "dtype": "int4"}'
expect 2 real "$tmp/dtype.json" --time-scale 0
has "key 'model.dtype'"
expect 2 run "$tmp/good.json" --set model.layers=0
has "model.layers"

# Where CUDA cannot run (no driver or no GPU), or ppsim was built without it: exit 4.
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "skip: a GPU is visible here; the no-GPU messages are not checked (ctest gpu.backends runs)"
else
  expect 4 real "$SRC/configs/1f1b.json" --backend cuda --time-scale 0
  grep -qE "no usable CUDA device|no CUDA device|built without CUDA" "$out" ||
    bad "no reason given"
  has "ppsim: error: $SRC/configs/1f1b.json: "
  expect 4 real "$tmp/good.json" --backend nccl --compute cuda --time-scale 0
  expect 4 real "$tmp/good.json" --compute cuda --time-scale 0
  expect 4 real "$tmp/good.json" --backend cuda --json
  [ -s "$out" ] && ! grep -q '^{' "$out" || bad "--json printed an object"
  if "$PPSIM" real "$SRC/configs/1f1b.json" --backend cuda 2>&1 | grep -q "built without"; then
    echo "(this ppsim was built without the GPU backends)"
  else
    # Built with them: a cuda compute without a model section is a config error (exit 2) on any
    # machine, reported before the device is looked for.
    expect 2 real "$SRC/configs/1f1b.json" --compute cuda --time-scale 0
    has "key 'model'"
    # The cuda backend runs the mpi model only: a config of the nccl model is refused, named.
    expect 2 real "$SRC/configs/1f1b.json" --backend cuda --time-scale 0 \
      --set comm.semantics=nccl
    has "key 'comm.semantics': the cuda backend has MPI's point-to-point semantics"
  fi
fi
finish
