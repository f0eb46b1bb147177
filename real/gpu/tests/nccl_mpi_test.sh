#!/usr/bin/env bash
# ctest gpu.nccl_mpi: two processes under mpirun, one GPU each (nccl_mpi_test.cpp). Skips (77)
# with the reason where fewer than 2 GPUs are visible.
set -u
MPIRUN=$1 BIN=$2
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); fi
if [ "$gpus" -lt 2 ]; then
  echo "SKIP: the NCCL multi-process test needs >= 2 GPUs; $gpus visible"
  exit 77
fi
exec "$MPIRUN" --allow-run-as-root --oversubscribe -np 2 "$BIN"
