#!/usr/bin/env python3
"""Before/after: bench/e2e.py on two builds, taken in turns (the machine's speed drifts, so one
build's runs are never all at one end of the hour), printed as one markdown table of best wall and
best CPU seconds per case and round.

  bench/ab_e2e.py BEFORE_BUILD AFTER_BUILD [--rounds N] [--reps N] [--filter TEXT]
                  [--trace-formats json,json.gz,pftrace] [--skip TEXT]... [--pause S]
(the trace cases run --reps times too; without --trace-formats they are left out)
"""
import argparse
import json
import os
import subprocess
import sys

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(build, args):
    skips = [f"--skip={k}" for k in args.skip]
    out = subprocess.run([sys.executable, os.path.join(SRC, "bench", "e2e.py"), "--build", build,
                          "--reps", str(args.reps), "--trace-reps", str(args.reps),
                          f"--filter={args.filter}", "--trace-formats", args.trace_formats,
                          "--pause", str(args.pause), "--json"] + skips,
                         capture_output=True, text=True, check=True)
    return {c["case"]: c for c in json.loads(out.stdout)["cases"] if "best_wall" in c}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--filter", default="--json", help="cases whose name contains TEXT")
    ap.add_argument("--trace-formats", default="none", help="as bench/e2e.py's")
    ap.add_argument("--skip", action="append", default=[], help="as bench/e2e.py's")
    ap.add_argument("--pause", type=float, default=0.0, help="as bench/e2e.py's")
    args = ap.parse_args()
    results = {"before": [], "after": []}
    for _ in range(args.rounds):
        for side in ("before", "after"):
            results[side].append(run(getattr(args, side), args))
    cases = list(results["after"][0].keys())
    pause = f", each after a {args.pause:g} s pause (cold memory)" if args.pause > 0 else ""
    print(f"best of {args.reps} runs each{pause}, {args.rounds} rounds in turns; "
          "wall s / CPU s, then peak RSS")
    print()
    print("| case | before | after | target |")
    print("|---|---|---|---|")
    for case in cases:
        def cell(side):
            rounds = [r[case] for r in results[side]]
            times = ", ".join(f"{r['best_wall']:.3f} / {r['best_cpu']:.3f}" for r in rounds)
            peak = max(r["peak_rss_bytes"] for r in rounds) / (1 << 20)
            return f"{times} s, {peak:.0f} MiB"
        t = results["after"][0][case]
        target = f"<= {t['target_seconds']:g} s" + (
            f", <= {t['target_mib']} MiB" if t["target_mib"] is not None else "")
        print(f"| {case} | {cell('before')} | {cell('after')} | {target} |")


if __name__ == "__main__":
    main()
