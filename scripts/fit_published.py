#!/usr/bin/env python3
"""Fits the per-op cost model's constants (hardware.kernels and hardware.collectives, and the
NVLink step latency) to the measured runs of ../shared/data/published_runs/ by coordinate
descent on the mean absolute error of validate_published.py (docs/MODEL.md, "Fitted constants").

    fit_published.py [--ppsim build/cli/ppsim] [--rounds 3]
"""
import argparse, json, pathlib, re, subprocess, sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

# name -> (path in hardware, start: the model's default); each round tries FACTORS of the current
# value
PARAMS = {
    "launch": (("kernels", "launch"), 66e-6),
    "gemm_peak_fraction": (("kernels", "gemm_peak_fraction"), 0.8),
    "memory_fraction": (("kernels", "memory_fraction"), 0.765),
    "bus_efficiency": (("collectives", "bus_efficiency"), 0.77),
    "collective_latency": (("collectives", "latency"), 8.4e-6),
    "nvlink_step_latency": (("intra_node", "latency"), 5e-6),
}
FACTORS = [0.6, 0.8, 0.9, 1.0, 1.1, 1.25, 1.6]


def hardware(values):
    hw = {"intra_node": {"bandwidth": 300e9, "latency": values["nvlink_step_latency"]},
          "kernels": {}, "collectives": {}}
    for name, ((section, key), _) in PARAMS.items():
        if section != "intra_node":
            hw[section][key] = values[name]
    return hw


def mae(ppsim, values):
    out = subprocess.run([sys.executable, str(ROOT / "scripts/validate_published.py"), "--ppsim",
                          ppsim, "--hardware", json.dumps(hardware(values))],
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"mean absolute error ([\d.]+)%", out).group(1)), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ppsim", default=str(ROOT / "build/cli/ppsim"))
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    values = {k: v for k, (_, v) in PARAMS.items()}
    best, _ = mae(a.ppsim, values)
    for _ in range(a.rounds):
        for name in PARAMS:
            base = values[name]
            for f in FACTORS:
                trial = dict(values, **{name: base * f})
                if name.endswith("fraction") or name == "bus_efficiency":
                    if trial[name] > 1:
                        continue
                e, _ = mae(a.ppsim, trial)
                if e < best - 1e-3:
                    best, values = e, trial
            print(f"{name:<20} {values[name]:.4g}  MAE {best:.2f}%", flush=True)
    print(json.dumps(hardware(values)))
    print(mae(a.ppsim, values)[1])


if __name__ == "__main__":
    main()
