#!/usr/bin/env bash
# `ppsim import-profile` and `--calibration` from the command line (docs/PROFILES.md): the round
# trip real (host executor) → Kineto traces → import → the same order and costs → a prediction;
# public traces of non-pipeline jobs refused; bad traces and options exit 2 naming the file.
source "$(dirname "$0")/cli_expect.sh"
zb="$SRC/configs/zb-h1.json"

expect 0 real "$zb" --time-scale 2ms --profile-trace "$tmp/kt" --json
cp "$out" "$tmp/real.json"
[ -f "$tmp/kt/rank0.json" ] && [ -f "$tmp/kt/rank3.json" ] && echo "ok: one trace per rank" ||
  bad "no traces in $tmp/kt"
expect 0 import-profile "$tmp"/kt/rank3.json "$tmp"/kt/rank1.json "$tmp"/kt/rank0.json "$tmp"/kt/rank2.json --json -o "$tmp/frag.json"
cp "$out" "$tmp/import.json"
expect 0 export "$zb"
cp "$out" "$tmp/export.txt"
python3 - "$tmp/import.json" "$tmp/export.txt" "$tmp/frag.json" <<'PY' || fail=$((fail + 1))
import json, re, sys
j = json.load(open(sys.argv[1]))
lines = open(sys.argv[2]).read().split("\n")
for k in ("calibrated", "measured"):
    assert k in j, k
assert set(j["calibrated"]) == {"time_unit", "costs", "comm", "layout"} and {"latency", "bandwidth"} <= set(j["calibrated"]["comm"])
assert j["calibrated"]["layout"] == {"stage_ranks": [0, 1, 2, 3]}, j["calibrated"]["layout"]
assert {"launch_overhead", "start_offset"} <= set(j["calibrated"]["costs"])
stages = j["calibrated"]["costs"]["per_stage"]
assert len(stages) == 4 and all({"forward", "backward_input", "backward_weight"} <= set(s) for s in stages.values())
assert j["measured"]["makespan"] > 0
# Ranks from distributedInfo, whatever order the files came in; each rank's compute order exact.
for r in j["measured"]["per_rank"]:
    want = [op for op in lines[r["rank"]].split(",") if re.fullmatch(r"\d+[FBIW]\d+", op)]
    assert r["ops"].split(",") == want, (r["rank"], r["ops"][:80], want[:8])
    assert r["file"].endswith(f"rank{r['rank']}.json"), r
# Every transfer (3 boundaries x 8 microbatches, each way) a send paired with its receive.
t = j["measured"]["transfers"]
assert t["pairs"] == 48 and t["unpaired"] == 0 and len(t["sizes"]) == 1, t
assert j["calibrated"]["comm"]["latency"] > 0, j["calibrated"]["comm"]
frag = json.load(open(sys.argv[3]))
assert frag == j["calibrated"], "the -o fragment is the --json one"
# Measured on the host, so no bound on how fast it was (a sanitizer build runs far slower): the
# emulated ops sleep their modelled 1 ms at least.
for s in stages.values():
    assert all(v >= 0.99 for v in s.values()), s
print("ok: import-profile keys, ranks, order, fragment")
PY
expect 0 import-profile "$tmp"/kt/rank*.json --report "$tmp/report.html" --trace "$tmp/t.json" --svg "$tmp/t.svg"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert len(d['traceEvents']) > 100" "$tmp/t.json" &&
  grep -q '<svg' "$tmp/t.svg" && good "trace and svg" || bad "trace or svg"
has "import-profile: 4 traces, P=4 S=4 M=8"
grep -q "replayed with its measured costs" "$tmp/report.html" && good "report" || bad "report"
# Predict another schedule with the measured costs.
expect 0 run "$zb" --calibration "$tmp/frag.json" --set schedule.kind=1f1b --json
python3 - "$out" <<'PY' || fail=$((fail + 1))
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ok"] and j["schedule"] == "1f1b" and j["makespan"] > 20, j["makespan"]
print("ok: run --calibration predicts 1f1b:", j["makespan"])
PY
expect 0 run "$zb" --calibration "$tmp/import.json"  # a whole --json output: its "calibrated"
has "makespan"
echo '{"costs": {"per_stage": {"0": {"forward": -1}}}}' >"$tmp/bad-frag.json"
expect 2 run "$zb" --calibration "$tmp/bad-frag.json"
has "bad-frag.json"

# Real public traces of non-pipeline jobs: refused, saying what they hold.
for t in "$SRC"/tests/data/kineto-real/*.json.gz; do
  [ -f "$t" ] || continue
  expect 2 import-profile "$t"
  has "no pipeline actions"
  has "$(basename "$t")"
done
# Bad traces and options.
printf '{"traceEvents": [{"ph": "X", "name": "PP:0F0", "ts": 1' >"$tmp/trunc.json"
expect 2 import-profile "$tmp/trunc.json"
has "trunc.json"
has "malformed or truncated"
head -c 200 "$tmp/kt/rank0.json" | gzip >"$tmp/trunc.json.gz"
expect 2 import-profile "$tmp/trunc.json.gz"
has "trunc.json.gz"
printf '\x1f\x8b\x08garbage' >"$tmp/notgz.json.gz"
expect 2 import-profile "$tmp/notgz.json.gz"
has "notgz.json.gz"
expect 2 import-profile "$tmp/nosuch.json"
has "nosuch.json"
expect 2 import-profile "$tmp"/kt/rank*.json --step 3
has "no ProfilerStep#3"
expect 2 import-profile "$tmp"/kt/rank0.json "$tmp"/kt/rank0.json
has "given by two traces"
echo '{"actions": [{"pattern": "x(\\d+)"}]}' >"$tmp/map.json"
expect 2 import-profile "$tmp"/kt/rank*.json --map "$tmp/map.json"
has "map.json"
# Hostile comm and kernel events: odd args are skipped (a send with no usable peer or size), a
# kernel without a numeric time is exit 2 naming the event; the actions still import.
cat >"$tmp/odd.json" <<'J'
{"traceEvents": [
 {"ph": "X", "name": "PP:0F0", "ts": 1, "dur": 2, "tid": 1},
 {"ph": "X", "name": "PP:0B0", "ts": 5, "dur": 2, "tid": 1},
 {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 3, "dur": 1,
  "args": {"Collective name": "send", "Rank": "x", "In msg nelems": -5, "dtype": "Float"}},
 {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 3, "dur": 1,
  "args": {"Collective name": "recv", "Src Rank": 99999999999, "Out msg nelems": 1e300}},
 {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 3, "dur": 1,
  "args": {"Collective name": "send", "Rank": 3, "Process Group Ranks": "[0, x]"}},
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 1.5, "dur": 0.1,
  "args": {"correlation": "12a"}},
 {"ph": "X", "cat": "kernel", "name": "k", "ts": 2, "dur": 1, "args": {"correlation": [1]}}]}
J
expect 0 import-profile "$tmp/odd.json" --json
python3 -c "import json,sys; t=json.load(open(sys.argv[1]))['measured']['transfers']; assert t['pairs'] == 0 and t['unpaired'] == 1, t" "$out" &&
  good "odd comm args skipped" || bad "odd comm args"
sed 's/"ts": 2, "dur": 1, "args": {"correlation": \[1\]}/"ts": "2", "dur": 1, "args": {"correlation": 7}/' "$tmp/odd.json" >"$tmp/odd2.json"
expect 2 import-profile "$tmp/odd2.json"
has "odd2.json"
has "'ts'"
# Traces of different runs, or a rank left out: exit 2 naming the file and the rank.
expect 2 import-profile "$tmp"/kt/rank0.json "$tmp"/kt/rank1.json "$tmp"/kt/rank2.json
has "rank 3 has no trace"
expect 0 real "$zb" --set schedule.ranks=2 --time-scale 2ms --profile-trace "$tmp/kt2"
expect 2 import-profile "$tmp"/kt2/rank0.json "$tmp"/kt2/rank1.json "$tmp"/kt/rank2.json "$tmp"/kt/rank3.json
has "kt/rank2.json: distributedInfo.world_size 4"
# --map patterns: RE2's syntax, bounded; never a signal.
python3 -c "import json; print(json.dumps({'actions': [{'pattern': '(' * 20000 + 'a' + ')' * 20000, 'kind': 'F', 'microbatch': 1}]}))" >"$tmp/deep-map.json"
expect 2 import-profile "$tmp"/kt/rank*.json --map "$tmp/deep-map.json"
has "deep-map.json: key 'actions[0].pattern'"
expect 2 import-profile "$tmp"/kt/rank*.json -o "$tmp/kt/rank0.json"
expect 2 import-profile "$tmp"/kt/rank*.json --trace "$tmp/kt/rank1.json"
has "writing it would replace the input"
finish
