#!/usr/bin/env python3
"""Before/after for differences of a few percent: N single runs of `ppsim run CONFIG --json` per
build, alternating (before, after, after, before, ...) so that the machine's drift lands on both
alike, printed as a markdown table of wall-time percentiles, with each build's page-fault
exceptions (perf's page-faults event: a fault costs ~12 us in this VM, docs/BENCHMARKS.md) where
perf is installed.

  bench/ab_runs.py BEFORE_BUILD AFTER_BUILD --runs N CONFIG [--set KEY=VALUE]...
"""
import argparse
import os
import shutil
import statistics
import subprocess
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def wall(argv):
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, cwd=SRC)
    return time.perf_counter() - start


def faults(argv):
    """Page-fault exceptions of one run, or None without perf."""
    if not shutil.which("perf"):
        return None
    out = subprocess.run(["perf", "stat", "-x,", "-e", "page-faults", "--"] + argv,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=SRC)
    for line in out.stderr.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2].startswith("page-faults") and fields[0].isdigit():
            return int(fields[0])
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("config")
    ap.add_argument("--set", action="append", default=[])
    a = ap.parse_args()
    args = ["run", a.config] + [x for kv in a.set for x in ("--set", kv)] + ["--json"]
    builds = {"before": a.before, "after": a.after}
    argv = {k: [os.path.join(b, "cli", "ppsim")] + args for k, b in builds.items()}
    times = {k: [] for k in builds}
    for i in range(a.runs):
        for k in (("before", "after") if i % 2 == 0 else ("after", "before")):
            times[k].append(wall(argv[k]))
    print(f"`ppsim {' '.join(args)}`: {a.runs} runs per build, alternating; wall ms")
    print()
    print("| build | best | 25% | median | 75% | page-fault exceptions |")
    print("|---|---|---|---|---|---|")
    for k in builds:
        v = sorted(times[k])
        q = [v[0], v[len(v) // 4], statistics.median(v), v[3 * len(v) // 4]]
        f = faults(argv[k])
        cells = " | ".join(f"{x * 1e3:.1f}" for x in q)
        print(f"| {k} | {cells} | {f if f is not None else 'no perf'} |")


if __name__ == "__main__":
    main()
