#!/usr/bin/env bash
# bench/floor.py's plumbing (docs/BENCHMARKS.md, "The floor of a run"): its loop runs one event per
# op of the run that `ppsim run` reports, spread over the program's ranks, and its sums add up.
set -u
cd "$SRC"
fail=0
args=(configs/interleaved-1f1b.json --set schedule.ranks=6 --set schedule.microbatches=18)
parts=$(python3 bench/floor.py --build "$BUILD" --reps 1 --json "${args[@]}") || {
  echo "FAIL: floor.py exited $?"
  exit 1
}
# The op count from the header of `ppsim run`'s report, e.g. "... (218 ops)".
ops=$("$BUILD/cli/ppsim" run "${args[@]}" | sed -n '1s/.*(\([0-9]*\) ops)$/\1/p')
python3 - "$parts" "$ops" <<'PY' || fail=1
import json, math, sys
p, ops = json.loads(sys.argv[1]), int(sys.argv[2])
bad = []
if p["ops"] != ops: bad.append(f"ops {p['ops']} != ppsim run's {ops}")
if p["ranks"] != 6: bad.append(f"ranks {p['ranks']} != 6")
if p["events"] != math.ceil(ops / 6) * 6: bad.append(f"events {p['events']} for {ops} ops on 6 ranks")
for k in ("fixed_s", "prepare_s", "validate_s", "loop_s", "engine_s", "end_to_end_s"):
    if not p[k] > 0: bad.append(f"{k} = {p[k]}")
before = p["fixed_s"] + p["prepare_s"] + p["validate_s"]
if not math.isclose(p["before_engine_s"], before): bad.append("before_engine_s is not the sum")
if not math.isclose(p["floor_s"], before + p["loop_s"]): bad.append("floor_s is not the sum")
if not math.isclose(p["floor_two_cores_s"], before + p["loop_s"] / 2): bad.append("floor_two_cores_s")
print("\n".join("FAIL: " + b for b in bad) or f"ok: {ops} ops, parts add up")
sys.exit(1 if bad else 0)
PY
# The table names the verdict against a target: a target of 1 ms is below any floor.
text=$(python3 bench/floor.py --build "$BUILD" --reps 1 --target 0.001 "${args[@]}")
if grep -q "^FLOOR: before the engine + minimal loop" <<<"$text" &&
  grep -q "no engine is fast enough\|The floor is ABOVE the target" <<<"$text"; then
  echo "ok: the table and its verdict"
else
  echo "FAIL: the table:"
  echo "$text"
  fail=1
fi
# Bad arguments: an error and a non-zero exit, not a table.
if python3 bench/floor.py --build "$BUILD" --reps 0 "${args[@]}" >/dev/null 2>&1; then
  echo "FAIL: --reps 0 accepted"
  fail=1
fi
if python3 bench/floor.py --build "$BUILD" --reps 1 configs/no-such.json >/dev/null 2>&1; then
  echo "FAIL: a missing config accepted"
  fail=1
fi
exit $fail
