#!/usr/bin/env bash
# `ppsim model` and the `model` + `hardware` sections from the command line (docs/MODEL.md): exit
# codes, the JSON interface, out_of_memory in `check`, a calibration fragment.
source "$(dirname "$0")/cli_expect.sh"
llama="$SRC/configs/models/llama2-70b.json"

expect 0 model "$llama"
has "schedules at M=32"
has "zbv"
expect 0 model "$llama" --json
python3 - "$out" <<'PY' || fail=$((fail + 1))
import json, sys
j = json.load(open(sys.argv[1]))
keys = ["stage", "rank", "layers", "params", "static_bytes", "activation_bytes",
        "weight_stash_bytes", "flops_forward", "flops_backward_input", "flops_backward_weight",
        "forward", "backward_input", "backward_weight"]
assert len(j["stages"]) == 8, j["stages"]
for s in j["stages"]:
    missing = [k for k in keys if k not in s]
    assert not missing, missing
assert j["boundary_bytes"] == 4096 * 8192 * 2 // 8, j["boundary_bytes"]
assert {s["schedule"] for s in j["schedules"]} >= {"1f1b", "zbv", "gpipe"}, j["schedules"]
print("ok: model --json keys")
PY
# No hardware: nothing to derive from.
expect 2 model "$SRC/configs/1f1b.json"
has "key 'hardware'"
expect 2 model "$llama" --set hardware.gpu=h900
has "key 'hardware.gpu'"
expect 2 run "$llama" --set model.heads=7
has "key 'model.heads'"
expect 2 check "$llama" --set model.layers=81
has "model.layers"
# Does it fit: out of memory is a wrong schedule (1), with the rank and its parts.
expect 1 check "$SRC/configs/models/llama3-8b.json" --set model.recompute=none
has "OUT_OF_MEMORY (4 ranks)"
has "rank 0 peaks at"
has "activations"
expect 0 check "$SRC/configs/models/llama3-8b.json"
expect 1 run "$SRC/configs/models/llama3-8b.json" --json --set hardware.memory_bytes=1000000000
has '"out_of_memory"'
# A calibration fragment: its costs win and the achieved efficiency is printed.
cat >"$tmp/cal.json" <<'JSON'
{"calibrated": {"costs": {"forward": 40, "backward_input": 40, "backward_weight": 40},
                "comm": {"latency": 0.01, "bandwidth": 5e7}}}
JSON
expect 0 model "$llama" --calibration "$tmp/cal.json"
has "achieved efficiency of the given costs"
echo '{"costs": {"forward": "fast"}}' >"$tmp/bad.json"
expect 2 model "$llama" --calibration "$tmp/bad.json"
has "$tmp/bad.json: key 'costs.forward'"
expect 2 model "$llama" --calibration "$tmp/missing.json"
has "$tmp/missing.json"
finish
