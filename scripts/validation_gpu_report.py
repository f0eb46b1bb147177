#!/usr/bin/env python3
"""Writes the GPU section of docs/VALIDATION.md from the runs of scripts/validate-gpu.sh.

Everything from the GPU_BEGIN marker to the end of the file is replaced (scripts/validate.sh
keeps that part when it rewrites the rest). Exit 0 when every target is met, else 1.
"""
import argparse
import json
import os
import re
import sys

GPU_BEGIN = "<!-- gpu-validation: written by scripts/validate-gpu.sh -->"
MAKESPAN_TARGET = 0.03
BUBBLE_TARGET = 0.02
GAP_TARGET_US = 20.0


def load(folder, name):
    try:
        with open(os.path.join(folder, name + ".json")) as f:
            text = f.read()
        j = json.loads(text) if text.strip() else None
    except (OSError, ValueError):
        j = None
    code = open(os.path.join(folder, name + ".code")).read().strip()
    err = " ".join(open(os.path.join(folder, name + ".err")).read().split())
    return j, int(code), err


def verdict_case(folder, name, label, want_code, outcome, makespan):
    """The line on a run whose outcome and verdict are checked, and whether it passed."""
    j, code, err = load(folder, name)
    good = (code == want_code and j is not None and j["outcome"] == outcome
            and j["comparison"]["verdicts_agree"])
    if j:
        c = j["comparison"]
        text = (f"outcome `{j['outcome']}`, measured {c['measured_verdict']}, predicted "
                f"{c['predicted_verdict']}")
        text += (f", makespan {c['predicted_makespan']:.3f} / {c['measured_makespan']:.3f} ms "
                 f"({100 * c['makespan_error']:+.2f}%)" if makespan
                 else f", agree: {c['verdicts_agree']}")
    else:
        text = f"exit {code}: {err[:200]}"
    return f"{label}: {text} ({'pass' if good else 'FAIL'}).", good


def note(j, prefix):
    for line in j.get("backend_notes", []):
        if line.startswith(prefix):
            return line[len(prefix):].strip()
    return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--output", required=True)
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--gpus", required=True)
    ap.add_argument("--date", required=True)
    ap.add_argument("--command", required=True)
    ap.add_argument("--settings", required=True)
    ap.add_argument("--cross", help="cross-schedule rows (scripts/cross_schedule.py)")
    ap.add_argument("--calibration", help="the 1F1B --calibrate run they were predicted from")
    ap.add_argument("folder")
    a = ap.parse_args()
    names = sorted(n[:-5] for n in os.listdir(a.folder) if n.endswith(".code"))
    ok = True
    doc = [GPU_BEGIN, "", "## GPU: the `cuda` and `nccl` backends", "",
           f"Measured on {a.gpu} ({a.gpus} GPU(s) visible), {a.date}, by `{a.command}`.",
           f"Settings: {a.settings}.", ""]
    first = None
    rows = []
    misses = {}  # target -> runs that missed it
    parts = []  # per run: host between ops, call to enqueue, host span less GPU time (us)
    ahead = []  # per run launching ahead: ops launched ahead, ops, median GPU wait on flags (us)
    order = {"gpipe": 0, "1f1b": 1, "interleaved-1f1b": 2, "zb-h1": 3, "dualpipev": 4}
    cuda = [n for n in names if n.startswith("cuda-")]
    cuda.sort(key=lambda n: (order.get(n[5:n.rfind("-m")], 9), int(n[n.rfind("-m") + 2:])))
    for n in cuda:
        j, code, err = load(a.folder, n)
        sched, m = n[5:n.rfind("-m")], n[n.rfind("-m") + 2:]
        if j is None:
            ok = False
            rows.append(f"| {sched} | {m} | exit {code}: {err[:120]} | | | | | | |")
            continue
        first = first or j
        c = j["comparison"]
        berr = abs(c["measured_bubble_fraction"] - c["predicted_bubble_fraction"])
        gap = note(j, "issue gap")
        g = re.match(r"median ([\d.]+) us, p95 ([\d.]+) us", gap)
        gap_med = float(g.group(1)) if g else float("inf")
        stash = note(j, "stash peaks equal").startswith("yes")
        pm = re.search(r"medians: ([\d.]+) us .*?, ([\d.]+) us .*? by ([\d.]+) us",
                       note(j, "issue gap parts"))
        if pm:
            parts.append([float(x) for x in pm.groups()])
        am = re.match(r"(\d+) of (\d+) ops, .*? median ([\d.]+) us", note(j, "launched ahead"))
        if am:
            ahead.append((int(am.group(1)), int(am.group(2)), float(am.group(3))))
        missed = [what for what, met in (
            ("exit code", code == 0), ("verdict", c["verdicts_agree"]),
            ("makespan", abs(c["makespan_error"]) <= MAKESPAN_TARGET),
            ("bubble", berr <= BUBBLE_TARGET), ("stash", stash),
            ("issue gap", gap_med < GAP_TARGET_US)) if not met]
        passed = not missed
        for what in missed:
            misses[what] = misses.get(what, 0) + 1
        ok = ok and passed
        rows.append(
            f"| {sched} | {m} | {c['predicted_makespan']:.3f} / {c['measured_makespan']:.3f} "
            f"({100 * c['makespan_error']:+.2f}%) | {c['predicted_bubble_fraction']:.4f} / "
            f"{c['measured_bubble_fraction']:.4f} ({berr:.4f}) | "
            f"{c['start_error']['median']:.4f} / {c['start_error']['p95']:.4f} | "
            f"{'yes' if stash else 'NO'} | "
            f"{g.group(1) + ' / ' + g.group(2) if g else 'n/a'} | "
            f"{'pass' if passed else 'FAIL: ' + ', '.join(missed)} |")
    if first:
        doc += [f"Device: {note(first, 'gpu')}", "", f"Model: {note(first, 'model')}", ""]
    if cuda:
        doc_misses = ", ".join(f"{what} in {n} of {len(cuda)} runs" for what, n in misses.items())
        rows.append("")
        rows.append(f"Targets missed: {doc_misses or 'none'}.")
    if ahead:
        rows.append("")
        rows.append(
            f"Launched ahead in {len(ahead)} of {len(cuda)} runs: {sum(a[0] for a in ahead)} of "
            f"{sum(a[1] for a in ahead)} ops were enqueued while the rank's previous op ran, "
            f"behind the flags their transfers' copies raise (no host turn-around between "
            f"dependent ops); the GPU's wait on those flags, counted as communication, median "
            f"of the runs' medians {sorted(a[2] for a in ahead)[len(ahead) // 2]:.1f} us.")
    if parts:
        mid = [sorted(p[i] for p in parts)[len(parts) // 2] for i in range(3)]
        rows.append("")
        rows.append(
            f"Where the issue gap goes (median over the runs of each run's median): "
            f"{mid[0]:.1f} us on the host between an op's return and the next op's call (the "
            f"executor's bookkeeping and posts, waits excluded), {mid[1]:.1f} us from that call to "
            f"the op's first GPU work enqueued, and the GPU's start and the completion poll (an "
            f"op's host span exceeds its GPU time by {mid[2]:.1f} us).")
    doc += ["P=4 ranks on one GPU (`--backend cuda --compute cuda --calibrate`). Targets: makespan "
            f"within {100 * MAKESPAN_TARGET:.0f}%, bubble fraction within {BUBBLE_TARGET}, device "
            f"stash peaks equal the prediction, issue gap median < {GAP_TARGET_US:.0f} us.", "",
            "| schedule | M | makespan ms predicted / measured (error) | bubble predicted / "
            "measured (diff) | op start error ms median / p95 | stash peaks equal | issue gap "
            "us median / p95 | |", "|---|---|---|---|---|---|---|---|"] + rows + [""]
    for name, label, want_code, outcome, makespan in (
            ("hang-1f1b-blocking", "All-blocking 1F1B (P=4, M=8) on the GPU", 1, "hang", False),
            ("eager-1f1b-blocking", "The same program with eager sends (`--set comm.eager_limit=` "
             "the message size)", 0, "finished", True)):
        line, good = verdict_case(a.folder, name, label, want_code, outcome, makespan)
        ok = ok and good
        doc += [line, ""]
    for n in names:
        if n.startswith("nccl-1f1b"):
            j, code, err = load(a.folder, n)
            good = j is not None and code == 0
            ok = ok and good
            if j:
                c = j["comparison"]
                doc.append(f"`nccl` transport, {n[5:]}: exit {code}, makespan "
                           f"{c['predicted_makespan']:.3f} / {c['measured_makespan']:.3f} ms "
                           f"({100 * c['makespan_error']:+.2f}%), {note(j, 'nccl transport')}.")
            else:
                doc.append(f"`nccl` transport, {n[5:]}: exit {code}: {err[:200]}")
    j, code, err = load(a.folder, "nccl-too-few-gpus")
    refused = code == 4 and "use --backend cuda" in err
    ok = ok and refused
    doc += ["", f"`nccl` with more ranks than GPUs: exit {code}, `{err[:300]}`"
            f" ({'pass' if refused else 'FAIL'}).", ""]
    try:
        ctest = open(os.path.join(a.folder, "ctest.txt")).read()
        summary = [l for l in ctest.splitlines() if re.search(r"gpu\.\w+ .*(Passed|Failed|Skipped|Not Run)", l)]
        doc += ["ctest gpu.*:", "", "```"] + [l.strip() for l in summary] + ["```", ""]
        ok = ok and "Failed" not in "\n".join(summary)
    except OSError:
        pass
    rows = [l for l in open(a.cross)] if a.cross and os.path.exists(a.cross) else []
    if any(l.strip() for l in rows):
        from validation_report import cross_section
        cross, cross_ok = cross_section(a.cross, a.calibration,
                                        "P = 4, two MLP blocks per rank and microbatch")
        doc += ["#" + cross[0]] + cross[1:] + [""]  # a subsection of the GPU section
        ok = ok and cross_ok
    elif a.cross:
        doc += ["Cross-schedule: no rows (the 1F1B calibration run failed; see its log).", ""]
        ok = False
    doc.append(f"**GPU targets: {'met' if ok else 'NOT met'}**")
    try:
        old = open(a.output).read()
    except FileNotFoundError:
        old = ""
    at = old.find(GPU_BEGIN)
    head = old[:at] if at >= 0 else old
    with open(a.output, "w") as f:
        f.write(head.rstrip("\n") + "\n\n" + "\n".join(doc) + "\n")
    print(f"wrote {a.output}: {'all GPU targets met' if ok else 'SOME GPU TARGETS NOT MET'}",
          file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
