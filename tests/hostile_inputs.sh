#!/usr/bin/env bash
# Hostile-input harness (issue 6): a few hundred inputs of at most 1 MB (deep JSON, huge numbers,
# enormous sizes, hostile custom programs, long tokens, junk, wrong types) through `ppsim check`,
# `run --json` and `run --trace`, each under `timeout` and `/usr/bin/time`. Prints one line per run
# and a summary of violations by class; exits 1 if there is any. Details: tests/hostile_inputs.py.
#   tests/hostile_inputs.sh PPSIM_BINARY [--jobs N] [--timeout S] [--only NAME_PART] [--keep DIR]
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 PPSIM_BINARY [options]" >&2; exit 2; }
ulimit -v unlimited 2>/dev/null || true  # measure real use, not a cap
exec python3 "$(dirname "$0")/hostile_inputs.py" "$@"
