#!/usr/bin/env python3
"""Runs the `$ ppsim ...` commands of README.md and docs/*.md and compares their output with the
lines printed under them, so that the docs cannot drift from the program.

    doc_examples.py PPSIM_BINARY [--list] [--only SUBSTRING]

A command is a line `$ ppsim ...` in a fenced block; its expected output is the lines after it,
up to the next `$ ` line or the end of the block. A line `...` there stands for any number of lines
(an output cut for the docs), and `...` inside a line any text there. Commands run from the repository root with `ppsim` on PATH, stdout
and stderr together, under bash. Not run: `ppsim real` (its figures are measured, they change
from run to run) and commands whose block is preceded by `<!-- not run: REASON -->`. Exits 1 on
any difference.
"""
import argparse, os, pathlib, re, subprocess, sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def examples():
    files = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
    for f in files:
        lines = f.read_text().splitlines()
        in_block, skip, pending_skip = False, False, False
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.strip().startswith("<!-- not run:"):
                pending_skip = True
            elif line.startswith("```"):
                if not in_block:
                    in_block, skip, pending_skip = True, pending_skip, False
                else:
                    in_block = False
            elif in_block and line.startswith("$ ppsim ") and not skip:
                cmd, out, j = line[2:], [], i + 1
                while j < len(lines) and not lines[j].startswith("```") and \
                        not lines[j].startswith("$ "):
                    out.append(lines[j])
                    j += 1
                yield f"{f.relative_to(ROOT)}:{i + 1}", cmd, out
                i = j
                continue
            i += 1


def line_matches(got, want):
    """A `...` inside a line stands for any text there (a value cut for the docs)."""
    if "..." not in want:
        return got == want
    parts = [re.escape(p) for p in want.split("...")]
    return re.fullmatch(".*".join(parts), got) is not None


def matches(got, want):
    """`want` with `...` lines as wildcards for any run of lines."""
    got = [g.rstrip() for g in got]
    want = [w.rstrip() for w in want]
    memo = {}

    def m(a, b):
        if (a, b) in memo:
            return memo[(a, b)]
        if b == len(want):
            r = a == len(got)
        elif want[b] == "...":
            r = any(m(k, b + 1) for k in range(a, len(got) + 1))
        else:
            r = a < len(got) and line_matches(got[a], want[b]) and m(a + 1, b + 1)
        memo[(a, b)] = r
        return r

    return m(0, 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ppsim")
    ap.add_argument("--only", default="")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    bindir = str(pathlib.Path(a.ppsim).resolve().parent)
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""), COLUMNS="100")
    failed = ran = 0
    for where, cmd, want in examples():
        if a.only not in where + " " + cmd:
            continue
        if re.match(r"ppsim real\b", cmd):
            continue
        if a.list:
            print(where, cmd)
            continue
        ran += 1
        p = subprocess.run(["bash", "-c", cmd], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=300)
        got = p.stdout.decode("utf-8", "replace").splitlines()
        # A block's trailing blank lines are layout, not output.
        while want and not want[-1].strip():
            want.pop()
        while got and not got[-1].strip():
            got.pop()
        if matches(got, want):
            print(f"ok    {where}: {cmd[:90]}")
        else:
            failed += 1
            print(f"FAIL  {where}: {cmd}")
            import difflib
            for d in list(difflib.unified_diff(want, got, "docs", "ppsim", lineterm="", n=1))[:30]:
                print("      " + d)
    print(f"{ran - failed} of {ran} doc examples match")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
