#!/usr/bin/env python3
"""Before/after for differences of a few percent: N single runs of `ppsim run CONFIG --json` (or
`--trace FILE.EXT`) per build, alternating (before, after, after, before, ...) so that the
machine's drift lands on both alike, printed as a markdown table of wall-time percentiles and the
median CPU time (user + system, from the child's rusage), with each build's page-fault exceptions
(perf's page-faults event: a fault costs ~12 us in this VM, docs/BENCHMARKS.md) where perf is
installed.

  bench/ab_runs.py BEFORE_BUILD AFTER_BUILD --runs N [--trace EXT [--dir DIR]] CONFIG [--set KEY=VALUE]...
"""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_once(argv):
    """Wall and CPU seconds of one run."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, cwd=SRC)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"ab_runs.py: {' '.join(argv)} failed")
    return wall, usage.ru_utime + usage.ru_stime


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
    ap.add_argument("--trace", metavar="EXT",
                    help="write a trace (json, json.gz, pftrace) instead of --json; the file is "
                         "removed after each run")
    ap.add_argument("--dir", help="where the trace file goes (default: the temporary directory; "
                                   "/dev/shm leaves the disk out)")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ab_runs.", dir=a.dir)
    try:
        compare(a, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def compare(a, tmp):
    out = ["--trace", os.path.join(tmp, "ab." + a.trace)] if a.trace else ["--json"]
    args = ["run", a.config] + [x for kv in a.set for x in ("--set", kv)] + out
    shown = args[:-1] + [f"FILE.{a.trace}"] if a.trace else args
    builds = {"before": a.before, "after": a.after}
    argv = {k: [os.path.join(b, "cli", "ppsim")] + args for k, b in builds.items()}
    walls = {k: [] for k in builds}
    cpus = {k: [] for k in builds}
    for i in range(a.runs):
        for k in (("before", "after") if i % 2 == 0 else ("after", "before")):
            w, c = run_once(argv[k])
            walls[k].append(w)
            cpus[k].append(c)
            if a.trace:
                os.remove(out[1])
    where = f", the file in {a.dir}" if a.trace and a.dir else ""
    print(f"`ppsim {' '.join(shown)}`: {a.runs} runs per build, alternating{where}; "
          "wall ms, then CPU ms")
    print()
    print("| build | best | 25% | median | 75% | CPU, median | page-fault exceptions |")
    print("|---|---|---|---|---|---|---|")
    for k in builds:
        v = sorted(walls[k])
        q = [v[0], v[len(v) // 4], statistics.median(v), v[3 * len(v) // 4],
             statistics.median(cpus[k])]
        f = faults(argv[k])
        if a.trace and os.path.exists(out[1]):
            os.remove(out[1])
        cells = " | ".join(f"{x * 1e3:.1f}" for x in q)
        print(f"| {k} | {cells} | {f if f is not None else 'no perf'} |")


if __name__ == "__main__":
    main()
