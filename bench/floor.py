#!/usr/bin/env python3
"""How fast `ppsim run CONFIG --json` could be on this machine: a floor built from measured parts.

A run is a process that starts, prepares the program (generation and lowering, on all cores),
validates it (all cores) and simulates it (one core). This script measures each part and puts the
simplest event loop in the engine's place, to see whether a time target is within reach:

  fixed        a whole run of configs/1f1b.json (P=4, 218 ops), best wall time of N: starting
               the process, loading libraries, reading a config, the report, exiting
  prepare      ppsim_bench_phases' best wall time of the case (2 cores where there are 2)
  validate     the same
  loop         ppsim_bench_event_loop, one event per op of the case (its op count, spread over
               its ranks), best CPU time: a heap of (time, rank) and nothing else, on one core
  engine       ppsim_bench_phases' simulate phase, best wall time (the real engine)
  end to end   the case's `ppsim run ... --json`, best wall time of N

It prints the floor (fixed + prepare + validate + loop), the same with the loop split perfectly
over two cores, and the rate the engine would need to meet the target with today's other parts.

  bench/floor.py [--build DIR] [--reps N] [--target SECONDS] [--json] CONFIG [--set KEY=VALUE]...
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def best_wall(argv, reps):
    best = math.inf
    for _ in range(reps):
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=SRC, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            sys.exit(f"floor.py: {' '.join(argv)} exited {done.returncode}: "
                     f"{done.stderr.decode(errors='replace').strip()}")
        best = min(best, wall)
    return best


def json_of(argv):
    done = subprocess.run(argv, cwd=SRC, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"floor.py: {' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(SRC, "build-rel"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--target", type=float, default=None, help="the case's time target, seconds")
    ap.add_argument("--json", action="store_true", help="the parts as one JSON object")
    ap.add_argument("config")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    a = ap.parse_args()
    if a.reps < 1:
        sys.exit("floor.py: --reps must be >= 1")
    ppsim = os.path.join(a.build, "cli", "ppsim")
    sets = [x for kv in a.set for x in ("--set", kv)]
    case = [a.config] + sets

    phases = json_of([os.path.join(a.build, "bench", "ppsim_bench_phases")] + case +
                     ["--reps", str(a.reps), "--json"])
    ops = phases["ops"]
    ranks = phases["ranks"]
    per_rank = -(-ops // ranks)
    loop = json_of([os.path.join(a.build, "bench", "ppsim_bench_event_loop"), "--ranks",
                    str(ranks), "--ops", str(per_rank), "--reps", str(a.reps), "--json"])
    fixed = best_wall([ppsim, "run", "configs/1f1b.json", "--json"], a.reps)
    e2e = best_wall([ppsim, "run"] + case + ["--json"], a.reps)

    parts = {
        "ops": ops,
        "ranks": ranks,
        "events": loop["events"],
        "fixed_s": fixed,
        "prepare_s": phases["prepare"]["wall_s"],
        "validate_s": phases["validate"]["wall_s"],
        "loop_s": loop["best_cpu"],
        "engine_s": phases["simulate"]["wall_s"],
        "end_to_end_s": e2e,
    }
    before = parts["fixed_s"] + parts["prepare_s"] + parts["validate_s"]
    parts["before_engine_s"] = before
    parts["floor_s"] = before + parts["loop_s"]
    parts["floor_two_cores_s"] = before + parts["loop_s"] / 2
    parts["target_s"] = a.target
    if a.json:
        print(json.dumps(parts))
        return

    print(f"floor of `ppsim run {' '.join(case)} --json`: {ops:,} ops on {ranks} ranks, "
          f"best of {a.reps} per part; {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cpus, "
          f"load {os.getloadavg()[0]:.2f}")
    print()
    rows = [
        ("fixed: a whole run of configs/1f1b.json (218 ops)", "fixed_s"),
        ("prepare: generate + lower, all cores", "prepare_s"),
        ("validate, all cores", "validate_s"),
        ("before the engine starts (sum of the three)", "before_engine_s"),
        (f"minimal event loop, {loop['events']:,} events, one core", "loop_s"),
        ("FLOOR: before the engine + minimal loop", "floor_s"),
        ("floor with the loop split perfectly over 2 cores", "floor_two_cores_s"),
        ("ppsim's engine (simulate phase)", "engine_s"),
        ("ppsim end to end", "end_to_end_s"),
    ]
    for name, key in rows:
        print(f"{name:<52} {parts[key]:9.4f} s")
    if a.target is None:
        return
    print(f"{'target':<52} {a.target:9.4f} s")
    print()
    budget = a.target - before
    if budget <= 0:
        print(f"The parts before the engine take {before:.4f} s, the whole target: "
              "no engine is fast enough.")
    else:
        need = ops / budget / 1e6
        rate = loop["events"] / parts["loop_s"] / 1e6
        print(f"With today's other parts the engine has {budget:.4f} s: {need:.1f} M ops/s, "
              f"{need / rate:.2f} x the minimal loop's {rate:.1f} M events/s on one core "
              f"(ppsim's engine: {ops / parts['engine_s'] / 1e6:.1f} M ops/s).")
    verdict = "below" if parts["floor_s"] <= a.target else "ABOVE"
    print(f"The floor is {verdict} the target ({parts['floor_s']:.4f} s against "
          f"{a.target:.4f} s); with a perfect 2-core loop {parts['floor_two_cores_s']:.4f} s.")


if __name__ == "__main__":
    main()
