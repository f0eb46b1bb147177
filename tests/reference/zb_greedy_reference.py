#!/usr/bin/env python3
"""Independent reference for the zero-bubble (ZB-1p / ZB-2p) greedy heuristic.

This re-implements, decision for decision, the heuristic search published in
sail-sg/zero-bubble-pipeline-parallelism (auto_schedule.py: Graph.manual_order
driven by initial_solution / do_heuristic_search).  It is a test oracle for
ppsim, written from scratch in the Python 3 standard library only.

Vocabulary
  * F  forward of one microbatch on one stage
  * B  input-gradient backward (ppsim's "I")
  * W  weight-gradient backward
  * every op has an integer cost; t[...] below is the op's *completion* time
  * comm is added on every cross-stage edge (F: stage j-1 -> j, B: j+1 -> j)

The greedy builds one order per stage while simulating completion times.
Three boolean knobs select a variant; the search tries all eight and keeps
the one whose metric is strictly smallest, in the order
allow_bubble_before_first_b x prioritize_b x no_bubble_greedy, each True
then False.

Metric ("best_time"): max over stages of
    t[last W on stage] - t[first F on stage] + cost_f
i.e. each stage is measured from the start of its own first F, not from 0.
It is not the overall makespan (also reported as "makespan").

Failure: upstream raises ValueError("Cannot fit memory") when an F or B must
be placed but no pending W can be flushed to make room; it also trips an
assertion when a placement would exceed the memory limit.  Both are treated
here as "this variant does not fit".

Upstream's initial_solution does NOT catch that exception: one failing
variant aborts the whole search.  `heuristic(..., strict=True)` mirrors that
(returns None if ANY variant fails).  The default (strict=False) skips failing
variants and keeps the best of the others, which is the behaviour requested
for ppsim's oracle.  The two differ only when some but not all variants fail.

CLI
  zb_greedy_reference.py [--strict] P N F B W C MEM_F MEM_B MEM_W MAX_MEM
      -> {"best_time": ..., "variant": [...], "ops": ["0F0,0I0,0W0,...", ...]}
         or {"best_time": null} when nothing fits (exit 0)
  zb_greedy_reference.py [--strict] --settings [PATH]
      -> one JSON line per (setting, k), k in 1, 1.5, 2
"""

import json
import os
import sys
import time

F, B, W = 0, 1, 2
KIND_NAME = ("F", "B", "W")
PPSIM_LETTER = ("F", "I", "W")
VARIANTS = [
    (allow, prio, greedy)
    for allow in (True, False)
    for prio in (True, False)
    for greedy in (True, False)
]


class NoFit(Exception):
    """A variant could not respect the memory limit."""


class _Greedy:
    """State of one run of the greedy for a single flag combination."""

    def __init__(self, p, n, cost, mem, comm, limit):
        self.p = p
        self.n = n
        self.cost = cost          # per kind (F, B, W)
        self.mem = mem            # per kind (F, B, W)
        self.comm = comm
        self.limit = limit
        # done[kind][stage]: how many ops of that kind the stage has placed;
        # the next one of that kind is microbatch done[kind][stage].
        self.done = [[0] * p for _ in range(3)]
        self.end = [0] * p        # time at which the stage becomes free
        self.held = [0] * p       # activation memory currently held
        self.idle = [0] * p       # accumulated waiting (see place())
        # finish[kind][stage][mb]; 0 until placed (upstream reads unplaced
        # entries as 0 too, and we keep that behaviour).
        self.finish = [[[0] * n for _ in range(p)] for _ in range(3)]
        self.seq = [[] for _ in range(p)]

    # -- helpers -----------------------------------------------------------
    def worst_idle(self):
        return max([0] + self.idle)

    def pending_w(self, s):
        return self.done[W][s] < self.done[B][s]

    def place(self, s, kind):
        mb = self.done[kind][s]
        if self.held[s] + self.mem[kind] > self.limit:
            raise NoFit("placement over memory limit (upstream assert)")
        ready = self.end[s] + self.cost[kind]
        fin = ready
        if kind == F and s > 0:
            fin = max(fin, self.finish[F][s - 1][mb] + self.comm + self.cost[F])
        if kind == B and s < self.p - 1:
            fin = max(fin, self.finish[B][s + 1][mb] + self.comm + self.cost[B])
        # Waiting is only accounted once the stage has started (has an F).
        if self.done[F][s] > 0:
            self.idle[s] += fin - ready
        self.end[s] = fin
        self.finish[kind][s][mb] = fin
        self.held[s] += self.mem[kind]
        self.done[kind][s] += 1
        self.seq[s].append((KIND_NAME[kind], mb))

    def make_room(self, s, kind):
        """Flush W's until `kind` fits in memory, or fail."""
        while self.held[s] + self.mem[kind] > self.limit:
            if not self.pending_w(s):
                raise NoFit("Cannot fit memory")
            self.place(s, W)

    def fill_gap(self, s, arrival, no_bubble_greedy):
        """Use pending W's to cover the wait until `arrival` (input ready)."""
        while self.pending_w(s) and self.end[s] + self.cost[W] <= arrival:
            self.place(s, W)
        if self.pending_w(s) and self.end[s] < arrival:
            # One more W would overrun the arrival.  If the gap could be
            # absorbed within the current worst stage idle, only the greedy
            # flavour takes the W; otherwise it is always taken.
            if arrival - self.end[s] <= self.worst_idle() - self.idle[s]:
                if no_bubble_greedy:
                    self.place(s, W)
            else:
                self.place(s, W)

    # -- phases ------------------------------------------------------------
    def warmup(self, allow_bubble_before_first_b):
        p, n = self.p, self.n
        cF, cB = self.cost[F], self.cost[B]
        for s in range(p):
            self.place(s, F)
        extra = [0] * p
        # Walk from the last stage back, estimating when microbatch 0's B
        # reaches each stage; fill the time before it with more F's.
        b_arrival = self.finish[F][p - 1][0] + cB
        for s in range(p - 2, -1, -1):
            held, clock = self.held[s], self.end[s]
            while (self.done[F][s] + extra[s] < n
                   and held + self.mem[F] <= self.limit):
                if allow_bubble_before_first_b:
                    if clock + cF > b_arrival + self.comm:
                        break
                elif clock >= b_arrival + self.comm:
                    break
                held += self.mem[F]
                clock += cF
                extra[s] += 1
            b_arrival = max(clock, b_arrival + self.comm) + cB
        # A stage must not warm up at least as much as its predecessor
        # (sequential: uses the already trimmed value of stage s-1).
        for s in range(1, p):
            while (extra[s] > 0 and extra[s] >= extra[s - 1]
                   and self.done[F][s] + extra[s] < n):
                extra[s] -= 1
        for s in range(p - 1, -1, -1):
            for _ in range(extra[s]):
                self.place(s, F)
            self.place(s, B)

    def wants_f(self, s, prioritize_b):
        """Does stage s want another F this round (before the clamp)?"""
        d = self.done
        if d[F][s] >= self.n:
            return False
        if not (prioritize_b and s + 1 < self.p and d[F][s] >= d[F][s + 1] + 2):
            return True
        nxt = s + 1
        # Rough time at which the next stage could hand back a B.
        target = self.end[nxt] + self.cost[F] + self.cost[B] + self.comm
        if self.end[s] >= target:
            return False
        w_needed_cost = 0
        w_count = 0
        held = self.held[s] + self.mem[F]
        while held > self.limit and d[W][s] + w_count < d[B][s]:
            w_needed_cost += self.cost[W]
            held += self.mem[W]
            w_count += 1
        if self.end[s] + self.cost[F] + w_needed_cost <= target:
            return True
        # Otherwise skip the F if the wait would stay within the bubble
        # budget (upstream resets the W cost to zero before this test).
        if target - self.end[s] <= self.worst_idle() - self.idle[s]:
            return False
        return True

    def steady_round(self, i, prioritize_b, no_bubble_greedy):
        p = self.p
        want = [1 if self.wants_f(s, prioritize_b) else 0 for s in range(p)]
        # A stage only takes an F if every later stage does too.
        for s in range(p - 2, -1, -1):
            want[s] = min(want[s], want[s + 1])
        for s in range(p):
            if not want[s]:
                continue
            self.make_room(s, F)
            if s > 0:
                mb = self.done[F][s]
                arrival = self.finish[F][s - 1][mb] + self.comm
                self.fill_gap(s, arrival, no_bubble_greedy)
            self.place(s, F)
        for s in range(p - 1, -1, -1):
            assert self.done[B][s] == i
            self.make_room(s, B)
            if s + 1 < p:
                arrival = self.finish[B][s + 1][i] + self.comm
                self.fill_gap(s, arrival, no_bubble_greedy)
            if s == 0 and self.done[F][s] == self.n:
                while self.pending_w(s):
                    self.place(s, W)
            self.place(s, B)

    def run(self, allow, prio, greedy):
        for i in range(self.n):
            if i == 0:
                self.warmup(allow)
            else:
                self.steady_round(i, prio, greedy)
        for s in range(self.p):
            while self.done[W][s] < self.n:
                self.place(s, W)
        self.check()
        return max(
            self.finish[W][s][self.n - 1] - self.finish[F][s][0] + self.cost[F]
            for s in range(self.p)
        )

    # -- self-check (deliverable 3) -----------------------------------------
    def check(self):
        p, n, c, comm, t = self.p, self.n, self.cost, self.comm, self.finish
        for s in range(p):
            # Upstream's own final invariants.
            for mb in range(n):
                assert t[B][s][mb] >= t[F][s][mb] + c[B], (s, mb, "F->B")
                assert t[W][s][mb] >= t[B][s][mb] + c[W], (s, mb, "B->W")
                if s > 0:
                    assert t[F][s][mb] >= t[F][s - 1][mb] + comm + c[F], (s, mb, "F edge")
                if s < p - 1:
                    assert t[B][s][mb] >= t[B][s + 1][mb] + comm + c[B], (s, mb, "B edge")
            # Extra checks: every op exactly once, in microbatch order per
            # kind, no overlap on the stage, memory within the limit.
            seq = self.seq[s]
            assert len(seq) == 3 * n
            nxt = {"F": 0, "B": 0, "W": 0}
            clock = 0
            held = 0
            for kind, mb in seq:
                assert mb == nxt[kind], (s, kind, mb)
                nxt[kind] += 1
                k = KIND_NAME.index(kind)
                assert t[k][s][mb] - c[k] >= clock, (s, kind, mb, "overlap")
                clock = t[k][s][mb]
                held += self.mem[k]
                assert held <= self.limit
            assert clock == self.end[s]


def manual_order(p, n, cost_f, cost_b, cost_w, cost_comm, mem_f, mem_b, mem_w,
                 max_mem, allow_bubble_before_first_b, prioritize_b,
                 no_bubble_greedy):
    """One variant.  Returns (best_time, orders, finish, makespan); raises
    NoFit when the memory limit cannot be met."""
    limit = max_mem or mem_f * n * 3   # upstream default when unset/zero
    g = _Greedy(p, n, (cost_f, cost_b, cost_w), (mem_f, mem_b, mem_w),
                cost_comm, limit)
    best = g.run(allow_bubble_before_first_b, prioritize_b, no_bubble_greedy)
    return best, g.seq, g.finish, max(g.end)


def _validate(cost_f, cost_b, cost_w, cost_comm, mem_f, mem_b, mem_w):
    for v in (cost_f, cost_b, cost_w, cost_comm):
        if type(v) is not int:
            raise TypeError("costs must be int (as upstream GraphConfig)")
    if mem_f + mem_b + mem_w != 0:
        raise ValueError("mem_f + mem_b + mem_w must be 0")


def heuristic(p, n, cost_f, cost_b, cost_w, cost_comm, mem_f, mem_b, mem_w,
              max_mem, strict=False):
    """Best of the eight variants, or None when nothing fits (see module doc
    for `strict`)."""
    _validate(cost_f, cost_b, cost_w, cost_comm, mem_f, mem_b, mem_w)
    best = None
    for variant in VARIANTS:
        try:
            bt, seq, _, span = manual_order(
                p, n, cost_f, cost_b, cost_w, cost_comm, mem_f, mem_b, mem_w,
                max_mem, *variant)
        except NoFit:
            if strict:
                return None
            continue
        if best is None or bt < best["best_time"]:
            best = {"best_time": bt, "orders": seq, "variant": list(variant),
                    "makespan": span}
    return best


def ops_strings(orders):
    return [
        ",".join("%d%s%d" % (s, PPSIM_LETTER[KIND_NAME.index(k)], mb)
                 for k, mb in seq)
        for s, seq in enumerate(orders)
    ]


def settings_mode(path, strict):
    with open(path) as fh:
        doc = json.load(fh)
    seq_len = doc.get("sequence_length", 1024)
    for st in doc["settings"]:
        p, n, h, a = st["p"], st["n"], st["h"], st["a"]
        mem_f = 34 * h + 5 * a * seq_len
        mem_w = -32 * h
        mem_b = -mem_w - mem_f
        for k in (1, 1.5, 2):
            started = time.perf_counter()
            res = heuristic(p, n, st["f"], st["b"], st["w"], st["c"],
                            mem_f, mem_b, mem_w, int(k * p * mem_f),
                            strict=strict)
            elapsed = time.perf_counter() - started
            line = {"p": p, "n": n, "k": k,
                    "best_time": None if res is None else res["best_time"],
                    "variant": None if res is None else res["variant"]}
            print(json.dumps(line), flush=True)
            print("# p=%d n=%d k=%s %.3fs" % (p, n, k, elapsed),
                  file=sys.stderr, flush=True)


def main(argv):
    strict = "--strict" in argv
    args = [a for a in argv if a != "--strict"]
    if args and args[0] == "--settings":
        here = os.path.dirname(os.path.abspath(__file__))
        default = os.path.join(here, "..", "data", "zb_settings.json")
        settings_mode(args[1] if len(args) > 1 else default, strict)
        return 0
    if len(args) != 10:
        print(__doc__, file=sys.stderr)
        return 2
    vals = [int(x) for x in args]
    res = heuristic(*vals, strict=strict)
    if res is None:
        print(json.dumps({"best_time": None}))
        return 0
    print(json.dumps({"best_time": res["best_time"],
                      "variant": res["variant"],
                      "ops": ops_strings(res["orders"])}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
