#!/usr/bin/env python3
"""Hostile-input harness (issue 6): generates a few hundred hostile inputs of at most 1 MB into a
temporary directory and runs `ppsim check`, `ppsim run --json`, `ppsim run --trace` (a `.json`
and a `.pftrace` file), `ppsim model --json`, `ppsim search --json --memory-limit 80GB` and `ppsim run --json
CONFIG --calibration INPUT` on each,
under `timeout` and `/usr/bin/time -f '%e %M'`. Run through
tests/hostile_inputs.sh.

    hostile_inputs.py PPSIM [--jobs N] [--timeout S] [--only SUBSTRING] [--keep DIR]

One line per (input, subcommand): name, subcommand, exit code, seconds, max RSS MiB and the
violations it shows. Then a summary by class; exits 1 if any violation:
  crash      exit >= 128 (signal), or sanitizer / std::terminate output
  slow       over 10 s, 60 s for a search (a timeout is exit 124 and counts here too)
  memory     over 2 GB max RSS
  exit       exit code not in {0, 1, 2}
  nofile     exit 2 and stderr names neither the config file nor (with --set) the flag
  leftover   a file other than the trace left in the trace directory (*.tmp.<pid>)
  echo       stderr over 16 KiB (a huge token echoed)
  badjson    exit 0 or 1 and the output of `run --json` (or the trace written) is not valid JSON,
             or holds a negative byte count
"""
import argparse, concurrent.futures, json, os, pathlib, random, shutil, subprocess, sys, tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
CONFIGS = sorted((ROOT / "configs").glob("*.json"))
MB = 1 << 20
SLOW_S, BIG_MIB, ECHO_BYTES = 10.0, 2048, 16 * 1024


class Gen:
    def __init__(self, d):
        self.dir = pathlib.Path(d)
        self.cases = []  # (name, path, [--set assignments])

    def file(self, name, data, sets=()):
        p = self.dir / (name + ".json")
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
        assert len(data) <= MB, name
        p.write_bytes(data)
        self.cases.append((name, str(p), list(sets)))

    def over(self, name, base, sets):
        self.cases.append((name, str(base), list(sets)))


def leaves(j, prefix=""):
    for k, v in j.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            yield from leaves(v, key + ".")
        else:
            yield key, v


def set_path(j, key, value):
    parts = key.split(".")
    for p in parts[:-1]:
        j = j[p]
    j[parts[-1]] = value


def generate(g):
    rnd = random.Random(6)
    one = ROOT / "configs" / "1f1b.json"
    dead = ROOT / "configs" / "1f1b-blocking-deadlock.json"
    inter = ROOT / "configs" / "interleaved-1f1b.json"
    base = json.loads(one.read_text())

    # Deep nesting: whole file, as a value, through --set.
    for depth in (1000, 10000, 100000, 500000):
        g.file(f"deep-array-file-{depth}", "[" * depth + "]" * depth)
    g.file("deep-object-file-100000", '{"a":' * 100000 + "1" + "}" * 100000)
    g.file("deep-open-only-500000", "[" * 500000)
    for depth in (10000, 100000):
        t = one.read_text().replace('"name": "1f1b-p4-m8"', '"name": ' + "[" * depth + "]" * depth)
        g.file(f"deep-value-name-{depth}", t)
        t = one.read_text().replace('"static_bytes": 2147483648',
                                    '"static_bytes": ' + "[" * depth + "]" * depth)
        g.file(f"deep-value-memory-{depth}", t)
    # One argument holds at most 128 KiB (MAX_ARG_STRLEN).
    for depth in (10000, 60000):
        g.over(f"deep-set-name-{depth}", one, ["name=" + "[" * depth + "]" * depth])
    for depth in (2000, 20000):
        g.over(f"deep-set-costs-{depth}", one, ["costs=" + '{"a":' * depth + "1" + "}" * depth])

    # Numbers: huge, negative, NaN-ish, on every numeric key, through --set.
    numeric = ["schedule.ranks", "schedule.microbatches", "schedule.chunks",
               "costs.forward", "costs.backward", "costs.backward_input", "costs.backward_weight",
               "comm.prefetch", "comm.latency", "comm.bandwidth", "comm.boundary_bytes",
               "comm.eager_limit", "memory.activation_bytes", "memory.weight_stash_bytes",
               "memory.static_bytes"]
    values = ["1e308", "-1e308", "1e18", "9e18", "-1", "0", "1e-320", "18446744073709551615",
              "-9223372036854775808", "1e400", '"NaN"', "-0.0", "4.9e-324"]
    for key in numeric:
        for v in values:
            g.over(f"num-{key}={v}", one, [f"{key}={v}"])
    g.over("num-costs-per-stage-1e308", one, ['costs.per_stage={"1":{"forward":1e308}}'])
    g.over("num-bytes-1e18-bandwidth", one, ["comm.boundary_bytes=1e18", "comm.bandwidth=1"])
    g.over("num-latency-1e308-blocking", one, ["comm.latency=1e308", "comm.style=blocking"])

    # The model and hardware sections (docs/MODEL.md): every size and figure, hostile values.
    llama = ROOT / "configs" / "models" / "llama2-70b.json"
    for key in ["model.layers", "model.hidden", "model.heads", "model.kv_heads",
                "model.ffn_hidden", "model.vocab", "model.sequence_length",
                "model.micro_batch_size", "model.tensor_parallel", "model.data_parallel",
                "model.experts", "model.top_k", "hardware.memory_bytes",
                "hardware.flops_efficiency", "hardware.peak_flops",
                "model.context_parallel", "model.expert_parallel", "model.global_batch_size",
                "hardware.gpus_per_node", "hardware.kernels.launch",
                "hardware.kernels.gemm_peak_fraction", "hardware.collectives.bus_efficiency",
                "hardware.inter_node.bandwidth", "hardware.intra_node.latency"]:
        for v in values:
            g.over(f"model-{key}={v}", llama, [f"{key}={v}"])
    # The whole step's layout keys together, and the network from a file or a preset.
    g.over("model-step-everything-on", llama, ["model.overlap_grad_reduce=true",
                                               "model.overlap_param_gather=true",
                                               "model.tp_comm_overlap=true",
                                               "model.context_parallel=2",
                                               "hardware.gpus_per_node=1"])
    g.over("model-hf-missing", llama, ['model={"hf_config": "/nonexistent/config.json", '
                                       '"sequence_length": 4096}'])
    g.over("model-hf-directory", llama, ['model={"hf_config": "/", "sequence_length": 4096}'])
    g.over("model-preset-junk", llama, ['model={"preset": "gpt-\u0000"}'])
    g.over("model-preset-with-layers", llama, ['model={"preset": "gpt-175b", "layers": 3}'])
    many = json.loads(llama.read_text())
    many["model"]["layers_per_stage"] = [1] * 100000
    g.file("model-layers-per-stage-100000", json.dumps(many))
    g.over("model-huge-everything", llama, ["model.hidden=1048576", "model.sequence_length=16777216",
                                            "model.micro_batch_size=65536", "model.vocab=1073741824",
                                            "model.heads=1048576", "model.kv_heads=1048576"])
    g.over("model-p2p-object-junk", llama, ['hardware.p2p={"bandwidth":1e-300,"latency":1e-300}'])
    g.over("model-ranks-100000", llama, ["schedule.ranks=100000", "model.layers=100000"])

    # Enormous sizes.
    for n in ("100000", "200000", "1000000", "1000000000"):
        g.over(f"size-1f1b-ranks-{n}-m1", one, [f"schedule.ranks={n}", "schedule.microbatches=1"])
        g.over(f"size-1f1b-microbatches-{n}", one, [f"schedule.microbatches={n}"])
    g.over("size-gpipe-ranks-100000-m1", one, ["schedule.kind=gpipe", "schedule.ranks=100000",
                                               "schedule.microbatches=1"])
    for n in ("50000", "100000"):
        g.over(f"size-deadlock-ranks-{n}", dead, [f"schedule.ranks={n}"])
    g.over("size-interleaved-chunks-100000", inter, ["schedule.chunks=100000"])
    g.over("size-interleaved-chunks-1e9", inter, ["schedule.chunks=1000000000"])
    g.over("size-interleaved-group-1e9", inter, ["schedule.microbatches=1000000000",
                                                 "schedule.microbatch_group_size=1000000000"])
    g.over("size-ranks-x-microbatches-2e4", one, ["schedule.ranks=20000",
                                                   "schedule.microbatches=20000"])

    # Custom programs.
    def custom(name, ops, **extra):
        cfg = {"schedule": {"kind": "custom", "ops": ops}}
        cfg.update(extra)
        g.file(name, json.dumps(cfg))

    custom("custom-microbatch-1e8", ["0F100000000,0B100000000"])
    custom("custom-microbatch-int-max", ["0F2147483647,0B2147483647"])
    custom("custom-microbatch-2e9", ["0F2000000000,0B2000000000"])
    # Sparse cells: one microbatch id far out on stage 0 only, so stage 1's cell is a neighbour
    # of a touched cell and stage 2's is not (the fuzz_pipeline crash of stop 26).
    custom("custom-microbatch-1e8-isolated", ["0F0,0SEND_F0,0RECV_B0,0B0,0F100000000",
                                              "1RECV_F0,1F0,1SEND_F0,1RECV_B0,1B0,1SEND_B0",
                                              "2RECV_F0,2F0,2B0,2SEND_B0"])
    custom("custom-stage-1e6", ["0F0,0B0", "1000000F0,1000000B0"])
    custom("custom-stage-1e8-one-rank", ["100000000F0"])
    for n in (65535, 65536, 100000):
        ids = ";".join(str(i) for i in range(n))
        custom(f"custom-wait-{n}-ids", ["0F0,0SEND_F0#0,WAIT(" + ids + "),0B0"])
    custom("custom-request-id-2^31", ["0F0,0SEND_F0#2147483648,WAIT(2147483648)",
                                      "1RECV_F0,1F0"])
    custom("custom-request-id-2^31-1", ["0F0,0SEND_F0#2147483647,WAIT(2147483647)",
                                        "1RECV_F0,1F0"])
    custom("custom-1mb-line", ["0F0," * (MB // 4 - 100)])
    custom("custom-1mb-token", ["0" * (MB - 100) + "F0"])
    custom("custom-bad-token-1mb", ["0F0,0" + "X" * (MB - 100)])
    custom("custom-50000-ranks", [f"{r}F0" for r in range(50000)])
    custom("custom-empty-rank", ["0F0,0SEND_F0", "", "1RECV_F0,1F0"])
    custom("custom-empty-ops", [])
    custom("custom-empty-string", "")
    custom("custom-send-from-last", ["0F0,0SEND_F0"])
    custom("custom-0I0-no-split", ["0F0,0I0,0W0"], costs={"backward": 2})
    custom("custom-many-waits", ["0F0," + ",".join(f"0SEND_F0#{i},WAIT({i})" for i in range(30000))])
    custom("custom-overlap-deep", ["(" * 10000 + "0F0" + ")" * 10000 + "OVERLAP_F_B"])
    g.file("custom-routes-1e8", json.dumps({"schedule": {"kind": "custom", "ops": ["0F0,0B0"],
        "routes": [{"stages": [0], "microbatches": [100000000]}]}}))
    g.file("custom-routes-stage-1e8", json.dumps({"schedule": {"kind": "custom", "ops": ["0F0,0B0"],
        "routes": [{"stages": [100000000], "microbatches": [0]}]}}))

    # Calibration fragments (`run-calibration` reads each input as one, over a bundled config).
    per = {str(i): {"forward": 1, "backward": 2} for i in range(4)}
    for name, layout in [("layout-ranks-huge", {"stage_ranks": [0, 1, 2, 1 << 30]}),
                         ("layout-ranks-negative", {"stage_ranks": [-1, 0, 1, 2]}),
                         ("layout-100000-stages", {"stage_ranks": list(range(100000))}),
                         ("layout-not-array", {"stage_ranks": "0,1,2,3"}),
                         ("layout-empty", {"stage_ranks": []})]:
        g.file("calibration-" + name, json.dumps({"costs": {"per_stage": per}, "layout": layout}))
    g.file("calibration-per-stage-junk", json.dumps({"costs": {"per_stage": {"0": "x", "9": []}},
                                                     "layout": {"stage_ranks": [0, 1, 2, 3]}}))
    g.file("calibration-nan-launch", '{"costs": {"launch_overhead": 1e999}}')

    # Long tokens, duplicates, junk.
    big = "x" * (MB - 400)
    g.file("long-name-1mb", one.read_text().replace('"1f1b-p4-m8"', json.dumps(big)))
    g.file("long-key-1mb", one.read_text().replace('"name"', json.dumps(big)))
    g.file("long-kind-1mb", one.read_text().replace('"1f1b"', json.dumps(big)))
    g.file("long-number-1mb", one.read_text().replace("268435456", "1" * (MB - 400)))
    g.file("long-bad-token-1mb", '{"schedule": ' + "t" * (MB - 100) + "}")
    g.over("set-invalid-utf8-ranks", one, ["schedule.ranks=\udcff"])
    g.over("set-invalid-utf8-name", one, ["name=\udcff\udcfe"])
    g.over("set-binary-junk-style", one, ["comm.style=" + bytes(range(1, 256)).decode("utf-8", "surrogateescape")])
    g.over("long-set-128k", one, ["name=" + "y" * 120000])
    g.over("long-set-key-128k", one, ["a" * 120000 + "=1"])
    g.file("dup-key-schedule", '{"schedule": {"kind": "1f1b", "ranks": 4, "microbatches": 8},'
           ' "schedule": {"kind": "gpipe", "ranks": 2, "microbatches": 2}}')
    g.file("dup-key-ranks", '{"schedule": {"kind": "1f1b", "ranks": 4, "ranks": 2, '
           '"microbatches": 8}}')
    g.file("dup-per-stage-01-1", json.dumps({"schedule": {"kind": "1f1b", "ranks": 2,
        "microbatches": 2}, "costs": {"per_stage": {"01": {"forward": 2}, "1": {"forward": 3}}}}))
    g.file("per-stage-1e9", json.dumps({"schedule": {"kind": "1f1b", "ranks": 2, "microbatches": 2},
        "costs": {"per_stage": {"1000000000": {"forward": 2}}}}))
    g.file("per-stage-many", json.dumps({"schedule": {"kind": "1f1b", "ranks": 2, "microbatches": 2},
        "costs": {"per_stage": {str(i): {"forward": 2} for i in range(20000)}}}))
    g.file("ignored-group-size-1f1b", json.dumps({"schedule": {"kind": "1f1b", "ranks": 2,
        "microbatches": 2, "microbatch_group_size": 4}}))
    g.file("ignored-prefetch-blocking", json.dumps({"schedule": {"kind": "1f1b", "ranks": 2,
        "microbatches": 2}, "comm": {"style": "blocking", "prefetch": 3}}))
    g.file("empty", b"")
    g.file("whitespace", b" \n\t\r\n" * 1000)
    g.file("nul-bytes", b"\0" * 4096)
    g.file("binary-1k", bytes(rnd.randrange(256) for _ in range(1024)))
    g.file("binary-1mb", rnd.randbytes(MB))
    g.file("utf8-invalid", b'{"name": "\xff\xfe\xc0\xaf", "schedule": {"kind": "1f1b"}}')
    g.file("utf8-bom", b"\xef\xbb\xbf" + one.read_bytes())
    g.file("utf16", one.read_text().encode("utf-16"))
    g.file("unicode-junk", "".join(chr(rnd.randrange(0x80, 0x2FFFF)) for _ in range(20000))
           .encode("utf-8", "surrogatepass"))
    g.file("unicode-key", one.read_text().replace('"name"', '"n\u0430me"'))
    g.file("nul-inside", one.read_bytes()[:40] + b"\0" + one.read_bytes()[40:])
    g.file("json-array-top", "[1,2,3]")
    g.file("json-string-top", '"hello"')
    g.file("json-many-docs", one.read_text() * 3)
    g.file("json-comments", "// c\n" + one.read_text())
    g.cases.append(("dev-zero", "/dev/zero", []))
    g.cases.append(("dev-null", "/dev/null", []))
    d = g.dir / "a-directory.json"
    d.mkdir()
    g.cases.append(("directory", str(d), []))
    g.cases.append(("missing-file", str(g.dir / "does-not-exist.json"), []))

    # Every config truncated, and each of its keys given a wrong type.
    wrong = ["\"str\"", True, None, [], {}, -1, 1.5, 1e308, "", [1, 2], {"a": 1}]
    for c in CONFIGS:
        text = c.read_text()
        for cut in (1, len(text) // 4, len(text) // 2, len(text) - 2):
            g.file(f"truncated-{c.stem}-{cut}", text[:cut])
        j = json.loads(text)
        for i, (key, _) in enumerate(leaves(j)):
            picks = wrong if c.name == "1f1b.json" else [wrong[(i + k) % len(wrong)]
                                                         for k in range(3)]
            for k, v in enumerate(picks):
                m = json.loads(text)
                set_path(m, key, v)
                g.file(f"wrongtype-{c.stem}-{key}-{k}", json.dumps(m))


def negative_bytes(j):
    if isinstance(j, dict):
        return any((k.endswith("bytes") and isinstance(x, (int, float)) and x < 0)
                   or negative_bytes(x) for k, x in j.items())
    if isinstance(j, list):
        return any(negative_bytes(x) for x in j)
    return False


def valid_json(data):
    def strict(c):
        raise ValueError(c)
    try:
        return not negative_bytes(json.loads(data, parse_constant=strict))
    except (ValueError, RecursionError):
        return False


def run_one(ppsim, case, sub, tmo, work):
    name, path, sets = case
    args = [ppsim]
    tdir = None
    if sub == "check":
        args += ["check", path]
    elif sub == "run-json":
        args += ["run", "--json", path]
    elif sub == "model-json":
        args += ["model", "--json", path]
    elif sub == "search-json":
        args += ["search", "--json", "--memory-limit", "80GB", path]
    elif sub == "run-calibration":  # the input as a calibration fragment over another layout
        args += ["run", "--json", str(ROOT / "configs" / "interleaved-1f1b.json"), "--calibration",
                 path]
    else:  # run-trace (Chrome JSON) or run-pftrace (Perfetto protobuf)
        tdir = tempfile.mkdtemp(dir=work, prefix="trace-")
        trace_name = "trace.pftrace" if sub == "run-pftrace" else "trace.json"
        args += ["run", path, "--trace", os.path.join(tdir, trace_name)]
    for s in sets:
        args += ["--set", s]
    tf = tempfile.NamedTemporaryFile(dir=work, delete=False)
    tf.close()
    cmd = ["/usr/bin/time", "-f", "%e %M", "-o", tf.name, "timeout", "-k", "5", str(tmo)] + args
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE if sub in ("run-json", "check", "model-json", "search-json", "run-calibration") else subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
    except OSError as e:  # e.g. an argument over the kernel's limit: the input is broken
        os.unlink(tf.name)
        return (name, sub, -1, 0.0, 0.0, ["harness"], str(e))
    rc = p.returncode
    try:
        last = pathlib.Path(tf.name).read_text().strip().splitlines()[-1].split()
        secs, rss = float(last[0]), int(last[1]) / 1024
    except Exception:
        secs, rss = float("nan"), float("nan")
    os.unlink(tf.name)
    err = p.stderr
    # `check` reports a bad file in its place on stdout ("ERROR FILE: ..."); the others on stderr.
    said = err + p.stdout if sub == "check" else err
    # GNU time prints "Command terminated by signal N" / "Command exited with non-zero status".
    v = []
    if rc >= 128 or rc < 0 or any(s in err for s in (b"AddressSanitizer", b"runtime error:",
                                                      b"terminate called", b"Segmentation")):
        v.append("crash")
    # A search runs about 85 programs of the config's size (docs/SEARCH.md): six times the time.
    if rc == 124 or secs > SLOW_S * (6 if sub == "search-json" else 1):
        v.append("slow")
    if rss > BIG_MIB:
        v.append("memory")
    if rc not in (0, 1, 2):
        v.append("exit")
    if rc == 2 and path.encode() not in said and not (sets and b"--set" in said):
        v.append("nofile")
    if len(err) > ECHO_BYTES or (sub == "check" and len(p.stdout) > ECHO_BYTES and rc == 2):
        v.append("echo")
    if rc in (0, 1) and sub in ("run-json", "model-json", "search-json", "run-calibration") and \
            not valid_json(p.stdout):
        v.append("badjson")
    if tdir:
        trace = os.path.join(tdir, trace_name)
        if (sub == "run-trace" and rc in (0, 1) and os.path.exists(trace) and
                os.path.getsize(trace) < 64 * MB):
            if not valid_json(pathlib.Path(trace).read_bytes()):
                v.append("badjson")
        left = [f for f in os.listdir(tdir) if f != trace_name]
        if left:
            v.append("leftover")
        shutil.rmtree(tdir, ignore_errors=True)
    first = err.decode("utf-8", "replace").strip().splitlines()[:1]
    return (name, sub, rc, secs, rss, v, (first[0][:150] if first else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ppsim")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=20)
    ap.add_argument("--only", default="")
    ap.add_argument("--subcommands",
                    default="check,run-json,run-trace,run-pftrace,model-json,search-json,run-calibration")
    ap.add_argument("--keep", default="")
    a = ap.parse_args()
    ppsim = os.path.abspath(a.ppsim)
    work = a.keep or tempfile.mkdtemp(prefix="ppsim-hostile-")
    os.makedirs(work, exist_ok=True)
    try:
        g = Gen(os.path.join(work, "inputs"))
        g.dir.mkdir(exist_ok=True)
        generate(g)
        cases = [c for c in g.cases if a.only in c[0]]
        jobs = [(c, s) for c in cases for s in a.subcommands.split(",")]
        print(f"# {len(cases)} inputs, {len(jobs)} runs, timeout {a.timeout}s, jobs {a.jobs}",
              flush=True)
        counts = {k: 0 for k in ("crash", "slow", "memory", "exit", "nofile", "leftover", "echo",
                                  "badjson", "harness")}
        bad = []
        with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
            for r in ex.map(lambda j: run_one(ppsim, j[0], j[1], a.timeout, work), jobs):
                name, sub, rc, secs, rss, v, msg = r
                print(f"{name:45.45} {sub:9} exit {rc:3} {secs:6.2f}s {rss:7.1f}MiB"
                      f" {','.join(v)}" + (f"  | {msg}" if v else ""), flush=True)
                for k in v:
                    counts[k] += 1
                if v:
                    bad.append(r)
        print("# summary: " + ", ".join(f"{k} {n}" for k, n in counts.items()))
        print(f"# {len(bad)} of {len(jobs)} runs with violations")
        return 1 if bad else 0
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
