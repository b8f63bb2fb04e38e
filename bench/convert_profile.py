#!/usr/bin/env python3
"""Where the CUDA conversion kernels spend their time: each conversion of issue 6's goal set is
run once under Nsight Compute (`ncu --clock-control none`) through `layoutkit bench --device
cuda --repeats 1`, and every layoutkit kernel it launches is reported with its duration, DRAM
bytes, instructions executed, and how busy the issue slots, L1, L2 and DRAM were (percent of
their peak over the kernel's run). A kernel whose issue slots are busier than its DRAM is
limited by its arithmetic (index computation, casts), not by memory.

Usage (on a GPU machine with ncu): bench/convert_profile.py PATH/TO/layoutkit [--out FILE]
    [--only SUBSTRING]   profile only the conversions whose label contains SUBSTRING
"""
import argparse
import csv
import io
import subprocess

METRICS = [
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "smsp__inst_executed.sum",
    "smsp__issue_active.avg.pct_of_peak_sustained_elapsed",
    "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
]
SHORT = ["us", "DRAM rd MB", "DRAM wr MB", "Minstr", "issue %", "L1 %", "L2 %", "DRAM %", "occupancy %"]

CASES = [
    ("f32", "f32", "NCHW", "NCHW32c", "N=256,C=256,H=56,W=56"),
    ("f16", "f16", "NCHW", "NCHW32c", "N=256,C=256,H=56,W=56"),
    ("f32", "f32", "NCHW", "kHWC8", "N=64,C=3,H=1024,W=1024"),
    ("f32", "f32", "OIHW", "OIHW16i16o", "O=4096,I=4096,H=3,W=3"),
    ("f16", "f16", "OIHW", "OIHW16i16o", "O=4096,I=4096,H=3,W=3"),
    ("f32", "f32", "NHWC", "mace:in_out_channel", "N=256,H=56,W=56,C=250"),
    ("f16", "f16", "NHWC", "mace:in_out_channel", "N=256,H=56,W=56,C=250"),
    ("f32", "i8", "NCHW", "NCHW32c", "N=256,C=256,H=56,W=56"),
]


def profile(binary, case):
    t, to, a, b, dims = case
    cmd = ["ncu", "--clock-control", "none", "--csv", "--print-units", "base", "--metrics", ",".join(METRICS),
           "-k", "regex:^(convert|gather|fill|tile|runs)", binary, "bench", "--device", "cuda",
           "--from", a, "--to", b, "--dims", dims, "--dtype", t, "--to-dtype", to,
           "--repeats", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    rows = [r for r in csv.reader(io.StringIO(out.stdout)) if len(r) > 10]
    if not rows:
        return out.stdout + out.stderr, []
    head = rows[0]
    ki, ni, vi, idi = head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value"), head.index("ID")
    kernels = {}
    for r in rows[1:]:
        kernels.setdefault((int(r[idi]), r[ki]), {})[r[ni]] = float(r[vi].replace(",", ""))
    # The first launch of each kernel is the warm-up; keep the last launch of each name.
    last = {}
    for (i, name), m in sorted(kernels.items()):
        last[name] = m
    return out.stdout, list(last.items())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("layoutkit")
    p.add_argument("--out", default=None)
    p.add_argument("--only", default="")
    args = p.parse_args()
    lines = ["| conversion | kernel | " + " | ".join(SHORT) + " |", "|" + "---|" * (len(SHORT) + 2)]
    for case in CASES:
        label = f"{case[0]}>{case[1]} {case[2]}->{case[3]} {case[4]}"
        if args.only not in label:
            continue
        raw, kernels = profile(args.layoutkit, case)
        if not kernels:
            lines.append(f"| {label} | (no kernels profiled) |")
            print(raw[-3000:])
        for name, m in kernels:
            vals = [m.get(k, float("nan")) for k in METRICS]
            vals[0] /= 1e3
            vals[1] /= 1e6
            vals[2] /= 1e6
            vals[3] /= 1e6
            lines.append(f"| {label} | {name} | " + " | ".join(f"{v:.1f}" for v in vals) + " |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
