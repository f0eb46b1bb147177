#!/usr/bin/env bash
# `--calibration FILE` across schedules (docs/PROFILES.md): a fragment measured on 1F1B predicts
# other stage layouts per rank. A 1F1B fragment of the bundled costs (F = 1, B = 2 on each of 4
# ranks) carried to interleaved 1F1B and DualPipeV (2 stages per rank: F = 0.5, I = W = 0.5) and
# to ZB-H1 (B split by the config's own I:W = 1:1) predicts exactly what their own configs do.
source "$(dirname "$0")/cli_expect.sh"
frag="$tmp/1f1b-fragment.json"
cat >"$frag" <<'JSON'
{"costs": {"per_stage": {"0": {"forward": 1, "backward": 2}, "1": {"forward": 1, "backward": 2},
                         "2": {"forward": 1, "backward": 2}, "3": {"forward": 1, "backward": 2}},
           "launch_overhead": 0, "start_offset": 0},
 "comm": {"latency": 0.05, "bandwidth": 25000000},
 "layout": {"stage_ranks": [0, 1, 2, 3]}}
JSON
makespan() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["makespan"])' "$out"; }
for c in interleaved-1f1b dualpipev zb-h1 gpipe; do
  expect 0 run "$SRC/configs/$c.json" --json
  own=$(makespan)
  expect 0 run "$SRC/configs/$c.json" --calibration "$frag" --json
  carried=$(makespan)
  if [ "$own" = "$carried" ]; then good "$c: carried costs give its makespan $own"; else bad "$c: $carried, expected $own"; fi
done

# The launch model: each op waits launch_overhead, so GPipe's makespan grows by (M+P-1) x 2L
# (at P = 4, M = 8: 22 L), and start_offset adds itself.
sed -e 's/"launch_overhead": 0, "start_offset": 0/"launch_overhead": 0.25, "start_offset": 1.5/' \
  -e '/"comm"/d' "$frag" >"$tmp/launch.json"
expect 0 run "$SRC/configs/gpipe.json" --json --set comm.latency=0 --set comm.bandwidth=0
plain=$(makespan)
expect 0 run "$SRC/configs/gpipe.json" --json --set comm.latency=0 --set comm.bandwidth=0 \
  --calibration "$tmp/launch.json"
python3 - "$plain" "$(makespan)" <<'PY' && good "launch model: + 22 L + O" || bad "launch model"
import sys
plain, launched = map(float, sys.argv[1:])
assert abs(launched - (plain + 22 * 0.25 + 1.5)) < 1e-9, (plain, launched)
PY

# Bad fragments: exit 2 naming the file and the key.
echo '{"costs": {"per_stage": {}}, "layout": {"stage_ranks": [0, 1]}}' >"$tmp/two.json"
expect 2 run "$SRC/configs/1f1b.json" --calibration "$tmp/two.json"
has "two.json"
has "layout.stage_ranks"
has "measured on 2 ranks and this config has 4"
echo '{"costs": {"per_stage": {}}, "layout": {"stage_ranks": ["x"]}}' >"$tmp/bad.json"
expect 2 run "$SRC/configs/1f1b.json" --calibration "$tmp/bad.json"
has "layout.stage_ranks"
echo '{"costs": {"per_stage": {}}, "layout": {"stage_ranks": [0], "ranks": 4}}' >"$tmp/unknown.json"
expect 2 run "$SRC/configs/1f1b.json" --calibration "$tmp/unknown.json"
has "layout.ranks"
echo '{"costs": {"launch_overhead": -1}}' >"$tmp/negative.json"
expect 2 run "$SRC/configs/1f1b.json" --calibration "$tmp/negative.json"
has "negative.json"
has "costs.launch_overhead"
# Key by key: a fragment of stage 0's forward leaves its I and W the config's, with the layout
# it was measured on as without it.
echo '{"costs":{"per_stage":{"0":{"forward":2}}},"layout":{"stage_ranks":[0,1,2,3]}}' >"$tmp/f0.json"
expect 0 run "$SRC/configs/1f1b.json" --json --set costs.per_stage.0.forward=2
set_by_flag=$(makespan)
expect 0 run "$SRC/configs/1f1b.json" --json --calibration "$tmp/f0.json"
if [ "$(makespan)" = "$set_by_flag" ]; then good "stage 0's forward alone: $set_by_flag"; else bad "$(makespan), expected $set_by_flag"; fi
# Carried to ZBV's layout, stage 0 alone would leave ranks 1-3 no work: refused.
echo '{"costs":{"per_stage":{"0":{"forward":2,"backward":2}}},"layout":{"stage_ranks":[0,1,2,3]}}' >"$tmp/only0.json"
expect 2 run "$SRC/configs/zbv.json" --calibration "$tmp/only0.json"
has "only0.json: key 'costs.per_stage.1': not measured"
echo '{"costs":{"per_stage":{"00":{"forward":2}}},"layout":{"stage_ranks":[0,1,2,3]}}' >"$tmp/zero.json"
expect 2 run "$SRC/configs/1f1b.json" --calibration "$tmp/zero.json"
has "zero.json: key 'costs.per_stage.00'"
echo '{"costs":{"per_stage":{"0":{"foo":1}}},"layout":{"stage_ranks":[0,1,2,3]}}' >"$tmp/foo.json"
expect 2 run "$SRC/configs/1f1b.json" --calibration "$tmp/foo.json"
has "foo.json: key 'costs.per_stage.0.foo': unknown key"
# Out of bounds: the fragment's file and key, never a --set nobody typed.
echo '{"calibrated":{"costs":{"per_stage":{"0":{"forward":1e300}}}}}' >"$tmp/huge.json"
expect 2 run "$SRC/configs/1f1b.json" --calibration "$tmp/huge.json"
has "huge.json: key 'calibrated.costs.per_stage.0.forward'"
lacks "--set"

# A fragment carries its time unit: import-profile's (ms) onto a config run in us.
expect 0 import-profile "$SRC"/docs/examples/profile-zb-h1/rank*.json -o "$tmp/cal.json"
expect 0 run "$SRC/configs/zb-h1.json" --json --calibration "$tmp/cal.json"
in_ms=$(makespan)
expect 0 run "$SRC/configs/zb-h1.json" --json --set time_unit=us --calibration "$tmp/cal.json"
python3 - "$in_ms" "$(makespan)" <<'PY' && good "time_unit: ms fragment onto us" || bad "time_unit"
import sys
ms, us = map(float, sys.argv[1:])
assert abs(us - 1000 * ms) < 1e-6 * us, (ms, us)
PY

# Near misses: a subcommand, an option, a list with spaces.
expect 2 serach "$SRC/configs/1f1b.json"
has "unknown subcommand 'serach'; did you mean 'search'?"
expect 2 compare "$SRC/configs/1f1b.json" --schedule 1f1b
has "did you mean --schedules?"
expect 0 compare "$SRC/configs/1f1b.json" --schedules "1f1b, zbv"
has "zbv"
# --calibration wherever costs are used: compare, check, search and report take the fragment as
# run does (the same makespan), and name it when it is bad.
expect 0 run "$SRC/configs/zb-h1.json" --json --calibration "$tmp/cal.json"
run_ms=$(makespan)
expect 0 compare "$SRC/configs/zb-h1.json" --json --calibration "$tmp/cal.json"
python3 - "$out" "$run_ms" <<'PY' && good "compare --calibration = run --calibration" || bad "compare --calibration"
import json, sys
rows = json.load(open(sys.argv[1]))
assert abs(rows[0]["makespan"] - float(sys.argv[2])) < 1e-9 * float(sys.argv[2]), rows[0]
PY
expect 0 check "$SRC/configs/zb-h1.json" --calibration "$tmp/cal.json"
expect 0 search "$SRC/configs/zb-h1.json" --memory-limit 4GB --json --calibration "$tmp/cal.json"
expect 0 report "$SRC/configs/zb-h1.json" -o "$tmp/cal-report.html" --calibration "$tmp/cal.json"
echo '{"costs": {"forward": -1}}' > "$tmp/neg.json"
for sub in compare check report; do
  if [ "$sub" = report ]; then extra=(-o "$tmp/neg-report.html"); else extra=(); fi
  expect 2 "$sub" "$SRC/configs/zb-h1.json" "${extra[@]}" --calibration "$tmp/neg.json"
  has "$tmp/neg.json"
done
expect 2 search "$SRC/configs/zb-h1.json" --memory-limit 4GB --calibration "$tmp/neg.json"
has "$tmp/neg.json"
finish
