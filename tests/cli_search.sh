#!/usr/bin/env bash
# `ppsim search` and `ppsim merge` from the command line (docs/SEARCH.md): exit codes, the JSON
# interface, the winner as a config and as a PyTorch CSV that simulate to the best's makespan,
# shards merged = one run, the report.
source "$(dirname "$0")/cli_expect.sh"
zb="$SRC/configs/zb-h1.json"

expect 0 search "$zb" --memory-limit 4GB
has "best: "
has "best per family:"
has "pareto front"
expect 0 search "$zb" --memory-limit 4GB --json
cp "$out" "$tmp/whole.json"
python3 - "$out" <<'PY' || fail=$((fail + 1))
import json, sys
j = json.load(open(sys.argv[1]))
b = j["best"]
for k in ["schedule", "makespan", "bubble_fraction", "peak_memory_bytes", "ops", "lower_bound"]:
    assert k in b, k
assert len(b["peak_memory_bytes"]) == 4 and max(b["peak_memory_bytes"]) <= 4e9, b
assert len(b["ops"]) == 4 and all(isinstance(o, str) and o for o in b["ops"]), b["ops"]
assert 0 < b["lower_bound"] <= b["makespan"], b
assert isinstance(j["families"], list) and {f["family"] for f in j["families"]} >= {"1f1b", "zbv", "constructed"}
front = j["pareto"]
assert front and all(front[i]["peak_memory_bytes"] < front[i + 1]["peak_memory_bytes"] and
                     front[i]["makespan"] > front[i + 1]["makespan"] for i in range(len(front) - 1)), front
print("ok: search --json keys, best within the limit, front ordered")
PY

# The winner as a runnable config, and as a PyTorch CSV imported back: the best's makespan.
expect 0 search "$zb" --memory-limit 4GB -o "$tmp/winner.json"
expect 0 run "$tmp/winner.json" --json
python3 - "$out" "$tmp/whole.json" <<'PY' || fail=$((fail + 1))
import json, sys
run, whole = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert run["ok"] and abs(run["makespan"] - whole["best"]["makespan"]) < 1e-9 * run["makespan"], (run["makespan"], whole["best"]["makespan"])
print("ok: -o config runs to the best's makespan")
PY
expect 0 search "$zb" --memory-limit 4GB -o "$tmp/winner.csv" --format torch-csv --json
cp "$out" "$tmp/torch.json"
expect 0 import "$tmp/winner.csv" -o "$tmp/imported.json"
python3 - "$tmp/imported.json" "$tmp/torch.json" <<'PY' || fail=$((fail + 1))
import json, sys
cfg, found = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
# The CSV holds the compute order; PyTorch's lowering adds the communication. Run it with the
# winner's costs, memory and network model (per chunk when it has more chunks than the config).
winner = found["best"]["config"]
for k in ("costs", "memory", "comm"):
    cfg[k] = winner[k]
del cfg["comm"]["style"]
json.dump(cfg, open(sys.argv[1], "w"))
PY
expect 0 run "$tmp/imported.json" --json
python3 - "$out" "$tmp/torch.json" <<'PY' || fail=$((fail + 1))
import json, sys
run, whole = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
best = whole["best"]
assert best["config"]["comm"]["style"] == "torch", best["config"]["comm"]
assert run["ok"] and abs(run["makespan"] - best["makespan"]) < 1e-9 * run["makespan"], (run["makespan"], best["makespan"])
print("ok: torch-csv winner imported back runs to the best's makespan", run["makespan"])
PY

# Shards through files and `ppsim merge`: the table of one run.
for i in 0 1 2; do expect 0 search "$zb" --memory-limit 4GB --shard $i/3 --json; cp "$out" "$tmp/s$i.json"; done
expect 0 merge "$tmp/s2.json" "$tmp/s0.json" "$tmp/s1.json" --json
python3 - "$out" "$tmp/whole.json" <<'PY' || fail=$((fail + 1))
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert a == b, [k for k in a if a[k] != b.get(k)]
print("ok: merged shards == one run")
PY
expect 0 merge "$tmp/s0.json" "$tmp/s1.json" "$tmp/s2.json"
has "best: "
expect 2 merge "$tmp/s0.json" "$tmp/s1.json"
has "shard 2 of 3 is missing"
expect 2 merge "$tmp/s0.json" "$tmp/s0.json" "$tmp/s1.json" "$tmp/s2.json"
has "given twice"
echo '{"name": 3}' >"$tmp/bad.json"
expect 2 merge "$tmp/bad.json"
has "bad.json"
has "'name'"

# `compare --shard`: shards through `ppsim merge` = one `compare --json`.
sweep=(compare "$SRC/configs/1f1b.json" --schedules 1f1b,zb-h1,zbv,gpipe --microbatches 4,8 --json)
expect 0 "${sweep[@]}"
cp "$out" "$tmp/c_all.json"
for i in 0 1 2; do expect 0 "${sweep[@]}" --shard $i/3; cp "$out" "$tmp/c$i.json"; done
expect 0 merge "$tmp/c1.json" "$tmp/c2.json" "$tmp/c0.json" -o "$tmp/c_merged.json"
cmp -s "$tmp/c_all.json" "$tmp/c_merged.json" && echo "ok: merged compare shards == one compare" ||
  bad "merged compare shards differ"
expect 2 merge "$tmp/c1.json" "$tmp/c2.json"
has "shard 0 of 3 is missing"
expect 2 compare "$SRC/configs/1f1b.json" --shard 0/2
has "add --json"
expect 2 compare "$SRC/configs/1f1b.json" --shard 2/2 --json
has "--shard"

# The report: the Pareto chart and the winner's timeline.
expect 0 search "$zb" --memory-limit 4GB --report "$tmp/search.html"
grep -q 'chart-pareto' "$tmp/search.html" && grep -q '<svg' "$tmp/search.html" && good "report" || bad "report"

# Bad input: exit 2 naming the option or key, and nothing written.
expect 2 search "$zb"
has "hardware.memory_bytes"
expect 2 search "$zb" --memory-limit lots
has "--memory-limit"
expect 2 search "$zb" --memory-limit 0
expect 2 search "$zb" --memory-limit 4GB --shard 3/3
has "--shard"
expect 2 search "$zb" --memory-limit 4GB --format svg -o "$tmp/x"
has "--format"
[ ! -e "$tmp/x" ] && good "nothing written" || bad "wrote $tmp/x"
expect 2 search "$zb" --memory-limit 4GB -o "$zb"
expect 2 search "$SRC/configs/zb-h1.json" --memory-limit 4GB --set schedule.ranks=0
has "schedule.ranks"
# A limit nothing fits: no best, exit 0 with the table; -o cannot write a winner (exit 2).
expect 0 search "$zb" --memory-limit 1MB
has "none finished within the limit"
expect 2 search "$zb" --memory-limit 1MB -o "$tmp/none.json"
[ ! -e "$tmp/none.json" ] && good "nothing written" || bad "wrote none.json"
# A model config: the limit defaults to the GPU's memory, and is at most that.
expect 0 search "$SRC/configs/models/llama3-8b.json"
has "(hardware.memory_bytes)"
expect 2 search "$SRC/configs/models/llama3-8b.json" --set model.recompute=none --memory-limit 250GB -o "$tmp/big.json"
has "hardware.memory_bytes"
has "--memory-limit"
[ ! -e "$tmp/big.json" ] && good "nothing written" || bad "wrote big.json"

# Winners of every kind written and run again: DualPipe (routes), uneven layers per stage, and
# a PyTorch CSV that cannot hold the best (the fastest it can, said on stderr).
for model in llama3-8b gpt-1.5b-zb; do
  expect 0 search "$SRC/configs/models/$model.json" --json -o "$tmp/$model-w.json"
  cp "$out" "$tmp/$model-s.json"
  expect 0 run "$tmp/$model-w.json" --json
  python3 - "$out" "$tmp/$model-s.json" "$model" <<'PY' || fail=$((fail + 1))
import json, sys
run, found = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
b = found["best"]
assert run["ok"] and run["makespan"] == b["makespan"], (run["makespan"], b["makespan"])
print("ok:", sys.argv[3], "winner", b["schedule"], "runs to the best's makespan")
PY
done
"$PPSIM" search "$SRC/configs/models/llama3-8b.json" --format torch-csv -o "$tmp/l.csv" --json \
  >"$tmp/l-s.json" 2>"$out" && good "search --format torch-csv" || bad "search --format torch-csv"
has "cannot be a PyTorch CSV"
python3 - "$tmp/l-s.json" "$tmp/l.csv" "$tmp/l-csv.json" <<'PY' || fail=$((fail + 1))
import json, sys
found = json.load(open(sys.argv[1]))
w = found["written"]
assert found["best"]["family"] == "dualpipe" and w["candidate"] != found["best"]["candidate"], w
cfg = w["config"]
cfg["schedule"] = {"kind": "torch-csv", "file": sys.argv[2]}
for k in ("style", "prefetch"):
    cfg["comm"].pop(k, None)
json.dump(cfg, open(sys.argv[3], "w"))
PY
expect 0 run "$tmp/l-csv.json" --json
python3 - "$out" "$tmp/l-s.json" <<'PY' || fail=$((fail + 1))
import json, sys
run, found = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
want = found["candidates"][found["written"]["candidate"]]["makespan"]
assert run["ok"] and run["makespan"] == want, (run["makespan"], want)
print("ok: the CSV written instead runs to its candidate's makespan")
PY

# Shards of different inputs: exit 2 naming the shard's file; control characters escaped.
expect 0 search "$zb" --memory-limit 4GB --shard 1/3 --set costs.forward=5 --json
cp "$out" "$tmp/other1.json"
expect 2 merge "$tmp/s0.json" "$tmp/other1.json" "$tmp/s2.json"
has "other1.json"
has "'digest'"
expect 2 merge "$tmp/s0.json" "$tmp/s1.json"
has "s0.json"
for i in 0 1; do
  expect 0 compare "$SRC/configs/$([ $i = 0 ] && echo 1f1b || echo gpipe).json" --shard $i/2 --json
  cp "$out" "$tmp/cd$i.json"
done
expect 2 merge "$tmp/cd0.json" "$tmp/cd1.json"
has "cd1.json"
has "digest"
python3 - "$tmp/whole.json" "$tmp/ctl.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["name"] = "x\u001b[31m\u007f\u0085y"
j["candidates"][0]["verdict"] = "v\u001b]0;t\u0007\u009b"
json.dump(j, open(sys.argv[2], "w"))
PY
for form in "" --json; do
  expect 0 merge "$tmp/ctl.json" $form
  python3 - "$out" <<'PY' && good "merge ${form:-text}: no raw control characters" || bad "merge ${form:-text}: raw control characters"
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
sys.exit(1 if re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", text) else 0)
PY
done
finish
