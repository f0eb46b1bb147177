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
finish
