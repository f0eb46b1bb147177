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
# The whole step (docs/MODEL.md, "The whole step"): its keys, and layouts that cannot be.
gpt="$SRC/configs/models/gpt-175b-megatron.json"
expect 0 model "$gpt" --json
python3 - "$out" <<'PY' || fail=$((fail + 1))
import json, sys
j = json.load(open(sys.argv[1]))
s = j["step"]
parts = ["compute", "tp_comm", "cp_comm", "ep_comm", "pp_bubble", "dp_exposed", "optimizer"]
assert set(s["breakdown"]) == set(parts), s["breakdown"]
assert abs(sum(s["breakdown"].values()) - s["time"]) <= 1e-9 * s["time"], s
assert s["global_batch"] == 1536 and s["gpus"] == 1024, s
assert abs(s["tokens_per_second"] - 1536 * 2048 / s["time"]) <= 1e-9 * s["tokens_per_second"]
assert abs(s["mfu"] - s["tflops_per_gpu"] * 1e12 / 312e12) < 1e-12, s
g = j["placement"]["groups"]
assert j["placement"]["order"] == "tp-cp-ep-dp-pp"
assert g["tensor"] == {"size": 8, "nodes": 1, "per_node": 8}, g
assert g["data"] == {"size": 8, "nodes": 8, "per_node": 1}, g
assert all("step_time" in f for f in j["schedules"] if f.get("verdict") == "ok"), j["schedules"]
print("ok: model --json step and placement")
PY
expect 0 run "$gpt"
has "step_time"
expect 0 run "$gpt" --json
has '"tokens_per_second"'
# Configs without a model section keep their output: no step.
expect 0 run "$SRC/configs/1f1b.json" --json
lacks '"step"'
expect 2 run "$gpt" --set model.global_batch_size=1001
has "key 'model.global_batch_size'"
expect 2 run "$gpt" --set schedule.microbatches=8
has "key 'schedule.microbatches'"
expect 2 run "$gpt" --set model.context_parallel=3
has "key 'model.context_parallel'"
expect 2 run "$gpt" --set model.expert_parallel=2
has "key 'model.expert_parallel'"
expect 2 run "$gpt" --set hardware.inter_node.bandwidth=-1
has "key 'hardware.inter_node.bandwidth'"
expect 2 run "$gpt" --set hardware.inter_node.bandwidth=0
has "key 'hardware.inter_node.bandwidth'"
expect 2 run "$gpt" --set 'hardware.kernels={"lunch": 1}'
has "hardware.kernels.lunch"
expect 2 run "$gpt" --set model.preset=gpt-9t
has "key 'model.preset'"
expect 2 run "$gpt" --set model.layers=96
has "key 'model.layers'"
# A Hugging Face config.json: read, or refused naming the file and key.
mkdir -p "$tmp/hf"
cp "$SRC/tests/data/hf/mixtral-8x7b-v0.1.json" "$tmp/hf/config.json"
cat > "$tmp/hf/run.json" <<'JSON'
{"schedule": {"kind": "1f1b", "ranks": 4},
 "model": {"hf_config": "config.json", "sequence_length": 4096, "tensor_parallel": 2,
           "data_parallel": 8, "expert_parallel": 8, "global_batch_size": 256},
 "hardware": {"gpu": "h100-sxm"}}
JSON
expect 0 model "$tmp/hf/run.json"
has "8 experts top-2"
has "expert 8"
echo '{"architectures": ["BertForMaskedLM"], "hidden_size": 768}' > "$tmp/hf/config.json"
expect 2 model "$tmp/hf/run.json"
has "LlamaForCausalLM"
echo '{"architectures": ' > "$tmp/hf/config.json"
expect 2 model "$tmp/hf/run.json"
has "config.json"
echo '{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096}' > "$tmp/hf/config.json"
expect 2 model "$tmp/hf/run.json"
has "num_hidden_layers"
finish
