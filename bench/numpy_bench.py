#!/usr/bin/env python3
"""Times numpy and `layoutkit bench` on the same conversions, in the same run, on this machine.

numpy does each conversion the way its users do: pad (where the layout pads), reshape, transpose,
`np.ascontiguousarray` (the generic pad + reshape + transpose of tests/numpy_crosscheck.py). Both
report bytes read + written over the median time. Prints a Markdown table.

The machine this runs on is often shared and its speed drifts by tens of percent within
minutes, so each conversion runs in `--rounds` rounds, and each round times numpy (`--repeats`
times, median) and then `layoutkit bench` (which times the conversion and a copy alternately):
both see the same machine state. The table shows the median over the rounds of the layoutkit
and numpy bandwidths and of the two ratios (to the copy, with the lowest and highest round, and
to numpy, each round's layoutkit over the same round's numpy).

Usage: bench/numpy_bench.py PATH/TO/layoutkit [--threads N] [--repeats R] [--rounds K]
       [--src-offset BYTES] [--only TEXT]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from numpy_crosscheck import numpy_layout  # noqa: E402

# (source layout, destination name, canonical destination for numpy, dims)
SET = [
    ("NCHW", "NHWC", "NHWC", "N=16,C=256,H=96,W=96"),
    ("NHWC", "NCHW", "NCHW", "N=16,C=256,H=96,W=96"),
    ("NCHW", "NCHW32c", "NCHW32c", "N=16,C=256,H=96,W=96"),
    ("NCHW", "kHWC8", "NHWC8c", "N=16,C=3,H=1024,W=1024"),
    ("OIHW", "OIHW16i16o", "OIHW16i16o", "O=4096,I=1024,H=3,W=3"),
    ("NHWC", "mace:in_out_channel", "NH|CW|4c", "N=16,H=96,W=96,C=250"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("layoutkit")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--src-offset", type=int, default=0,
                    help="layoutkit's source starts this many bytes past a 64-byte boundary")
    ap.add_argument("--only", default="",
                    help="run only the rows whose 'dtype SRC->DST' contains this text, "
                         "e.g. 'f16 OIHW'")
    args = ap.parse_args()
    rows = []
    for dtype in ["f32", "f16"]:
        npt = {"f32": np.float32, "f16": np.float16}[dtype]
        for src, dst, canonical, dims in SET:
            if args.only not in f"{dtype} {src}->{dst}":
                continue
            d = dict(kv.split("=") for kv in dims.split(","))
            shape = tuple(int(d[a]) for a in src)
            x = np.random.default_rng(0).standard_normal(shape).astype(npt)
            y = numpy_layout(x, src, canonical)  # warm-up, and the output size
            runs = []
            for _ in range(args.rounds):
                times = []
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    y = numpy_layout(x, src, canonical)
                    times.append(time.perf_counter() - t0)
                np_gbps = (x.nbytes + y.nbytes) / statistics.median(times) / 1e9
                out = subprocess.run(
                    [args.layoutkit, "bench", "--from", src, "--to", dst, "--dims", dims,
                     "--dtype", dtype, "--threads", str(args.threads), "--repeats",
                     str(args.repeats), "--src-offset", str(args.src_offset), "--json"],
                    capture_output=True, text=True, check=True)
                run = json.loads(out.stdout)
                run["numpy_gbps"] = np_gbps
                runs.append(run)
                print(json.dumps(run), file=sys.stderr)
            med = lambda key: statistics.median(r[key] for r in runs)  # noqa: E731
            ratios = [r["ratio_to_copy"] for r in runs]
            per_round = [r["gbps"] / r["numpy_gbps"] for r in runs]
            vs_numpy = (statistics.median(per_round), min(per_round), max(per_round))
            rows.append((dtype, f"{src}->{dst}", dims, runs[0]["bytes_moved"] / 2 / 2**20,
                         med("gbps"), med("copy_gbps"), med("ratio_to_copy"),
                         (min(ratios), max(ratios)), med("numpy_gbps"), vs_numpy))
            print(f"{dtype} {src}->{dst}: layoutkit {med('gbps'):.2f} GB/s, "
                  f"numpy {med('numpy_gbps'):.2f} GB/s", file=sys.stderr)
    print(f"| type | conversion | dims | MiB | layoutkit GB/s | copy GB/s | layoutkit / copy "
          f"(rounds: low-high) | numpy GB/s | layoutkit / numpy (rounds: low-high) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for t, conv, dims, mib, g, c, r, (lo, hi), n, (x, xlo, xhi) in rows:
        print(f"| {t} | {conv} | {dims} | {mib:.0f} | {g:.2f} | {c:.2f} | {100 * r:.0f}% "
              f"({100 * lo:.0f}-{100 * hi:.0f}%) | {n:.2f} | {x:.1f}x ({xlo:.1f}-{xhi:.1f}x) |")


if __name__ == "__main__":
    main()
