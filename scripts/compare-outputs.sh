#!/usr/bin/env bash
# Byte-compares what two ppsim builds print: `run --json` and `check` of every config in configs/,
# then N random variations of them (schedule, ranks, microbatches, chunks, comm style, prefetch,
# matching, split backward) and random custom op lists made from the `export` of those programs
# with their request ids shuffled, ops dropped or duplicated; and every config with 16384
# microbatches, large enough for lowering and validation to run on several threads. With TRACES=1,
# also the trace files of each run (`run --trace` in .json, .json.gz and .pftrace: the gzip file
# inflated, since its compressed bytes may differ). Exit 1 at the first difference.
# Usage: [TRACES=1] scripts/compare-outputs.sh OLD_PPSIM NEW_PPSIM [N=200] [SEED=1]
set -euo pipefail
OLD=$1 NEW=$2 N=${3:-200} SEED=${4:-1}
SRC=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cases=0

same() {  # the ppsim arguments; compares stdout, stderr and exit status
  local rc_old=0 rc_new=0
  "$OLD" "$@" >"$TMP/old.out" 2>"$TMP/old.err" || rc_old=$?
  "$NEW" "$@" >"$TMP/new.out" 2>"$TMP/new.err" || rc_new=$?
  cases=$((cases + 1))
  if [ "$rc_old" != "$rc_new" ] || ! cmp -s "$TMP/old.out" "$TMP/new.out" ||
    ! cmp -s "$TMP/old.err" "$TMP/new.err"; then
    echo "DIFFERENT: ppsim $* (exit $rc_old vs $rc_new)"
    diff "$TMP/old.out" "$TMP/new.out" | head -5 || true
    diff "$TMP/old.err" "$TMP/new.err" | head -5 || true
    exit 1
  fi
}

same_traces() {  # a config: with TRACES=1, its trace in each format from both builds
  [ "${TRACES:-0}" = 1 ] || return 0
  local ext
  for ext in json json.gz pftrace; do
    rm -f "$TMP/old.$ext" "$TMP/new.$ext"
    "$OLD" run "$@" --trace "$TMP/old.$ext" >/dev/null 2>&1 || true
    "$NEW" run "$@" --trace "$TMP/new.$ext" >/dev/null 2>&1 || true
    cases=$((cases + 1))
    if [ "$ext" = json.gz ] && [ -f "$TMP/old.$ext" ] && [ -f "$TMP/new.$ext" ]; then
      if gzip -dc "$TMP/old.$ext" >"$TMP/old.inflated" 2>/dev/null &&
        gzip -dc "$TMP/new.$ext" >"$TMP/new.inflated" 2>/dev/null &&
        cmp -s "$TMP/old.inflated" "$TMP/new.inflated"; then
        continue
      fi
    elif [ ! -e "$TMP/old.$ext" ] && [ ! -e "$TMP/new.$ext" ]; then
      continue  # refused alike (the run's own output was compared already)
    elif cmp -s "$TMP/old.$ext" "$TMP/new.$ext"; then
      continue
    fi
    echo "DIFFERENT: ppsim run $* --trace FILE.$ext"
    exit 1
  done
}

for cfg in "$SRC"/configs/*.json; do
  same run "$cfg" --json
  same check "$cfg"
  same_traces "$cfg"
done
# Large enough that lowering and validation run on several threads (a config whose schedule
# cannot take the override fails alike in both).
for cfg in "$SRC"/configs/*.json; do
  same run "$cfg" --json --set schedule.microbatches=16384
done

python3 - "$N" "$SEED" "$TMP" "$NEW" "$SRC" <<'PY' >"$TMP/list"
import json, random, subprocess, sys
n, seed, tmp, ppsim, src = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
rng = random.Random(seed)
for i in range(n):
    kind = rng.choice(["1f1b", "gpipe", "interleaved-1f1b"])
    P = rng.randint(3 if kind == "interleaved-1f1b" else 1, 8)
    sched = {"kind": kind, "ranks": P}
    if kind == "interleaved-1f1b":
        sched["chunks"] = rng.randint(2, 3)
        sched["microbatches"] = P * rng.randint(1, 3)
    else:
        sched["microbatches"] = rng.randint(1, 12)
    costs = {"forward": rng.choice([0.5, 1.0, 1.3])}
    if rng.random() < 0.5:
        costs.update({"backward_input": 1.0, "backward_weight": rng.choice([0.5, 1.0])})
    else:
        costs["backward"] = rng.choice([1.0, 2.0, 2.5])
    comm = {"style": rng.choice(["async", "async-send", "batched", "blocking"]),
            "latency": rng.choice([0, 0.05, 0.3]), "matching": rng.choice(["tag", "fifo"])}
    if comm["style"] == "async":
        comm["prefetch"] = rng.choice([0, 1, 2, "all"])
    cfg = {"name": f"rand{i}", "schedule": sched, "costs": costs, "comm": comm}
    path = f"{tmp}/rand{i}.json"
    json.dump(cfg, open(path, "w"))
    print(path)
    # A custom program from the lowered op lists, perturbed: request ids renumbered sparsely or
    # shuffled, an op dropped or duplicated (invalid programs must give the same diagnostics).
    out = subprocess.run([ppsim, "export", path], capture_output=True, text=True)
    if out.returncode != 0:
        continue
    rows = [r for r in out.stdout.splitlines() if r.strip() and not r.startswith("#")]
    rows = [r.split(":", 1)[1].strip() if ":" in r.split(",")[0] else r for r in rows]
    mode = rng.choice(["sparse", "drop", "dup", "same"])
    new_rows = []
    for row in rows:
        ops = row.split(",")
        if mode == "sparse":
            ops = [o.replace("#", "#1000000") if "#" in o else o for o in ops]
            ops = [o.replace("(", "(1000000").replace(";", ";1000000") if o.startswith("WAIT") else o
                   for o in ops]
        elif mode == "drop" and len(ops) > 1 and rng.random() < 0.5:
            del ops[rng.randrange(len(ops))]
        elif mode == "dup" and rng.random() < 0.3:
            k = rng.randrange(len(ops))
            ops.insert(k, ops[k])
        new_rows.append(",".join(ops))
    custom = {"name": f"custom{i}", "schedule": {"kind": "custom", "ops": new_rows},
              "costs": costs, "comm": {"latency": comm["latency"]}}
    path = f"{tmp}/custom{i}.json"
    json.dump(custom, open(path, "w"))
    print(path)
PY
while read -r cfg; do
  same run "$cfg" --json
  same check "$cfg"
  same_traces "$cfg"
done <"$TMP/list"
echo "identical: $cases runs of $OLD and $NEW"
