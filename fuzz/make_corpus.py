#!/usr/bin/env python3
"""Regenerates the seed corpus fuzz/corpus/<target>/ from configs/*.json, the op-list strings of
tests/test_program_text.cpp, `ppsim export` of small configs and the Hugging Face configs of
tests/data/hf/. Usage:
    python3 fuzz/make_corpus.py PPSIM_BINARY
Inputs of the config and pipeline targets are JSON text, then NUL-separated --set assignments
(fuzz/fuzz_entry.hpp)."""
import hashlib, json, pathlib, re, subprocess, sys

root = pathlib.Path(__file__).resolve().parent.parent
ppsim = sys.argv[1]
out = root / "fuzz" / "corpus"
seeds = {"config": [], "oplist": [], "pipeline": [], "search_result": [], "profile": [],
         "hf_config": []}

configs = sorted((root / "configs").glob("*.json"))
small = [("schedule.ranks=3", "schedule.microbatches=4")]
for c in configs:
    text = c.read_text()
    seeds["config"].append(text)
    j = json.loads(text)
    j["schedule"]["microbatches"] = min(j["schedule"]["microbatches"], 6)
    seeds["pipeline"].append(json.dumps(j, indent=1))
# Every comm style, matching, eager and per-stage costs, as overrides of a small 1f1b.
base = json.loads((root / "configs" / "1f1b.json").read_text())
base["schedule"].update(ranks=3, microbatches=4)
sets = [
    ["comm.style=blocking", "comm.eager_limit=8388608"],
    ["comm.style=batched", "comm.matching=fifo"],
    ["comm.style=async-send"],
    ["comm.prefetch=\"all\"", "memory.deallocate_outputs=true"],
    ["schedule.kind=gpipe", "costs={\"forward\":1,\"backward\":2}"],
    ["costs.per_stage={\"1\":{\"forward\":2.5}}", "time_unit=us"],
    ["schedule.kind=interleaved-1f1b", "schedule.chunks=2", "schedule.microbatch_group_size=3"],
]
for s in sets:
    t = json.dumps(base) + "".join("\0" + a for a in s)
    seeds["config"].append(t)
    seeds["pipeline"].append(t)

# Op lists from the tests (valid and invalid ones) and exported programs.
test_text = (root / "tests" / "test_program_text.cpp").read_text()
for lit in re.findall(r'"((?:[^"\\]|\\.)*)"', test_text):
    s = bytes(lit, "utf-8").decode("unicode_escape")
    if re.search(r"\d(F|B|I|W|SEND_|RECV_)|WAIT", s) and len(s) < 200:
        seeds["oplist"].append(s)
for c, extra in [("1f1b.json", []), ("gpipe.json", ["comm.style=blocking"]),
                 ("interleaved-1f1b.json", []), ("1f1b-batched.json", []),
                 ("1f1b-async-send.json", []), ("1f1b.json", ["comm.style=batched"])]:
    args = [ppsim, "export", str(root / "configs" / c), "--set", "schedule.microbatches=4"]
    for e in extra:
        args += ["--set", e]
    text = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    seeds["oplist"].append(text)
    cfg = {"schedule": {"kind": "custom", "ops": text.splitlines()},
           "comm": {"latency": 0.5, "boundary_bytes": 1024, "bandwidth": 100}}
    seeds["pipeline"].append(json.dumps(cfg, indent=1))
    seeds["config"].append(json.dumps(cfg))
dualpipe = {"schedule": {"kind": "custom",
    "routes": [{"stages": [0, 1], "microbatches": [0]}, {"stages": [2, 3], "microbatches": [1]}],
    "ops": ["0F0,0SEND_F0#0,3RECV_F1#1,WAIT(1),3F1,3B1,3SEND_B1#2,0RECV_B0#3,WAIT(0;2;3),0B0",
            "2F1,2SEND_F1#0,1RECV_F0#1,WAIT(1),1F0,1B0,1SEND_B0#2,2RECV_B1#3,WAIT(0;2;3),2B1"]}}
seeds["pipeline"].append(json.dumps(dualpipe))
seeds["config"].append(json.dumps(dualpipe))
seeds["oplist"].append("\n".join(dualpipe["schedule"]["ops"]))
overlap = {"schedule": {"kind": "custom", "ops":
    "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,(0F2;0B0)OVERLAP_F_B,0RECV_B1,0B1,0UNSHARD,0REDUCE_GRAD\n"
    "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1,1RECV_F2,1F2,1B2,1RESHARD\n"},
    "costs": {"forward": 1, "backward": 2}}
seeds["pipeline"].append(json.dumps(overlap))
seeds["oplist"].append(overlap["schedule"]["ops"])
# Costs derived from a model and a GPU (docs/MODEL.md): each bundled model at a small M, and a
# few layouts as overrides.
for c in sorted((root / "configs" / "models").glob("*.json")):
    j = json.loads(c.read_text())
    j["model"].pop("global_batch_size", None)  # it would fix M
    j["schedule"]["microbatches"] = min(j["schedule"].get("microbatches", 4), 4)
    seeds["config"].append(json.dumps(j))
    seeds["pipeline"].append(json.dumps(j, indent=1))
llama = json.loads((root / "configs" / "models" / "llama3-8b.json").read_text())
llama["schedule"].update(kind="1f1b", microbatches=4)
for s in [["model.recompute=\"full\"", "model.sequence_parallel=false"],
          ["model.experts=8", "model.top_k=2", "model.moe_ffn_hidden=2048"],
          ["hardware.memory_bytes=1000000000", "hardware.p2p=\"ib-ndr\""],
          ["model.layers_per_stage=[7,9,9,7]", "costs.forward=2"],
          # The whole step's layout keys (docs/MODEL.md).
          ["model.data_parallel=4", "model.global_batch_size=16", "model.overlap_grad_reduce=true",
           "model.distributed_optimizer=true", "model.tp_comm_overlap=true"],
          ["model.context_parallel=2", "model.flash_attention=true", "hardware.gpus_per_node=4",
           "hardware.inter_node={\"bandwidth\":12.5e9,\"latency\":1e-5}"],
          ["model.experts=8", "model.top_k=2", "model.data_parallel=4",
           "model.expert_parallel=4", "model.shared_experts=1"],
          ["hardware.kernels={\"launch\":1e-5}", "hardware.collectives={\"bus_efficiency\":0.5}"]]:
    t = json.dumps(llama) + "".join("\0" + a for a in s)
    seeds["config"].append(t)
    seeds["pipeline"].append(t)
# A few malformed JSON documents (the reader's error paths).
for bad in ['{"schedule": {"kind": "1f1b", "ranks": 4,\n}', '{"a":[1,2', "", "[]", '{"schedule": 1}']:
    seeds["config"].append(bad)

# `ppsim search --json` results as `ppsim merge` reads them: shards of tiny searches (a few
# candidates each, so a seed stays under the fuzzer's 4096 bytes), a winner's config included.
import tempfile
with tempfile.TemporaryDirectory() as tmp:
    tiny = {"name": "t", "schedule": {"kind": "zb-h1", "ranks": 2, "microbatches": 2},
            "costs": {"forward": 1, "backward_input": 1, "backward_weight": 1},
            "memory": {"activation_bytes": 4, "weight_stash_bytes": 2}}
    path = pathlib.Path(tmp) / "tiny.json"
    path.write_text(json.dumps(tiny))
    for shard in ["0/40", "1/40", "5/40", "30/40", "38/40", "39/40"]:
        r = subprocess.run([ppsim, "search", str(path), "--memory-limit", "16", "--json",
                            "--shard", shard], capture_output=True, text=True, check=True)
        seeds["search_result"].append(json.dumps(json.loads(r.stdout), separators=(",", ":")))
seeds["search_result"] += ['{"name":"t","shard":{"index":2,"count":1}}', "[]", '{"best":null}']

# Kineto traces of one rank (`ppsim import-profile`): the shapes the importer reads, small.
def kineto(events, rank=None):
    doc = {"schemaVersion": 1, "traceEvents": events}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 1}
    return json.dumps(doc)
def rng(name, ts, dur, cat="user_annotation"):
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 1, "ts": ts, "dur": dur}
one = [rng("ProfilerStep#2", 0, 100)]
t = 1.0
for m in range(3):
    for k in "FIW":
        one.append(rng(f"PP:0{k}{m}", t, 4.5))
        one.append(rng(f"PP:0{k}{m}", t + 0.5, 4.0, "gpu_user_annotation"))
        t += 5
seeds["profile"] += [kineto(one, 0), kineto(one[1:]),
                     kineto([rng("PP:0F0", 1, 2), rng("PP:0B0", 4, 3), rng("aten::mm", 2, 1, "cpu_op")]),
                     kineto([rng("ProfilerStep#0", 0, 9), rng("ProfilerStep#1", 10, 9),
                             rng("PP:0F0", 1, 2), rng("PP:0B0", 4, 3), rng("PP:0F0", 11, 2),
                             rng("PP:0B0", 14, 3)]),
                     '{"traceEvents": [{"ph": "X", "name": "PP:0F0", "ts": "x"}]}', '{"traceEvents": 3}', "[]"]
# Calibration fragments (the profile target also reads its input as one): a 1F1B fragment with
# its layout, one with the split, one of another rank count, one without layout.
one_f1b = {str(i): {"forward": 1.0, "backward": 2.0} for i in range(4)}
seeds["profile"] += [json.dumps(f) for f in [
    {"costs": {"per_stage": one_f1b, "launch_overhead": 0.01, "start_offset": 0.1},
     "comm": {"latency": 0.05, "bandwidth": 0}, "layout": {"stage_ranks": [0, 1, 2, 3]}},
    {"calibrated": {"costs": {"per_stage": {"0": {"forward": 1, "backward_input": 1,
                                                  "backward_weight": 1}}},
                    "layout": {"stage_ranks": [0, 1, 2, 3]}}},
    {"costs": {"per_stage": {"0": {"forward": 1}}}, "layout": {"stage_ranks": [0, 1]}},
    {"costs": {"per_stage": {"0": {"forward": 1}}}, "comm": {"latency": 1}}]]

# Hugging Face config.json files (config/hf_config.hpp): the published ones of tests/data/hf/,
# each architecture by model_type alone, and what the reader refuses.
hf = {c.stem: json.loads(c.read_text()) for c in sorted((root / "tests" / "data" / "hf").glob("*.json"))}
for j in hf.values():
    seeds["hf_config"].append(json.dumps(j, separators=(",", ":")))
    k = dict(j)
    del k["architectures"]
    seeds["hf_config"].append(json.dumps(k))
for name, change in [("gpt2", {"n_inner": None, "tie_word_embeddings": False}),
                     ("qwen1.5-moe-a2.7b", {"decoder_sparse_step": 2}),
                     ("qwen1.5-moe-a2.7b", {"mlp_only_layers": [0, 3]}),
                     ("meta-llama-3-8b", {"architectures": ["DeepseekV3ForCausalLM"]}),
                     ("meta-llama-3-8b", {"head_dim": 96, "num_key_value_heads": 5}),
                     ("mixtral-8x7b-v0.1", {"num_experts_per_tok": 9})]:
    seeds["hf_config"].append(json.dumps({**hf[name], **change}))
seeds["hf_config"] += ['{"architectures": ["LlamaForCausalLM"], "hidden_size": 40 96}', "[]", "{}"]

for target, items in seeds.items():
    d = out / target
    d.mkdir(parents=True, exist_ok=True)
    for f in d.iterdir():
        f.unlink()
    for s in dict.fromkeys(items):
        data = s.encode()
        (d / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)
    print(target, len(list(d.iterdir())))
