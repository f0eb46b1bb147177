#!/usr/bin/env python3
"""Cross-schedule prediction on the executor: calibrate on one schedule's run, predict others.

  cross_schedule.py no-launch CALIBRATION_RUN OUT
      The `ppsim real --calibrate --json` output CALIBRATION_RUN with costs.launch_overhead and
      costs.start_offset set to 0: the model without them.
  cross_schedule.py row SCHEDULE M MEASURED_RUN PREDICTED_NO_LAUNCH
      One JSON row: the measured makespan of MEASURED_RUN (`ppsim real --calibration ... --json`),
      its prediction (with the launch model), and PREDICTED_NO_LAUNCH's (`ppsim run --json` with
      the calibration without it).

Called by scripts/validate.sh; validation_report.py --cross turns the rows into a table.
"""
import json
import sys


def no_launch(run, out):
    j = json.load(open(run))
    for key in ("launch_overhead", "start_offset"):
        j["calibrated"]["costs"][key] = 0
    json.dump(j, open(out, "w"))


def row(schedule, m, measured_run, no_launch_run):
    c = json.load(open(measured_run))["comparison"]
    print(json.dumps({
        "schedule": schedule,
        "microbatches": int(m),
        "measured": c["measured_makespan"],
        "predicted": c["predicted_makespan"],
        "predicted_without_launch": json.load(open(no_launch_run))["makespan"],
        "agrees": c["verdicts_agree"],
    }))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "no-launch":
        no_launch(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 6 and sys.argv[1] == "row":
        row(*sys.argv[2:6])
    else:
        sys.exit(__doc__)
