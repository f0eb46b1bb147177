#!/usr/bin/env python3
"""How long `ppsim run --json` takes to evaluate one whole layout beyond the process's own start
(docs/MODEL.md, "The whole step"): the best CPU and wall time of N runs of a config with a
`model` section, minus the best of N runs of `ppsim --version` (loading, static initialisation,
exit). Target: under 5 ms, so that a planner evaluates thousands of layouts a second in-process.

  bench/layout_eval.py [--build DIR] [--reps N] [--target S] [CONFIG [--set KEY=VALUE ...]]

Default CONFIG: configs/models/gpt3-175b.json (GPT-3 175B, t = 8, p = 16, d = 8, M = 64,
interleaved V = 2).
"""
import argparse
import os
import subprocess
import sys
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def best(argv, reps):
    walls, cpus = [], []
    for _ in range(reps):
        start = time.perf_counter()
        child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=SRC)
        err = child.stderr.read()
        _, status, usage = os.wait4(child.pid, 0)
        walls.append(time.perf_counter() - start)
        cpus.append(usage.ru_utime + usage.ru_stime)
        if os.waitstatus_to_exitcode(status) not in (0, 1):
            sys.exit(f"layout_eval: {' '.join(argv)}: {err.decode(errors='replace').strip()}")
    return min(walls), min(cpus)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--target", type=float, default=0.005)
    ap.add_argument("config", nargs="*", default=["configs/models/gpt3-175b.json"])
    a = ap.parse_args()
    ppsim = os.path.join(a.build, "cli", "ppsim")
    base_wall, base_cpu = best([ppsim, "--version"], a.reps)
    wall, cpu = best([ppsim, "run", *a.config, "--json"], a.reps)
    print(f"ppsim run {' '.join(a.config)} --json, best of {a.reps}: wall {1e3 * wall:.2f} ms, "
          f"CPU {1e3 * cpu:.2f} ms; ppsim --version: wall {1e3 * base_wall:.2f} ms, CPU "
          f"{1e3 * base_cpu:.2f} ms")
    extra_wall, extra_cpu = wall - base_wall, cpu - base_cpu
    met = "met" if min(extra_wall, extra_cpu) <= a.target else "NOT met"
    print(f"beyond the process's start: wall {1e3 * extra_wall:.2f} ms, CPU {1e3 * extra_cpu:.2f} "
          f"ms (target {1e3 * a.target:.0f} ms: {met})")


if __name__ == "__main__":
    main()
