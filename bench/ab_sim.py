#!/usr/bin/env python3
"""Before/after of the simulator alone: ppsim_bench_sim's cases on two builds, taken in turns (the
machine's speed drifts), printed as one markdown table of each round's best seconds and M ops/s.

  bench/ab_sim.py BEFORE_BUILD AFTER_BUILD [--rounds N] [--reps N] [--filter TEXT]
"""
import argparse
import json
import os
import subprocess


def run(build, args):
    exe = os.path.join(build, "bench", "ppsim_bench_sim")
    out = subprocess.run([exe, "--reps", str(args.reps), "--filter", args.filter, "--json"],
                         capture_output=True, text=True, check=True)
    return {c["case"]: c for c in json.loads(out.stdout)["cases"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--filter", default="/metrics", help="cases whose name contains TEXT")
    args = ap.parse_args()
    results = {"before": [], "after": []}
    for _ in range(args.rounds):
        for side in ("before", "after"):
            results[side].append(run(getattr(args, side), args))
    print(f"sim::simulate alone, best of {args.reps} runs each, {args.rounds} rounds in turns; "
          "wall s (M ops/s)")
    print()
    print("| case | ops | before | after |")
    print("|---|---|---|---|")
    for case, c in results["after"][0].items():
        def cell(side):
            return ", ".join(f"{r[case]['best_seconds']:.3f} ({r[case]['mops_per_second']:.1f})"
                             for r in results[side])
        print(f"| {case} | {c['ops']:,} | {cell('before')} | {cell('after')} |")


if __name__ == "__main__":
    main()
