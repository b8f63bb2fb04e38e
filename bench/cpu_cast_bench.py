#!/usr/bin/env python3
"""Casting conversions against the plain conversion of the same layouts, on the CPU.

For each pair of layouts, runs `layoutkit bench` for f32 -> f32 and for each cast (f32 -> f16,
f32 -> i8), alternating them for `--rounds` rounds so both see the same machine state, and
prints the median GB/s of each, the cast's GB/s ratio to the plain conversion, and its speed
ratio in elements per second (plain median time / cast median time: a cast moves fewer bytes
per element, so the two ratios differ). Issue 5's goal is 80%. Raw JSON of every run goes to
stderr.

Usage: bench/cpu_cast_bench.py PATH/TO/layoutkit [--threads N] [--repeats R] [--rounds K]
       [--src-offset BYTES]
"""
import argparse
import json
import statistics
import subprocess
import sys

PAIRS = [
    ("NCHW", "NCHW32c", "N=16,C=256,H=96,W=96"),
    ("NCHW", "NHWC", "N=16,C=256,H=96,W=96"),
    ("NHWC", "NCHW", "N=16,C=256,H=96,W=96"),
]
CASTS = ["f32", "f16", "i8"]


def bench(lk, src, dst, dims, to, threads, repeats, src_offset):
    out = subprocess.run(
        [lk, "bench", "--from", src, "--to", dst, "--dims", dims, "--dtype", "f32",
         "--to-dtype", to, "--threads", str(threads), "--repeats", str(repeats),
         "--src-offset", str(src_offset), "--json"],
        capture_output=True, text=True, check=True)
    print(out.stdout.strip(), file=sys.stderr)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("layoutkit")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--src-offset", type=int, default=0,
                    help="layoutkit's source starts this many bytes past a 64-byte boundary")
    a = ap.parse_args()
    print("| conversion | dims | threads | f32 GB/s | f32>f16 GB/s | f16 / f32 GB/s (time) "
          "| f32>i8 GB/s | i8 / f32 GB/s (time) |")
    print("|---|---|---|---|---|---|---|---|")
    for src, dst, dims in PAIRS:
        gbps = {c: [] for c in CASTS}
        secs = {c: [] for c in CASTS}
        for _ in range(a.rounds):
            for c in CASTS:
                r = bench(a.layoutkit, src, dst, dims, c, a.threads, a.repeats, a.src_offset)
                gbps[c].append(r["gbps"])
                secs[c].append(r["median_s"])
        m = {c: statistics.median(v) for c, v in gbps.items()}
        t = {c: statistics.median(v) for c, v in secs.items()}
        print(f"| {src}->{dst} | {dims} | {a.threads} | {m['f32']:.2f} | {m['f16']:.2f} | "
              f"{100 * m['f16'] / m['f32']:.0f}% ({100 * t['f32'] / t['f16']:.0f}%) | "
              f"{m['i8']:.2f} | {100 * m['i8'] / m['f32']:.0f}% ({100 * t['f32'] / t['i8']:.0f}%) |")


if __name__ == "__main__":
    main()
