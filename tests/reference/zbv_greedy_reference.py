#!/usr/bin/env python3
"""Independent reference for the ZB-V (V-shape) greedy schedule.

Re-implements, decision for decision, PipelineGraph.get_v_schedule /
try_v_schedule from sail-sg/zero-bubble-pipeline-parallelism
(megatron/core/pipeline_parallel/v_schedule.py).  Standard library only.

Layout: every rank holds two model chunks.  Model chunk 0 runs forward from
rank 0 to rank p-1, model chunk 1 back from rank p-1 to rank 0 (the loss is
on rank 0).  Costs and memory passed in are PER CHUNK.

Internally ops are indexed by "lane" = 2*kind + leg, kind F=0, B=1, W=2,
where leg is the order in which the microbatch visits the chunk:
  F leg 0 = model chunk 0 forward      (dependency: rank-1, same leg)
  F leg 1 = model chunk 1 forward      (dependency: rank+1, same leg)
  B leg 0 = model chunk 1 input-grad   (dependency: rank-1, same leg)
  B leg 1 = model chunk 0 input-grad   (dependency: rank+1, same leg)
  W leg l = weight-grad for B leg l
so for B and W the model chunk is 1 - leg.  Reported orders use the MODEL
chunk (as upstream's ScheduledNode does).

Result "time" is upstream's only_run_time metric: (max over ranks of the
idle time accumulated after the rank's first F) + 2*n*(f+b+w), i.e. the
longest per-rank busy span, not the global makespan (also returned).

Upstream asserts (missing dependency, microbatch overflow, memory over the
limit, no pending W to free memory) make a run fail.  Upstream does not
catch them, so one failing variant aborts everything: strict=True mirrors
that; the default skips failing variants.
"""

import json
import sys
from collections import deque

F, B, W = 0, 1, 2


class VFail(Exception):
    pass


def _need(cond, what):
    if not cond:
        raise VFail(what)


class _VRun:
    def __init__(self, p, n, cost, mem, comm, limit, fill_f, fill_b, approved):
        self.p, self.n = p, n
        self.cost, self.mem, self.comm, self.limit = cost, mem, comm, limit
        self.fill_f, self.fill_b = fill_f, fill_b
        self.cnt = [[0] * 6 for _ in range(p)]
        # Completion times in one flat table indexed like upstream's node ids
        # (lane * p * n + rank * n + mb); -1 = not placed yet.  Keeping the
        # flat layout makes out-of-range look-ups behave exactly as upstream.
        self.t = [-1] * (6 * p * n)
        self.clock = [0] * p
        self.held = [0] * p
        self.idle = [0] * p
        self.todo_w = [deque() for _ in range(p)]
        self.seq = [[] for _ in range(p)]
        self.approved = approved if approved is not None else [-1] * p
        self.top_approved = max(self.approved)

    def key(self, lane, rank, mb):
        return (lane * self.p + rank) * self.n + mb

    def at(self, lane, rank, mb):
        """Completion time of an op; -1 when unplaced."""
        return self.t[self.key(lane, rank, mb)]

    def finish(self, src):
        """Time the input `src` arrives from; src None reproduces upstream's
        look-up with id -1 (Python's last list element, i.e. the final W of
        leg 1 on the last rank, last microbatch)."""
        return self.t[-1] if src is None else self.at(*src)

    def idle_budget(self, rank=-1):
        top = max([0] + self.idle)
        if rank >= 0:
            top = max(top, self.top_approved - self.approved[rank])
        return top

    def place(self, kind, leg, r):
        lane = 2 * kind + leg
        base = self.clock[r] + self.cost[kind]
        fin = base
        mb = self.cnt[r][lane]
        _need(mb < self.n, "microbatch overflow")
        _need(self.held[r] + self.mem[kind] <= self.limit, "memory over limit")
        if lane > 0:
            if kind < W:
                _need(self.at(lane - 1, r, mb) >= 0, "same-rank predecessor missing")
            else:
                _need(self.at(2 + leg, r, mb) >= 0, "W before its B")
        if kind < W:
            if leg == 1 and r < self.p - 1:
                up = self.at(lane, r + 1, mb)
                _need(up >= 0, "input from rank+1 missing")
                fin = max(fin, up + self.comm + self.cost[kind])
            if leg == 0 and r > 0:
                up = self.at(lane, r - 1, mb)
                _need(up >= 0, "input from rank-1 missing")
                fin = max(fin, up + self.comm + self.cost[kind])
        if self.cnt[r][0] > 0:
            self.idle[r] += fin - base
        self.t[self.key(lane, r, mb)] = fin
        self.clock[r] = fin
        self.held[r] += self.mem[kind]
        self.seq[r].append((kind, leg, mb))
        if kind == B:
            self.todo_w[r].append(leg)
        self.cnt[r][lane] += 1

    def place_w(self, r):
        _need(len(self.todo_w[r]) > 0, "no pending W")
        self.place(W, self.todo_w[r].popleft(), r)

    def cover_wait(self, r, src, take_last):
        """Fill the wait for input `src` (lane, rank, mb) or None with W's."""
        if src is not None:
            while (self.todo_w[r]
                   and self.finish(src) + self.comm >= self.clock[r] + self.cost[W]):
                self.place_w(r)
        ready = self.finish(src)
        if (self.todo_w[r]
                and ready + self.comm - self.clock[r]
                > self.idle_budget(r) - self.idle[r]):
            if take_last:
                self.place_w(r)

    def run(self):
        p, n = self.p, self.n
        cnt = self.cnt
        # first forward of leg 0 everywhere
        for r in range(p):
            self.place(F, 0, r)
        # turn around: from the last rank down, extra leg-0 forwards on all
        # ranks at or below, then the leg-1 forward of microbatch 0
        for r in range(p - 1, -1, -1):
            if r == p - 1:
                self.place(F, 1, r)
                continue
            arrive = self.at(1, r + 1, 0) + self.comm
            while (self.held[r] + self.mem[F] * (2 + 2 * r) <= self.limit
                   and self.clock[r] + self.cost[F] <= arrive
                   and cnt[r][0] < n - r):
                for q in range(r + 1):
                    self.place(F, 0, q)
            self.place(F, 1, r)
        # balance: alternate legs on ranks >= r until rank r has as many
        # forwards as rank r-1 and more leg-1 forwards (or leg 1 is done)
        leg = 0
        for r in range(1, p):
            while (cnt[r][0] + cnt[r][1] < cnt[r - 1][0] + cnt[r - 1][1]
                   or (cnt[r][1] <= cnt[r - 1][1] and cnt[r - 1][1] < n)):
                for q in range(p - 1, r - 1, -1):
                    if cnt[q][leg] < n:
                        self.place(F, leg, q)
                leg = 1 - leg
        # steady state
        for _ in range(2 * n):
            for r in range(p):
                while self.held[r] + self.mem[B] > self.limit:
                    self.place_w(r)
            first_leg, second_leg = [], []
            for r in range(p):
                if cnt[r][3] >= cnt[r][2]:
                    first_leg.append(r)
                elif r == p - 1:
                    second_leg.append(r)
                elif self.at(3, r + 1, cnt[r][3]) >= 0 or cnt[r][2] >= n:
                    second_leg.append(r)
                else:
                    first_leg.append(r)
            order = [(r, 1) for r in reversed(second_leg)] + [(r, 0) for r in first_leg]
            for r, lg in order:
                src = None
                if lg == 1 and r < p - 1:
                    src = (3, r + 1, cnt[r][3])
                if lg == 0 and r > 0:
                    src = (2, r - 1, cnt[r][2])
                self.cover_wait(r, src, lg == 1 or self.fill_b)
                self.place(B, lg, r)
            for r in range(p):
                if cnt[r][1] >= n:
                    continue
                pick = None
                if cnt[r][1] >= cnt[r][0]:
                    pick = 0
                elif r == p - 1:
                    pick = 1
                elif self.at(1, r + 1, cnt[r][1]) >= 0:
                    pick = 1
                elif cnt[r][0] < n:
                    if r == 0 or self.at(0, r - 1, cnt[r][0]) >= 0:
                        pick = 0
                if pick is None:
                    continue
                while self.held[r] + self.mem[F] > self.limit:
                    self.place_w(r)
                src = None
                if pick == 0 and r > 0:
                    src = (0, r - 1, cnt[r][0])
                if pick == 1 and r < p - 1:
                    src = (1, r + 1, cnt[r][1])
                self.cover_wait(r, src, self.fill_f)
                self.place(F, pick, r)
        for r in range(p):
            while self.todo_w[r]:
                self.place_w(r)
        return self.idle_budget()

    def check(self):
        """Dependency / completeness invariants of the finished schedule."""
        p, n, c, comm = self.p, self.n, self.cost, self.comm
        t = [[[self.at(l, r, m) for m in range(n)] for r in range(p)]
             for l in range(6)]
        for r in range(p):
            assert all(t[l][r][m] >= 0 for l in range(6) for m in range(n))
            for m in range(n):
                assert t[1][r][m] >= t[0][r][m] + c[F]
                assert t[2][r][m] >= t[1][r][m] + c[B]
                assert t[3][r][m] >= t[2][r][m] + c[B]
                assert t[4][r][m] >= t[2][r][m] + c[W]
                assert t[5][r][m] >= t[3][r][m] + c[W]
                if r > 0:
                    assert t[0][r][m] >= t[0][r - 1][m] + comm + c[F]
                    assert t[2][r][m] >= t[2][r - 1][m] + comm + c[B]
                if r < p - 1:
                    assert t[1][r][m] >= t[1][r + 1][m] + comm + c[F]
                    assert t[3][r][m] >= t[3][r + 1][m] + comm + c[B]
            clock, held = 0, 0
            for kind, leg, m in self.seq[r]:
                fin = t[2 * kind + leg][r][m]
                assert fin - c[kind] >= clock
                clock = fin
                held += self.mem[kind]
                assert held <= self.limit
        # ranks 0 and p-1: chunk turn-arounds
        for m in range(n):
            assert t[1][p - 1][m] >= t[0][p - 1][m] + c[F]
            assert t[2][0][m] >= t[1][0][m] + c[B]


def _try(p, n, cost, mem, comm, limit, fill_f, fill_b):
    """try_v_schedule including its re-run with the previous bubbles as the
    approved budget, repeated while the worst bubble strictly improves."""
    approved = None
    best = None
    while True:
        run = _VRun(p, n, cost, mem, comm, limit, fill_f, fill_b, approved)
        worst = run.run()
        run.check()
        if best is not None and not worst < best[0]:
            return best
        best = (worst, run)
        approved = run.idle


def v_heuristic(p, n, f, b, w, c, f_mem, b_mem, w_mem, max_mem=None,
                strict=False):
    limit = max_mem or f_mem * p * 2
    cost, mem = (f, b, w), (f_mem, b_mem, w_mem)
    best = None
    for fill_b in (True, False):
        for fill_f in (True, False):
            try:
                worst, run = _try(p, n, cost, mem, c, limit, fill_f, fill_b)
            except (VFail, IndexError):
                if strict:
                    return None
                continue
            if best is None or worst < best[0]:
                best = (worst, run, [fill_b, fill_f])
    if best is None:
        return None
    worst, run, flags = best
    orders = [[("FBW"[k], leg if k == F else 1 - leg, m) for k, leg, m in seq]
              for seq in run.seq]
    return {"time": worst + (f + b + w) * n * 2, "orders": orders,
            "variant": flags, "makespan": max(run.clock)}


def main(argv):
    strict = "--strict" in argv
    args = [a for a in argv if a != "--strict"]
    if len(args) != 10:
        print("usage: zbv_greedy_reference.py [--strict] P N F B W C F_MEM B_MEM W_MEM MAX_MEM",
              file=sys.stderr)
        return 2
    p, n = int(args[0]), int(args[1])
    rest = [float(x) if "." in x else int(x) for x in args[2:]]
    res = v_heuristic(p, n, *rest, strict=strict)
    if res is None:
        print(json.dumps({"time": None}))
        return 0
    print(json.dumps({"time": res["time"], "variant": res["variant"],
                      "ops": [",".join("%d%s%d.%d" % (r, "FIW"["FBW".index(k)], ch, m)
                                       for k, ch, m in seq)
                              for r, seq in enumerate(res["orders"])]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
