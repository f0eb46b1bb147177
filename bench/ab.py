#!/usr/bin/env python3
"""Before/after: one case run on two builds, in turns, for differences of a few percent.

  bench/ab.py BEFORE_BUILD AFTER_BUILD [--runs N] [--env-before K=V] [--env-after K=V] -- CASE...

CASE is a program inside a build directory and its arguments, e.g.
`cli/ppsim run configs/1f1b.json --set schedule.ranks=64 --json` or
`bench/ppsim_bench_sim --reps 1`. Each build runs it N times (default 20) in the order before,
after, after, before, ... so that the machine's drift lands on both alike; its output is thrown
away and its exit status must be 0. Prints one markdown table of each build's wall-time
percentiles (min, p25, median, p75) and median CPU time (user + system, the child's rusage), and
the after/before ratio of the medians. BEFORE_BUILD and AFTER_BUILD may be the same directory with
different --env-* (e.g. PPSIM_JOBS=1 against all cores).
"""
import argparse
import os
import subprocess
import sys
import time


def one_run(cmd, env):
    start = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    err = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"ab.py: {' '.join(cmd)} exited {code}: {err.decode(errors='replace').strip()}")
    return wall, usage.ru_utime + usage.ru_stime


def percentile(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def environment(assignments):
    env = dict(os.environ)
    for a in assignments:
        key, sep, value = a.partition("=")
        if not sep or not key:
            sys.exit(f"ab.py: expected KEY=VALUE, got {a!r}")
        env[key] = value
    return env


def main():
    ap = argparse.ArgumentParser(usage=__doc__.splitlines()[2].strip())
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--env-before", action="append", default=[])
    ap.add_argument("--env-after", action="append", default=[])
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a = ap.parse_args(argv[:cut])
    case = argv[cut + 1:]
    if not case:
        ap.error("give the case after --: a program inside the build and its arguments")
    if a.runs < 1:
        ap.error("--runs must be at least 1")
    builds = {"before": (a.before, environment(a.env_before)),
              "after": (a.after, environment(a.env_after))}
    for name, (build, _) in builds.items():
        program = os.path.join(build, case[0])
        if not os.access(program, os.X_OK):
            ap.error(f"{name}: {program} is not an executable")
    results = {"before": [], "after": []}
    order = ["before", "after", "after", "before"]
    for i in range(2 * a.runs):
        name = order[i % 4]
        build, env = builds[name]
        results[name].append(one_run([os.path.join(build, case[0]), *case[1:]], env))

    print(f"`{' '.join(case)}`, {a.runs} runs per build in turns\n")
    print("| build | wall min s | p25 | median | p75 | CPU median s |")
    print("|---|---|---|---|---|---|")
    medians = {}
    for name, runs in results.items():
        walls = [w for w, _ in runs]
        cpus = [c for _, c in runs]
        medians[name] = percentile(walls, 0.5)
        print(f"| {name}: {builds[name][0]} | {min(walls):.4f} | {percentile(walls, 0.25):.4f} | "
              f"{medians[name]:.4f} | {percentile(walls, 0.75):.4f} | "
              f"{percentile(cpus, 0.5):.4f} |")
    print(f"\nafter / before, median wall: {medians['after'] / medians['before']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
