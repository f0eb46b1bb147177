#!/usr/bin/env bash
# Rewrite tests/golden/[models/]<name>.json from `ppsim run --json configs/[models/]<name>.json`.
# Run after a deliberate change of the model, then review the diff before committing.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${PPSIM:-build/cli/ppsim}
mkdir -p tests/golden/models
for cfg in configs/*.json configs/models/*.json; do
  out=tests/golden/${cfg#configs/}
  "$bin" run --json "$cfg" > "$out" || [ $? = 1 ]  # 1 = the schedule is wrong, still golden
  echo "wrote $out"
done
