#!/usr/bin/env python3
"""`ppsim search` against the zero-bubble paper's own scheduler (docs/SEARCH.md).

For each profiled setting of Qi et al. (ICLR 2024; tests/data/zb_settings.json: p = 8 to 32,
m = 24 to 256, measured F/B/W/comm, memory per microbatch 34h + 5as with W keeping 32h) and memory
limits of 1, 1.5 and 2 x p x (one microbatch's activations) per stage, the published heuristic
(tests/reference/zb_greedy_reference.py, a re-implementation of sail-sg's auto_schedule) builds its
schedule; ppsim simulates that schedule under the same model (async p2p, receives posted 1 and 2
ops ahead, the faster counted) and searches its own. The search's best must fit the limit, finish
and be no slower on every setting, and faster on most.

usage: search_vs_zero_bubble.py PPSIM [--quick]   (--quick: the settings with m <= 32)
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "reference"))
import zb_greedy_reference as ref  # noqa: E402


def config(s):
    h, a = s["h"], s["a"]
    return {
        "name": f"zb-p{s['p']}-m{s['n']}-h{h}",
        "time_unit": "us",
        "schedule": {"kind": "zb-h1", "ranks": s["p"], "microbatches": s["n"]},
        "costs": {"forward": s["f"], "backward_input": s["b"], "backward_weight": s["w"]},
        "comm": {"latency": s["c"]},
        "memory": {"activation_bytes": 34 * h + 5 * a * 1024, "weight_stash_bytes": 32 * h},
    }


def run_json(ppsim, args):
    out = subprocess.run([ppsim] + args, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"FAIL: ppsim {' '.join(args)} exited {out.returncode}: {out.stderr}")
    return json.loads(out.stdout)


def main():
    ppsim = sys.argv[1]
    quick = "--quick" in sys.argv
    settings = json.load(open(os.path.join(HERE, "data", "zb_settings.json")))["settings"]
    failures, better, rows = 0, 0, 0
    # "1 chunk": the best of ppsim's own constructions on the heuristic's placement (one stage per
    # rank), for the like-for-like comparison.
    print(f"{'p':>3} {'m':>4} {'k':>4} {'heuristic':>12} {'ppsim':>12} {'gain':>7} "
          f"{'1 chunk':>12} {'gain':>7}  ppsim's best")
    with tempfile.TemporaryDirectory() as tmp:
        for s in settings:
            if quick and s["n"] > 32:
                continue
            cfg = config(s)
            mem_f = cfg["memory"]["activation_bytes"]
            mem_w = -32 * s["h"]
            for k in (1, 1.5, 2):
                limit = int(k * s["p"] * mem_f)
                found = ref.heuristic(s["p"], s["n"], s["f"], s["b"], s["w"], s["c"], mem_f,
                                      -mem_w - mem_f, mem_w, limit)
                theirs = None
                if found:
                    custom = dict(cfg, schedule={"kind": "custom",
                                                 "ops": ref.ops_strings(found["orders"])})
                    for ahead in (1, 2):
                        custom["comm"] = dict(cfg["comm"], style="async", prefetch=ahead)
                        path = os.path.join(tmp, "theirs.json")
                        json.dump(custom, open(path, "w"))
                        run = run_json(ppsim, ["run", path, "--json"])
                        if run["ok"]:
                            m = run["makespan"]
                            theirs = m if theirs is None else min(theirs, m)
                path = os.path.join(tmp, "search.json")
                json.dump(cfg, open(path, "w"))
                res = run_json(ppsim, ["search", path, "--memory-limit", str(limit), "--json"])
                best = res["best"]
                rows += 1
                ok = best is not None and max(best["peak_memory_bytes"]) <= limit
                ok = ok and (theirs is None or best["makespan"] <= theirs * (1 + 1e-12))
                gain = "" if theirs is None or best is None else \
                    f"{(1 - best['makespan'] / theirs) * 100:6.2f}%"
                if ok and theirs is not None and best["makespan"] < theirs * (1 - 1e-9):
                    better += 1
                failures += not ok
                own = [c["makespan"] for c in res["candidates"]
                       if c["within_limit"] and c.get("placement") == "1 chunk"]
                own = min(own) if own else float("nan")
                own_gain = "" if theirs is None else f"{(1 - own / theirs) * 100:6.2f}%"
                print(f"{s['p']:>3} {s['n']:>4} {k:>4} "
                      f"{'fails' if theirs is None else f'{theirs:12.0f}':>12} "
                      f"{best['makespan'] if best else float('nan'):12.0f} {gain:>7} "
                      f"{own:12.0f} {own_gain:>7}  "
                      f"{best['schedule'] if best else '-'}{'' if ok else '  <- FAIL'}")
    print(f"{rows} cases: {failures} fail, ppsim strictly faster on {better}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
