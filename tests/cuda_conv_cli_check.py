#!/usr/bin/env python3
"""On a GPU machine: `layoutkit conv --device cuda` against `--engine reference` on the same .npy
operands (f16 activations and filters in NCHW / NHWC / OIHW / OHWI, outputs in NCHW, NHWC and
NCHW8c, bias and ReLU, stride and padding, depthwise and C = 3 in the direct kernel), relative
error under 1e-2; int8 activations and filter with an exact i32 output, and requantised to an i8
output with a per-channel scale and bias (`--scale`, byte for byte the reference's); and a clear
error for a problem no GPU kernel takes (grouped int8).

Usage: tests/cuda_conv_cli_check.py PATH/TO/layoutkit
"""
import os
import subprocess
import sys
import tempfile

import numpy as np


def run(cmd, ok=True):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if ok and p.returncode != 0:
        raise SystemExit(f"FAILED ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return p


def main():
    exe = os.path.abspath(sys.argv[1])
    rng = np.random.default_rng(7)
    cases = [
        # n, c, h, w, o, k, stride, pad, x format, w format, y format, groups, type
        (2, 64, 14, 14, 96, 3, 1, 1, "NHWC", "OIHW", "NHWC", 1, "f16"),
        (1, 32, 17, 9, 40, 3, 2, 1, "NCHW", "OHWI", "NCHW", 1, "f16"),
        (3, 128, 7, 7, 256, 1, 1, 0, "NHWC", "OHWI", "NCHW8c", 1, "f16"),
        (2, 32, 12, 12, 32, 3, 1, 1, "NHWC", "OHWI", "NHWC", 32, "f16"),
        (1, 3, 16, 16, 8, 3, 2, 1, "NCHW", "OIHW", "NCHW", 1, "f16"),
        (2, 64, 10, 10, 64, 3, 1, 1, "NCHW", "OIHW", "NHWC", 1, "i8"),
        (2, 48, 9, 11, 72, 3, 1, 1, "NHWC", "OIHW", "NHWC", 1, "i8q"),
        (1, 128, 7, 7, 96, 3, 2, 1, "NCHW", "OHWI", "NCHW", 1, "i8q"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        p = lambda f: os.path.join(tmp, f)
        for i, (n, c, h, w, o, k, st, pad, xf, wf, yf, groups, t) in enumerate(cases):
            if t in ("i8", "i8q"):
                x = rng.integers(-128, 128, (n, c, h, w)).astype(np.int8)
                wt = rng.integers(-128, 128, (o, c // groups, k, k)).astype(np.int8)
            else:
                x = rng.standard_normal((n, c, h, w)).astype(np.float16)
                wt = rng.standard_normal((o, c // groups, k, k)).astype(np.float16)
            np.save(p("x.npy"), x if xf == "NCHW" else np.ascontiguousarray(x.transpose(0, 2, 3, 1)))
            np.save(p("w.npy"), wt if wf == "OIHW" else np.ascontiguousarray(wt.transpose(0, 2, 3, 1)))
            np.save(p("b.npy"), rng.standard_normal(o).astype(np.float32))
            base = [exe, "conv", p("x.npy"), p("w.npy"), "--input-format", xf, "--filter-format", wf,
                    "--output-format", yf, "--stride", str(st), "--padding", str(pad),
                    "--groups", str(groups), "--relu"]
            if t == "i8":
                base += ["--output-dtype", "i32"]
            elif t == "i8q":
                # Scales that take the sums (about 5500 x sqrt(C x 9)) to about +-64.
                scale = (64 / (5500 * np.sqrt(c * k * k)) * rng.uniform(0.5, 1.5, o)).astype(np.float32)
                np.save(p("s.npy"), scale)
                base += ["--bias", p("b.npy"), "--scale", p("s.npy"), "--output-dtype", "i8"]
            else:
                base += ["--bias", p("b.npy"), "--output-dtype", "f32"]
            run(base[:2] + [p("x.npy"), p("w.npy"), p("gpu.npy")] + base[4:] + ["--device", "cuda"])
            run(base[:2] + [p("x.npy"), p("w.npy"), p("ref.npy")] + base[4:] + ["--engine", "reference"])
            g, r = np.load(p("gpu.npy")).astype(np.float64), np.load(p("ref.npy")).astype(np.float64)
            rel = np.linalg.norm(g - r) / np.linalg.norm(r)
            if t in ("i8", "i8q") and not np.array_equal(g, r):
                raise SystemExit(f"case {i}: {t} output differs from the exact reference")
            if g.shape != r.shape or rel > 1e-2:
                raise SystemExit(f"case {i}: shapes {g.shape} {r.shape}, relative error {rel:.2e}")
            print(f"case {i} ({t} {xf} x {wf} -> {yf}, groups {groups}): relative error {rel:.2e}")
        np.save(p("xg.npy"), rng.integers(-128, 128, (1, 64, 8, 8)).astype(np.int8))
        np.save(p("wg.npy"), rng.integers(-128, 128, (64, 32, 3, 3)).astype(np.int8))
        e = run([exe, "conv", p("xg.npy"), p("wg.npy"), p("bad.npy"), "--groups", "2",
                 "--device", "cuda"], ok=False)
        if e.returncode != 2 or "groups" not in e.stderr or os.path.exists(p("bad.npy")):
            raise SystemExit(f"grouped int8 on cuda: expected a clear error, got {e.returncode}: {e.stderr}")
        print("grouped int8 on cuda:", e.stderr.strip())
    print("cuda conv CLI check passed")


if __name__ == "__main__":
    main()
