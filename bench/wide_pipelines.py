#!/usr/bin/env python3
"""Time per rank of `ppsim check` and `ppsim run --json` on wide pipelines.

The config is 1F1B with one microbatch (2 compute ops per rank) at each P; every pass of ppsim
should be linear in ops + ranks, so the time per rank should not grow with P. Prints, for each
command and P, the best wall time of --reps runs, the peak RSS and microseconds per rank, then the
ratio of the largest P's time per rank to the smallest's. Exits 1 when a ratio is above --bound
(default 2.0: generous, the machine is shared; linear code measures ~1.1-1.3 here, a scan of all
ranks per rank measured 3.1 for `check`).

Usage: bench/wide_pipelines.py [--build DIR] [--ranks 50000,...] [--reps N] [--bound X] [--json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def measure(cmd):
    """Wall seconds and peak RSS (KiB) of one run of cmd; exits on a non-zero status."""
    start = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)  # this child's own rusage, not every child's
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"wide_pipelines: {' '.join(cmd)} exited {child.returncode}: "
                         f"{err.strip()}")
    return wall, usage.ru_maxrss


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--build", default=os.path.join(src, "build"))
    ap.add_argument("--ranks", default="50000,100000,200000,300000")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--bound", type=float, default=2.0)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args()
    if a.reps < 1:
        ap.error("--reps must be at least 1")
    ranks = [int(p) for p in a.ranks.split(",")]
    if len(ranks) < 2 or min(ranks) < 1:
        ap.error("--ranks needs two or more positive counts")
    ppsim = os.path.join(a.build, "cli", "ppsim")
    if not os.access(ppsim, os.X_OK):
        ap.error(f"{ppsim} not found: build ppsim first")

    rows, ratios = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in (("check", ["check"]), ("run --json", ["run", "--json"])):
            per_rank = {}
            for p in ranks:
                cfg = os.path.join(tmp, f"p{p}.json")
                with open(cfg, "w") as f:
                    json.dump({"schedule": {"kind": "1f1b", "ranks": p, "microbatches": 1}}, f)
                runs = [measure([ppsim, *args, cfg]) for _ in range(a.reps)]
                wall = min(r[0] for r in runs)
                rss = max(r[1] for r in runs)
                per_rank[p] = wall / p
                rows.append({"command": name, "ranks": p, "seconds": wall, "peak_rss_kib": rss,
                             "us_per_rank": 1e6 * wall / p})
            ratios[name] = per_rank[max(ranks)] / per_rank[min(ranks)]

    failed = [n for n, r in ratios.items() if r > a.bound]
    if a.json:
        print(json.dumps({"rows": rows, "ratios": ratios, "bound": a.bound, "ok": not failed}))
    else:
        print(f"{'command':<12}{'ranks':>9}{'best s':>9}{'peak MiB':>10}{'us/rank':>9}")
        for r in rows:
            print(f"{r['command']:<12}{r['ranks']:>9}{r['seconds']:>9.3f}"
                  f"{r['peak_rss_kib'] / 1024:>10.0f}{r['us_per_rank']:>9.2f}")
        for n, r in ratios.items():
            print(f"{n}: time per rank at P={max(ranks)} / P={min(ranks)} = {r:.2f} "
                  f"(bound {a.bound})")
    if failed:
        print(f"wide_pipelines: superlinear: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
