#!/usr/bin/env python3
"""Lowering and validation on all cores against one: ppsim_bench_phases with PPSIM_JOBS unset and
PPSIM_JOBS=1, taken in turns for N rounds (the machine's speed drifts), printed as a markdown
table of the best wall and CPU seconds of prepare + validate and of simulate. With --against
BEFORE_BUILD it compares two builds instead, both on all cores, phase by phase.

  bench/ab_phases.py BUILD_DIR CONFIG [--set KEY=VALUE]... [--rounds N] [--reps N]
                     [--against BEFORE_BUILD]
"""
import argparse
import json
import os
import subprocess


def run(binary, args, reps, jobs):
    env = dict(os.environ)
    env.pop("PPSIM_JOBS", None)
    if jobs:
        env["PPSIM_JOBS"] = str(jobs)
    out = subprocess.run([binary] + args + ["--reps", str(reps), "--json"], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("config")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--against", help="a build to compare BUILD_DIR with, instead of 1 thread")
    a = ap.parse_args()
    binary = os.path.join(a.build, "bench", "ppsim_bench_phases")
    args = [a.config] + [x for kv in a.set for x in ("--set", kv)]
    if a.against:
        builds = (("before", os.path.join(a.against, "bench", "ppsim_bench_phases")),
                  ("after", binary))
        print(f"ppsim_bench_phases {' '.join(args)}: best of {a.reps} per cell, "
              f"{a.rounds} rounds in turns, {os.cpu_count()} cpus; wall s / CPU s")
        print()
        print("| round | build | prepare | validate | simulate |")
        print("|---|---|---|---|---|")
        for k in range(a.rounds):
            for label, b in builds:
                p = run(b, args, a.reps, None)
                cells = " | ".join(f"{p[ph]['wall_s']:.4f} / {p[ph]['cpu_s']:.4f}"
                                   for ph in ("prepare", "validate", "simulate"))
                print(f"| {k + 1} | {label} | {cells} |")
        return
    print(f"ppsim_bench_phases {' '.join(args)}: best of {a.reps} per cell, "
          f"{a.rounds} rounds in turns, {os.cpu_count()} cpus")
    print()
    print("| round | threads | prepare + validate, wall s | CPU s | simulate, wall s |")
    print("|---|---|---|---|---|")
    for k in range(a.rounds):
        for jobs, label in ((1, "1 (PPSIM_JOBS=1)"), (None, f"{os.cpu_count()} (default)")):
            p = run(binary, args, a.reps, jobs)
            wall = p["prepare"]["wall_s"] + p["validate"]["wall_s"]
            cpu = p["prepare"]["cpu_s"] + p["validate"]["cpu_s"]
            print(f"| {k + 1} | {label} | {wall:.3f} | {cpu:.3f} | {p['simulate']['wall_s']:.3f} |")


if __name__ == "__main__":
    main()
