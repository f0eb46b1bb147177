#!/usr/bin/env bash
# `ppsim real` as a user's CI sees it (docs/EXECUTOR.md): exit codes 0 ok, 1 hang or disagreement,
# 2 bad input, 130 interrupted; a hang reported in the words of `ppsim check`; no process left.
source "$(dirname "$0")/cli_expect.sh"

# Bad input: exit 2, naming the option or the file.
expect 2 real "$SRC/configs/1f1b.json" --time-scale fast
has "--time-scale"
expect 2 real "$SRC/configs/1f1b.json" --time-scale 11s
has "--time-scale"
expect 2 real "$SRC/configs/1f1b.json" --backend carrier-pigeon
has "--backend: unknown backend 'carrier-pigeon'"
expect 2 real "$SRC/configs/1f1b.json" --iterations 0
has "--iterations"
# Times the clock cannot hold: a time scale below 1 ns (times would be infinite in the trace),
# and a transfer or a rank's compute past 2^53 ns (the clock overflowed: "finished" in 0.02 ms).
expect 2 real "$SRC/configs/1f1b.json" --time-scale 1e-300ns
has "--time-scale: '1e-300ns' is too short: at least 1 ns of wall clock per time unit"
expect 2 real "$SRC/configs/1f1b.json" --time-scale 10s --set comm.latency=1e9
has "key 'comm.latency': one transfer would take 1e+10 s of wall clock"
expect 2 real "$SRC/configs/1f1b.json" --time-scale 10s --set costs.forward=1e9
has "key 'costs': the busiest rank's compute would take"
# Real buffers count against --max-memory: an explicit memory scale whose buffers could pass it is
# refused, the chosen one fits them, and a limit with no room left is refused.
expect 2 real "$SRC/configs/1f1b.json" --time-scale 0 --max-memory 1G --memory-scale 1
has "key 'real.memory_scale': at memory scale 1 the run could allocate 1.758e+10 bytes"
expect 0 real "$SRC/configs/1f1b.json" --time-scale 0 --max-memory 128M
expect 2 real "$SRC/configs/1f1b.json" --time-scale 0 --max-memory 17M
has "leaves no room for the run's real buffers"
# Too many ranks for the backend: refused before the prediction is simulated (nothing else
# printed before the error: no prediction, no progress line).
expect 2 real "$SRC/configs/1f1b.json" --set schedule.ranks=100000 --set schedule.microbatches=1
has "key 'schedule.ranks': the host backend runs a thread per rank: at most 1024 ranks, got 100000"
[ "$(wc -l <"$out")" = 1 ] || bad "more than the error before refusing"
expect 2 real "$SRC/configs/1f1b.json" --hang-timeout 0
has "--hang-timeout"
expect 2 real "$SRC/configs/does-not-exist.json"
has "does-not-exist.json"
expect 2 real "$SRC/configs/1f1b.json" --set real.warmup=-1
has "real.warmup"
expect 2 real "$SRC/configs/1f1b.json" --trace "$tmp/no/such/dir/t.json" --time-scale 0
expect 2 real "$SRC/configs/1f1b.json" --report ""
has "--report: the file name is empty"
expect 2 real "$SRC/configs/1f1b.json" --report "$tmp/same" --trace "$tmp/same"
has "name the same file"

# One trace with both runs as process groups, and the side-by-side report.
expect 0 real "$SRC/configs/1f1b.json" --time-scale 0 --trace "$tmp/both.json" --report "$tmp/r.html"
python3 - "$tmp/both.json" "$tmp/r.html" <<'PY' || fail=$((fail + 1))
import json, sys
t = json.load(open(sys.argv[1]))
names = {e["args"]["name"] for e in t["traceEvents"] if e.get("name") == "process_name"}
want = {f"{g} rank {r}" for g in ("simulated", "measured") for r in range(4)}
assert names == want, names
page = open(sys.argv[2]).read()
assert page.count('class="timeline"') >= 2 or page.count("<svg") >= 2, "two timelines"
assert "measured" in page and "simulated" in page
PY

# A run that finishes and agrees with the simulator: 0, JSON that parses.
expect 0 real "$SRC/configs/1f1b.json" --time-scale 0
has "makespan"
expect 0 real "$SRC/configs/gpipe.json" --time-scale 0 --iterations 2 --warmup 1 --json
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["outcome"]=="finished" and j["comparison"]["verdicts_agree"] and j["comparison"]["peaks_agree"] and len(j["iteration_makespans"])==2, j' "$out" \
  || bad "--json object"

# --calibrate --json gives the calibrated costs and network as a config fragment: a config with
# it predicts exactly the makespan the calibrated comparison was made against.
for cfg in 1f1b.json zb-h1.json; do
  expect 0 real "$SRC/configs/$cfg" --time-scale 1ms --calibrate --json
  python3 - "$SRC/configs/$cfg" "$out" "$tmp/calibrated.json" <<'PY' || fail=$((fail + 1))
import json, sys
cfg, run = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
cal = run["calibrated"]
assert set(cal["costs"]["per_stage"]) == {str(s) for s in range(run["predicted"]["stages"])}, cal
cfg.setdefault("costs", {}).update(cal["costs"])  # per_stage, launch_overhead, start_offset
cfg.setdefault("comm", {}).update(cal["comm"])
json.dump(cfg, open(sys.argv[3], "w"))
PY
  "$PPSIM" run "$tmp/calibrated.json" --json >"$tmp/rerun.json" 2>&1 || { echo "FAIL: $cfg: the calibrated config does not run"; cat "$tmp/rerun.json"; fail=$((fail + 1)); }
  python3 - "$out" "$tmp/rerun.json" <<'PY' && good "$cfg: the calibrated config predicts the calibrated makespan" || bad "$cfg: calibrated makespan"
import json, sys
want = json.load(open(sys.argv[1]))["comparison"]["predicted_makespan"]
got = json.load(open(sys.argv[2]))["makespan"]
assert abs(got - want) <= 1e-9 * max(1.0, want), (got, want)
PY
done

# A deadlock: observed as a hang (exit 1) naming the same blocked ops as `ppsim check`, and its
# partial trace written.
deadlock="$SRC/configs/1f1b-blocking-deadlock.json"
"$PPSIM" check "$deadlock" >"$tmp/check.txt" 2>&1
expect 1 real "$deadlock" --time-scale 0 --hang-timeout 0.2 --trace "$tmp/hang.json"
has "the simulator predicted the same"
blocked=$(grep -c "blocked in" "$tmp/check.txt")
[ "$blocked" -gt 0 ] || { echo "FAIL: check printed no blocked op"; cat "$tmp/check.txt"; fail=$((fail + 1)); }
while IFS= read -r line; do
  has "$(echo "$line" | sed 's/^ *//')"
done < <(grep "blocked in" "$tmp/check.txt")
[ -s "$tmp/hang.json" ] || bad "no partial trace after the hang"

# SIGINT during a long run (1f1b at 1 s per time unit: about 36 s): 130 within a few seconds, no
# process left. The signal is repeated until it exits, in case the first came before the handler.
"$PPSIM" real "$SRC/configs/1f1b.json" --time-scale 1s --trace "$tmp/int.json" >"$out" 2>&1 &
pid=$!
sleep 1
start=$(date +%s)
for _ in $(seq 1 40); do
  kill -0 "$pid" 2>/dev/null || break
  kill -INT "$pid" 2>/dev/null
  sleep 0.5
done
wait "$pid"
got=$?
elapsed=$(( $(date +%s) - start ))
if [ "$got" != 130 ]; then
  echo "FAIL: SIGINT: exit $got, expected 130"; cat "$out"; fail=$((fail + 1))
elif [ "$elapsed" -gt 10 ]; then
  echo "FAIL: SIGINT: took ${elapsed}s to stop"; fail=$((fail + 1))
else
  echo "ok: SIGINT -> 130 in ${elapsed}s"
fi
has "interrupted"
kill -0 "$pid" 2>/dev/null && { echo "FAIL: process $pid still there"; kill -9 "$pid"; fail=$((fail + 1)); }
# A time scale the host cannot keep (a 1 us op sleeps for tens of us): the report says so, and
# the run itself is not wrong (exit 0); at time scale 0 nothing is timed, so nothing is said.
expect 0 real "$SRC/configs/1f1b.json" --time-scale 1us
has "this machine is too busy for time scale 1 us"
expect 0 real "$SRC/configs/1f1b.json" --time-scale 0
grep -q "host lag" "$out" && bad "host lag reported at time scale 0"
leftovers=$(ls -A "$tmp" | grep -c '^\.ppsim-' || true)
[ "$leftovers" = 0 ] || { echo "FAIL: temporary files left: $(ls -A "$tmp")"; fail=$((fail + 1)); }

finish
