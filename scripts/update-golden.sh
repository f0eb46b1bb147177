#!/usr/bin/env bash
# Rewrite tests/golden/<name>.json from `ppsim run --json configs/<name>.json`.
# Run after a deliberate change of the model, then review the diff before committing.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${PPSIM:-build/cli/ppsim}
mkdir -p tests/golden
for cfg in configs/*.json; do
  name=$(basename "$cfg" .json)
  "$bin" run --json "$cfg" > "tests/golden/$name.json" || [ $? = 1 ]  # 1 = the schedule is wrong, still golden
  echo "wrote tests/golden/$name.json"
done
